/**
 * A fleet on one machine: `npm run fleet -- [N] [--base-port P]` starts a throwaway redis-server on a free loopback
 * port (no persistence) and N gateway nodes (default 3, at most 8) of `sites/default`, node i (0-based) bound to
 * 127.0.0.(i+2) with GW_LISTEN_HOST and GW_PUBLIC_HOST set to that address, on the default site's ports (or from
 * --base-port P: API P, FLV P+1, RTSP P+2, RTMP P+3, RTP P+4, RTCP P+5, terminal push P+10..P+13), GW_NODE_ID node-a, node-b, …,
 * GW_DIRECTORY_URL the local Redis, GW_DATA_DIR ./data/fleet/<nodeId>, GW_WORKERS=1. Each node's log lines are
 * prefixed with its id. Once every node answers GET /healthz 200 it prints a table (node, API, push address) and
 * example curl commands, then runs until Ctrl-C (SIGINT) or SIGTERM: every node gets SIGTERM (SIGKILL after 10 s),
 * then Redis, and it exits 0. A node (or Redis) that exits on its own stops everything: exit 1 with its last lines.
 *
 * It lives under test/support because tsconfig compiles test/** (sites/ is not compiled) and core/fleet/ is the
 * fleet's own code; README.md ("A fleet on one machine") names it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { repoRoot } from './paths';
import { freePort, pingOnce } from './redis';

export const MAX_NODES = 8;
export const DEFAULT_NODES = 3;
/** how long a node has to answer /healthz 200 */
const HEALTH_TIMEOUT_MS = 120_000;
/** a node that has not exited this long after SIGTERM gets SIGKILL */
const STOP_GRACE_MS = 10_000;
/** log lines kept per node, shown when it exits early */
const KEEP_LINES = 30;

export const USAGE = `usage: npm run fleet -- [N] [--base-port P]
  N              gateway nodes of sites/default, 1 to ${MAX_NODES} (default ${DEFAULT_NODES}); node i on 127.0.0.(i+2)
  --base-port P  ports P (API), P+1 (FLV), P+2 (RTSP), P+3 (RTMP), P+4/P+5 (RTSP's RTP/RTCP), P+10..P+13 (terminal push) instead of
                 the default site's 7080, 7081, 7554, 7556/7557, 7612-7615`;

export interface FleetOptions {
  nodes: number;
  basePort?: number;
}

export function parseFleetArgs(argv: readonly string[]): FleetOptions {
  const o: FleetOptions = { nodes: DEFAULT_NODES };
  let sawCount = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') throw new UsageError(USAGE, 0);
    if (a === '--base-port' || a.startsWith('--base-port=')) {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      const p = Number(v);
      if (v === undefined || !Number.isInteger(p) || p < 1024 || p > 65535 - 13)
        throw new UsageError(`--base-port needs a whole number from 1024 to ${65535 - 13}${v === undefined ? '' : `, got '${v}'`}\n\n${USAGE}`);
      o.basePort = p;
    } else if (/^\d+$/.test(a) && !sawCount) {
      const n = Number(a);
      if (n < 1 || n > MAX_NODES) throw new UsageError(`N must be from 1 to ${MAX_NODES}, got ${n}\n\n${USAGE}`);
      o.nodes = n;
      sawCount = true;
    } else {
      throw new UsageError(`unknown argument '${a}'\n\n${USAGE}`);
    }
  }
  return o;
}

export class UsageError extends Error {
  constructor(
    message: string,
    readonly code = 2,
  ) {
    super(message);
  }
}

export interface NodePorts {
  api: number;
  flv: number;
  rtsp: number;
  rtmp: number;
  rtp: number;
  rtcp: number;
  /** live 2013, live 2019, replay 2013, replay 2019 */
  push: [number, number, number, number];
}

/** the ports every node binds (on its own address): the default site's, or from a base port */
export function nodePorts(basePort?: number): NodePorts {
  if (basePort === undefined) return { api: 7080, flv: 7081, rtsp: 7554, rtmp: 7935, rtp: 7556, rtcp: 7557, push: [7612, 7613, 7614, 7615] };
  const p = basePort;
  return { api: p, flv: p + 1, rtsp: p + 2, rtmp: p + 3, rtp: p + 4, rtcp: p + 5, push: [p + 10, p + 11, p + 12, p + 13] };
}

export interface FleetNodeSpec {
  nodeId: string;
  host: string;
  apiUrl: string;
  env: Record<string, string>;
}

