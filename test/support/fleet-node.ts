/**
 * A node of a fleet for the fleet tests: the real gateway (`node dist/core/main.js site.json`) as a child process,
 * bound to one loopback address (127.0.0.2, .3, …) on ports every node shares, with the fleet's directory URL. Its
 * log (stdout and stderr together), its REST API on its own address, SIGKILL and SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { apiAt, type ApiAnswer } from './cluster-gateway';
import { repoRoot, scratchDir } from './paths';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');

export interface FleetPorts {
  http: number;
  flv: number;
  live2013: number;
  live2019: number;
  replay2013: number;
  replay2019: number;
}

export interface FleetNode {
  nodeId: string;
  host: string;
  child: ChildProcess;
  log(): string;
  lines<T = Record<string, unknown>>(msg: string): T[];
  api(method: string, p: string, body?: unknown, auth?: string): Promise<ApiAnswer>;
  /** SIGKILL: the node stops without a word to the fleet */
  kill(): void;
  /** SIGTERM and wait for its exit; resolves to its exit code */
  stop(): Promise<number | null>;
}

/** whether a port is free on every one of the hosts (TCP; UDP shares the numbers) */
async function freeOnAll(hosts: string[], port: number): Promise<boolean> {
  for (const host of hosts) {
    const ok = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, host, () => srv.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  return true;
}

/** six ports free on every host, for the nodes to share */
export async function sharedPorts(hosts: string[]): Promise<FleetPorts> {
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 2000) * 10;
    const all = [0, 1, 2, 3, 4, 5].map((i) => base + i);
    let ok = true;
    for (const p of all)
      if (!(await freeOnAll(hosts, p))) {
        ok = false;
        break;
      }
    if (ok) return { http: base, flv: base + 1, live2013: base + 2, live2019: base + 3, replay2013: base + 4, replay2019: base + 5 };
  }
  throw new Error(`no free run of six ports on ${hosts.join(', ')}`);
}

/**
 * Starts a node bound to `host` with the given gateway keys (merged over the fleet's: applications A, B, ops, a memory
 * store, the ports) and plugins; resolves once it logged "gateway started".
 */
export async function startFleetNode(o: {
  nodeId: string;
  host: string;
  ports: FleetPorts;
  directoryUrl: string;
  gateway?: Record<string, unknown>;
  plugins: Array<{ name: string; config?: Record<string, unknown> }>;
  env?: Record<string, string>;
}): Promise<FleetNode> {
  const dir = scratchDir(`fleet-${o.nodeId}`);
  const site = {
    gateway: {
      httpPort: o.ports.http,
      listenHost: o.host,
      publicHost: o.host,
      dataDir: path.join(dir, 'data'),
      store: { kind: 'memory' },
      nodeId: o.nodeId,
      instId: o.nodeId,
      directoryUrl: o.directoryUrl,
      workers: 1,
      applications: [
        { appId: 'A', user: 'a', password: 'a' },
        { appId: 'B', user: 'b', password: 'b' },
        { appId: 'ops', user: 'ops', password: 'ops', admin: true },
      ],
      metricsAccess: 'open',
      ...o.gateway,
    },
    plugins: o.plugins.map((p) => ({ config: {}, ...p })),
  };
  const file = path.join(dir, 'site.json');
  fs.writeFileSync(file, JSON.stringify(site));
  const child = spawn(process.execPath, [MAIN, file], { env: { PATH: process.env.PATH ?? '', ...o.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  // with workers, the primary says so once every worker is up
  const started = Number(o.gateway?.workers ?? 1) > 1 ? 'gateway started with workers' : '"msg":"gateway started"';
  while (!out.includes(started) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (child.exitCode !== null || !out.includes(started)) {
    if (child.exitCode === null) child.kill('SIGKILL');
    assert.fail(`node ${o.nodeId} did not start:\n${out}`);
  }
  return {
    nodeId: o.nodeId,
    host: o.host,
    child,
    log: () => out,
    lines: <T>(msg: string) =>
      out
        .split('\n')
        .filter((l) => l.includes(msg))
        .map((l) => JSON.parse(l) as T),
    api: (method, p, body, auth) => apiAt(o.host, o.ports.http, method, p, body, auth, { timeoutMs: 10_000 }),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const code = await exited;
      fs.rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
}
