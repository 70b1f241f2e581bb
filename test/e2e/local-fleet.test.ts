/**
 * `npm run fleet` (test/support/local-fleet.ts) for real: 2 nodes of sites/default on 127.0.0.2 and 127.0.0.3 with a
 * base port, sharing a throwaway Redis. An open through node 1 is listed by status on node 2 (with the node that holds
 * it); SIGINT stops every node and Redis, the tool exits 0 and leaves no process behind.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as dgram from 'node:dgram';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';
import { requireTool } from '../support/tools';
import { nodePorts } from '../support/local-fleet';

const TOOL = path.join(repoRoot, 'dist', 'test', 'support', 'local-fleet.js');
const HOSTS = ['127.0.0.2', '127.0.0.3'];
const AUTH = 'Basic ' + Buffer.from('demo:demo').toString('base64');

function tcpFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

function udpFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => {
      s.close();
      resolve(false);
    });
    s.bind(port, host, () => s.close(() => resolve(true)));
  });
}

/** a base port whose every port is free on both nodes' addresses (TCP, and UDP where the gateway binds UDP) */
async function freeBase(): Promise<number> {
  for (let tries = 0; tries < 20; tries++) {
    const base = 20000 + 20 * Math.floor(Math.random() * 1500);
    const p = nodePorts(base);
    const tcp = [p.api, p.flv, p.rtsp, ...p.push];
    const udp = [p.rtp, p.rtcp, ...p.push];
    let ok = true;
    for (const h of HOSTS) {
      for (const port of tcp) ok &&= await tcpFree(h, port);
      for (const port of udp) ok &&= await udpFree(h, port);
    }
    if (ok) return base;
  }
  throw new Error('no free base port found');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function post(url: string, body: unknown): Promise<{ errCode: number; message: string; data: Array<Record<string, unknown>> }> {
  const res = await fetch(url, { method: 'POST', headers: { Authorization: AUTH, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return (await res.json()) as { errCode: number; message: string; data: Array<Record<string, unknown>> };
}

describe('local fleet tool (npm run fleet)', function () {
  this.timeout(120_000);
  let tool: ChildProcess | undefined;
  let out = '';

  after(() => {
    if (tool && tool.exitCode === null && tool.signalCode === null) tool.kill('SIGKILL');
  });

  it('starts 2 nodes on a base port, routes an open and status across them, and stops everything on SIGINT', async () => {
    requireTool('redis-server', 'redis-server');
    assert.ok(fs.existsSync(TOOL), `${TOOL} not built`);
    const base = await freeBase();
    tool = spawn(process.execPath, [TOOL, '2', '--base-port', String(base)], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => tool!.once('exit', (code, signal) => resolve({ code, signal })));
    tool.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    tool.stderr!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });

    // its table once every node answers /healthz
    const by = Date.now() + 90_000;
    const rows = () => [...out.matchAll(/^(node-[a-h])\s+(http:\/\/[\d.]+:\d+)\s+([\d.]+:\d+)/gm)];
    while (!(out.includes('fleet: ready') && rows().length === 2)) {
      if (tool.exitCode !== null) assert.fail(`the tool exited (${tool.exitCode}) before its table:\n${out.slice(-3000)}`);
      if (Date.now() > by) assert.fail(`no table within 90 s:\n${out.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const table = rows().map((m) => ({ node: m[1], api: m[2], push: m[3] }));
    assert.deepEqual(
      table.map((r) => r.node),
      ['node-a', 'node-b'],
    );
    assert.deepEqual(
      table.map((r) => r.api),
      HOSTS.map((h) => `http://${h}:${base}`),
    );
    assert.deepEqual(
      table.map((r) => r.push),
      HOSTS.map((h) => `${h}:${base + 10}`),
    );
    const pids = childrenOf(tool.pid!);
    assert.equal(pids.length, 3, `redis-server and 2 nodes under the tool: ${pids.join(', ')}`);

    const opened = await post(`${table[0].api}/strm/open`, { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 1 });
    assert.equal(opened.errCode, 0, opened.message);
    const req = opened.data[0];
    assert.ok(HOSTS.includes(req.host as string), `push host ${String(req.host)}`);
    assert.equal(req.port, base + 10);
    const holder = table[HOSTS.indexOf(req.host as string)].node;

    const res = await fetch(`${table[1].api}/strm/status`, { headers: { Authorization: AUTH } });
    const status = (await res.json()) as { errCode: number; data: Array<Record<string, unknown>> };
    assert.equal(status.errCode, 0);
    const listed = status.data.find((e) => e.reqId === req.reqId);
    assert.ok(listed, `status on node-b lists the request opened through node-a: ${JSON.stringify(status.data)}`);
    assert.equal(listed.node, holder);
    assert.equal(listed.simNo, '013800138000');

    tool.kill('SIGINT');
    const end = await exited;
    assert.deepEqual(end, { code: 0, signal: null }, out.slice(-3000));
    assert.match(out, /fleet: stopped\n/);
    for (const pid of pids) assert.equal(alive(pid), false, `process ${pid} still running after the tool exited`);
  });
});
