/**
 * The real gateway with several workers (`workers: N`) as a child process, for the cluster tests: its site file, its
 * ports (from its "gateway started" line), its log (stdout and stderr together), its workers' pids, the REST API,
 * and a platform's callback receiver.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { channelKey } from '../../plugin-sdk/cluster';
import { removeInternalSockets } from '../../core/cluster/forwarder';
import { shardOf } from '../../core/cluster/shard';
import { waitFor } from '../e2e/helpers';
import { repoRoot, scratchDir } from './paths';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
export const AUTH_A = `Basic ${Buffer.from('a:a').toString('base64')}`;
export const AUTH_B = `Basic ${Buffer.from('b:b').toString('base64')}`;

export interface Notice {
  act: string;
  reqId: string;
  closeCause?: number;
  simNo: string;
}

/** the platform's `POST <cb>/strm_notif` endpoint: keeps every notice */
export class CallbackReceiver {
  readonly notices: Notice[] = [];
  private server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      if (req.url === '/strm_notif') this.notices.push(JSON.parse(body) as Notice);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"errCode":0}');
    });
  });
  port = 0;
  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }
  stop(): void {
    this.server.close();
  }
}

export interface ApiAnswer {
  status: number;
  json: any;
  text: string;
}

export async function api(port: number, method: string, p: string, body?: unknown, auth = AUTH_A, agent?: http.Agent): Promise<ApiAnswer> {
  return apiAt('127.0.0.1', port, method, p, body, auth, { agent });
}

/** one API call to `host`:`port`; `timeoutMs`: fail when no answer comes within it */
export function apiAt(
  host: string,
  port: number,
  method: string,
  p: string,
  body?: unknown,
  auth = AUTH_A,
  o: { agent?: http.Agent; timeoutMs?: number } = {},
): Promise<ApiAnswer> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host,
        port,
        method,
        path: p,
        agent: o.agent ?? false,
        timeout: o.timeoutMs,
        headers: { Authorization: auth, ...(data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    if (o.timeoutMs) req.on('timeout', () => req.destroy(new Error(`no answer from ${host}:${port} within ${o.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data);
  });
}

/**
 * SIMs from `first` up that a quiet node places on worker 0, 1, … count-1 when opened in that order: nobody owns them,
 * and placement's ties go to the worker a SIM hashes to (core/cluster/node-claims.ts)
 */
export function simsOfWorkers(first: number, chanId: number, count: number): string[] {
  const sims: string[] = [];
  for (let i = 0; sims.length < count; i++) {
    const sim = String(first + i);
    if (shardOf(channelKey(sim, chanId), count) === sims.length) sims.push(sim);
  }
  return sims;
}

/** worker index -> pid, read from the children of the primary */
export function workerPids(primary: number): Map<number, number> {
  const out = new Map<number, number>();
  let pids: string[] = [];
  try {
    pids = execFileSync('pgrep', ['-P', String(primary)], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean);
  } catch {
    /* none */
  }
  for (const pid of pids) {
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      const idx = env.find((e) => e.startsWith('JTGW_WORKER_INDEX='));
      if (idx) out.set(Number(idx.split('=')[1]), Number(pid));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** waits until the primary has started worker `index` again in place of the process `oldPid`: the worker pids then */
export function workerRestarted(primary: number, index: number, oldPid: number | undefined): Promise<Map<number, number>> {
  return waitFor(
    `worker ${index} again`,
    () => {
      const now = workerPids(primary);
      return now.get(index) && now.get(index) !== oldPid ? now : undefined;
    },
    30_000,
    100,
  );
}

export interface ClusterGateway {
  child: ChildProcess;
  dir: string;
  ports: Record<string, number>;
  /** everything the gateway printed so far */
  log(): string;
  /** parsed log lines whose text includes `msg` */
  lines<T = Record<string, unknown>>(msg: string): T[];
  api(method: string, p: string, body?: unknown, auth?: string, agent?: http.Agent): Promise<ApiAnswer>;
  /** SIGKILL if still running, scratch folder removed */
  stop(): void;
}

/**
 * Starts `node dist/core/main.js site.json` with the given gateway keys (merged over loopback, ports 0, a memory
 * store and applications A, B, ops, and gov when gov-timed-token runs) and plugins, and waits until every worker is up.
 */
export async function startClusterGateway(
  label: string,
  gateway: Record<string, unknown>,
  plugins: Array<{ name: string; config?: Record<string, unknown> }>,
): Promise<ClusterGateway> {
  const dir = scratchDir(label);
  const site = {
    gateway: {
      httpPort: 0,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      store: { kind: 'memory' },
      applications: [
        { appId: 'A', user: 'a', password: 'a' },
        { appId: 'B', user: 'b', password: 'b' },
        { appId: 'ops', user: 'ops', password: 'ops', admin: true },
        // a gov application needs the plugin that checks its tokens
        ...(plugins.some((p) => p.name === 'gov-timed-token') ? [{ appId: 'gov', user: 'gov', password: 'gov', gov: true }] : []),
      ],
      metricsAccess: 'open',
      ...gateway,
    },
    plugins: plugins.map((p) => ({ config: {}, ...p })),
  };
  const file = path.join(dir, 'site.json');
  fs.writeFileSync(file, JSON.stringify(site));
  const child = spawn(process.execPath, [MAIN, file], { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  child.stderr!.on('data', (d) => {
    out += d;
  });
  const deadline = Date.now() + 60_000;
  while (!out.includes('gateway started with workers') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const stop = () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    // a primary killed this way cannot remove its workers' internal sockets itself (SIGTERM's exit does)
    if (child.pid !== undefined) removeInternalSockets(String(child.pid));
  };
  if (child.exitCode !== null || !out.includes('gateway started with workers')) {
    stop();
    assert.fail(`the gateway did not start its workers:\n${out}`);
  }
  const lines = <T>(msg: string): T[] =>
    out
      .split('\n')
      .filter((l) => l.includes(msg))
      .map((l) => JSON.parse(l) as T);
  const ports = lines<{ msg: string; ports: Record<string, number> }>('"msg":"gateway started"')[0].ports;
  assert.ok(ports['gateway.httpPort'] > 0, out);
  return {
    child,
    dir,
    ports,
    stop,
    lines,
    log: () => out,
    api: (method, p, body, auth, agent) => api(ports['gateway.httpPort'], method, p, body, auth, agent),
  };
}