/** node i (0-based): its id, address and the environment it is started with */
export function nodeSpec(i: number, redisUrl: string, basePort?: number): FleetNodeSpec {
  const nodeId = `node-${String.fromCharCode(97 + i)}`;
  const host = `127.0.0.${i + 2}`;
  const ports = nodePorts(basePort);
  const env: Record<string, string> = {
    GW_NODE_ID: nodeId,
    GW_LISTEN_HOST: host,
    GW_PUBLIC_HOST: host,
    GW_DIRECTORY_URL: redisUrl,
    GW_DATA_DIR: `./data/fleet/${nodeId}`,
    GW_WORKERS: '1',
  };
  if (basePort !== undefined) {
    // kernel keys as GW_<KEY>, plugin keys as GW_<PLUGIN>_<KEY> (core/config.ts envNameFor)
    Object.assign(env, {
      GW_HTTP_PORT: String(ports.api),
      GW_FLV_OUT_PORT: String(ports.flv),
      GW_RTSP_OUT_PORT: String(ports.rtsp),
      GW_RTMP_PORT: String(ports.rtmp),
      GW_RTSP_OUT_RTP_PORT: String(ports.rtp),
      GW_RTSP_OUT_RTCP_PORT: String(ports.rtcp),
      GW_JT1078_INGEST_LIVE_PORT2013: String(ports.push[0]),
      GW_JT1078_INGEST_LIVE_PORT2019: String(ports.push[1]),
      GW_JT1078_INGEST_REPLAY_PORT2013: String(ports.push[2]),
      GW_JT1078_INGEST_REPLAY_PORT2019: String(ports.push[3]),
    });
  }
  return { nodeId, host, apiUrl: `http://${host}:${ports.api}`, env };
}

// ----------------------------------------------------------------------------------------------------------------

interface Proc {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
  lines: string[];
}

function findRedisServer(): string | undefined {
  const r = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return r.stdout.trim().split('\n')[0] || undefined;
}

function healthz(apiUrl: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(`${apiUrl}/healthz`, { timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

/** a child in a process group of its own (the terminal's Ctrl-C reaches only this tool, which stops them in order) */
function startProc(name: string, cmd: string, args: string[], env: NodeJS.ProcessEnv, prefix: boolean): Proc {
  const child = spawn(cmd, args, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const lines: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', (err) => lines.push(`cannot start ${cmd}: ${err.message}`));
  const label = name.padEnd(7);
  for (const stream of [child.stdout!, child.stderr!]) {
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => {
      const parts = (rest + d).split('\n');
      rest = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        if (lines.length > KEEP_LINES) lines.shift();
        if (prefix) process.stdout.write(`${label}| ${line}\n`);
      }
    });
  }
  return { name, child, exited, lines };
}

function running(p: Proc): boolean {
  return p.child.exitCode === null && p.child.signalCode === null && p.child.pid !== undefined;
}

async function stopProc(p: Proc, graceMs: number): Promise<void> {
  if (!running(p)) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => {
    if (running(p)) {
      process.stdout.write(`fleet: ${p.name} still running ${graceMs / 1000} s after SIGTERM: SIGKILL\n`);
      p.child.kill('SIGKILL');
    }
  }, graceMs);
  await p.exited;
  clearTimeout(timer);
}

function exitText(p: Proc): string {
  return p.child.signalCode ? `signal ${p.child.signalCode}` : `code ${p.child.exitCode}`;
}

export async function main(argv: string[]): Promise<number> {
  let o: FleetOptions;
  try {
    o = parseFleetArgs(argv);
  } catch (err) {
    const e = err as UsageError;
    (e.code === 0 ? process.stdout : process.stderr).write(e.message + '\n');
    return e.code ?? 2;
  }
  const redisBin = findRedisServer();
  if (!redisBin) {
    process.stderr.write("fleet: redis-server is not installed (the fleet's directory runs on a local Redis): apt-get install -y redis-server\n");
    return 1;
  }
  const gatewayMain = path.join(repoRoot, 'dist', 'core', 'main.js');
  if (!fs.existsSync(gatewayMain)) {
    process.stderr.write(`fleet: ${gatewayMain} not found: build first (npm run fleet does)\n`);
    return 1;
  }

  let stopping = false;
  let nodes: Proc[] = [];
  let redis: Proc | undefined;
  const redisDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-fleet-redis-'));
  let finish!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (finish = resolve));

  const stopAll = async (code: number, why: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`fleet: ${why}: stopping ${nodes.filter(running).length} node(s) and Redis\n`);
    await Promise.all(nodes.map((n) => stopProc(n, STOP_GRACE_MS)));
    if (redis) await stopProc(redis, 5000);
    fs.rmSync(redisDir, { recursive: true, force: true });
    process.stdout.write(`fleet: stopped${code === 0 ? '' : ` (exit ${code})`}\n`);
    finish(code);
  };
  const onSignal = (sig: NodeJS.Signals) => void stopAll(0, `${sig}`);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // the tool itself dying (an exception) leaves no node behind
  process.on('exit', () => {
    for (const p of [...nodes, ...(redis ? [redis] : [])]) if (running(p)) p.child.kill('SIGKILL');
  });
  const early = (p: Proc) => {
    void p.exited.then(() => {
      if (stopping) return;
      process.stderr.write(`fleet: ${p.name} exited (${exitText(p)}) on its own; its last lines:\n${p.lines.map((l) => `  ${l}`).join('\n')}\n`);
      void stopAll(1, `${p.name} exited`);
    });
  };

  // --- Redis
  let redisPort = 0;
  for (let tries = 0; tries < 3 && !stopping; tries++) {
    redisPort = await freePort();
    const r = startProc(
      'redis',
      redisBin,
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', redisDir, '--daemonize', 'no'],
      process.env,
      false,
    );
    const by = Date.now() + 10_000;
    while (running(r) && !(await pingOnce(redisPort)) && Date.now() < by) await new Promise((res) => setTimeout(res, 50));
    if (running(r) && (await pingOnce(redisPort))) {
      redis = r;
      break;
    }
    await stopProc(r, 2000);
    if (!r.lines.some((l) => /Address already in use/i.test(l)) || tries === 2) {
      process.stderr.write(`fleet: redis-server did not come up on port ${redisPort}:\n${r.lines.map((l) => `  ${l}`).join('\n')}\n`);
      await stopAll(1, 'no Redis');
      return finished;
    }
  }
  if (!redis) {
    await stopAll(stopping ? 0 : 1, 'no Redis');
    return finished;
  }
  early(redis);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  process.stdout.write(`fleet: Redis at ${redisUrl} (no persistence); starting ${o.nodes} node(s) of sites/default\n`);

  // --- nodes
  const specs = Array.from({ length: o.nodes }, (_x, i) => nodeSpec(i, redisUrl, o.basePort));
  const base: NodeJS.ProcessEnv = { ...process.env };
  delete base.GW_SITE;
  if (!stopping) {
    nodes = specs.map((s) =>
      startProc(
        s.nodeId,
        process.execPath,
        // as npm start runs a single process (core/gc-flags.ts)
        ['--single-threaded-gc', '--max-semi-space-size=8', gatewayMain, 'sites/default'],
        { ...base, ...s.env },
        true,
      ),
    );
    for (const n of nodes) early(n);
  }

  // --- wait for every /healthz
  const by = Date.now() + HEALTH_TIMEOUT_MS;
  const healthy = new Set<string>();
  while (!stopping && healthy.size < specs.length) {
    for (const s of specs) if (!healthy.has(s.nodeId) && (await healthz(s.apiUrl)) === 200) healthy.add(s.nodeId);
    if (healthy.size === specs.length || stopping) break;
    if (Date.now() > by) {
      const late = specs.filter((s) => !healthy.has(s.nodeId));
      for (const s of late) {
        const n = nodes.find((x) => x.name === s.nodeId);
        process.stderr.write(
          `fleet: ${s.nodeId} did not answer ${s.apiUrl}/healthz 200 within ${HEALTH_TIMEOUT_MS / 1000} s; its last lines:\n${(n?.lines ?? []).map((l) => `  ${l}`).join('\n')}\n`,
        );
      }
      void stopAll(1, 'a node did not become healthy');
      break;
    }
    await new Promise((res) => setTimeout(res, 250));
  }

  if (!stopping) {
    const ports = nodePorts(o.basePort);
    const rows = specs.map((s) => [s.nodeId, `${s.apiUrl}`, `${s.host}:${ports.push[0]} (2013), :${ports.push[1]} (2019)`]);
    const head = ['node', 'API', 'push (live)'];
    const w = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
    const line = (r: string[]) =>
      r
        .map((x, c) => x.padEnd(w[c]))
        .join('  ')
        .trimEnd();
    const a = specs[0];
    const b = specs[Math.min(1, specs.length - 1)];
    process.stdout.write(
      [
        '',
        `fleet: ready: ${specs.length} node(s) of sites/default, directory ${redisUrl}; Ctrl-C stops them`,
        '',
        line(head),
        ...rows.map(line),
        '',
        `# open a channel through ${a.nodeId} (it is placed on the node with the fewest streams: see "host" in the answer)`,
        `curl -u demo:demo -H 'Content-Type: application/json' -d '{"user":{"token":"t"},"typ":"live","simNo":"013800138000","chanId":1}' ${a.apiUrl}/strm/open`,
        `# the application's requests, asked of ${b.nodeId} (every node answers for the whole fleet; "node" says which holds each)`,
        `curl -u demo:demo ${b.apiUrl}/strm/status`,
        `# push a capture to the node named by the open's "host" and "port"`,
        `npm run sim -- ../shared/fixtures/jt1078/glaciall-cif-h264-2013.bin --host <host> --port <port> --sim 013800138000 --chan 1`,
        '',
      ].join('\n') + '\n',
    );
  }
  return finished;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: Error) => {
      process.stderr.write(`fleet: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
