/**
 * What the fleet directory on Redis costs one node (core/directory/redis-directory.ts): the same gateway with
 * `directoryUrl` on a throwaway local redis-server against the in-process directory (no directoryUrl), alternated
 * round by round in one session. Each run: N terminals push ~1 Mbit/s over TCP (the open-latency load, one HTTP-FLV
 * player each unless --no-players), then open-latency's probe (its own process) opens already-live channels at a
 * steady rate, closing each once answered: open p50/p99/max. Redis runs then also measure, with INFO commandstats:
 *   - Redis commands per open: a burst of new channels opened just after a heartbeat (and their requests closed the
 *     same way), and per probe open+close of a live channel (its window minus the background rate);
 *   - the background (heartbeat, claim refresh, view reads): commands per second per node with the terminals paused;
 *   - commands per media packet: a quiet window with the terminals pushing minus the paused one, per packet sent;
 *   - bytes in Redis per 1,000 streams (INFO memory used_memory before/after opening them) and keys per stream (DBSIZE).
 * commandstats counts the commands run inside scripts too; a MONITOR connection, on only outside the latency
 * windows, splits what the gateway sent (round trips: EVALSHA/EVAL and plain commands) from what ran inside scripts.
 * Target: open p99 with Redis less than 2 ms above the in-process directory's.
 *
 *   npm run bench -- fleet-directory [--terminals N] [--rounds K] [--seconds S] [--rate R] [--quiet S] [--burst B]
 *        [--warmup S] [--mbps X] [--capture FILE] [--no-players] [--no-pin] [--idle-client] [--keep-dir] [--node-opt OPT]...
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { scratchDir } from '../support/paths';
import { startRedis, type RedisServer } from '../support/redis';
import { BenchArgs, captureFile, loadArg, windowArg } from './support/bench-args';
import { BenchPlayer } from './support/bench-player';
import {
  Api,
  benchApplications,
  canPin,
  checkDeadline,
  connectTcp,
  endScratch,
  f1,
  f2,
  freePort,
  pinSelf,
  pool,
  REQUESTS_PER_APP,
  runDeadline,
  startGateway,
  stopGateway,
  tail,
  waitHealthy,
  writeSite,
  BOOT_TIMEOUT_MS,
} from './support/gateway-harness';
import { IDLE_CLIENT_USAGE, keepAwake } from './support/keep-awake';
import { OpenProbe } from './support/open-probe';
import { summarise, type Summary } from './support/perf-probes';
import { StartPhases } from './support/start-phases';
import { SynthTerminal, synthesise, type SynthStream } from './support/synth-terminals';

export interface FleetDirectoryOptions {
  terminals: number;
  rounds: number;
  seconds: number;
  rate: number;
  quiet: number;
  burst: number;
  warmup: number;
  mbps: number;
  capture: string;
  players: boolean;
  pin: boolean;
  busyClient: boolean;
  profile: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

export const USAGE = `usage: npm run bench -- fleet-directory [--terminals N] [--rounds K] [--seconds S] [--rate R] [--quiet S] [--burst B]
                       [--warmup S] [--mbps X] [--capture FILE] [--no-players] [--no-pin] [--idle-client] [--keep-dir] [--node-opt OPT]...
  --terminals N   live streams: simulated terminals over TCP, one HTTP-FLV player each (default 500)
  --rounds K      rounds, each a run with the Redis directory then one with the in-process directory (default 3)
  --seconds S     probe window (default 20)
  --rate R        probe opens per second, each closed once answered (default 20)
  --quiet S       Redis runs: the quiet window with the terminals pushing, then the same with them paused (default 10)
  --burst B       Redis runs: new channels opened (then closed) in a burst just after a heartbeat (default 100)
  --warmup S      load before the probe window (default 5)
  --mbps X        per-terminal rate (default 1)
  --capture FILE  JT/T 1078 capture to re-pack (default shared/fixtures/jt1078/glaciall-cif-h264-2013.bin)
  --no-players    terminals only, no HTTP-FLV players
  --no-pin        do not pin the gateway to core 0 and this process, the probe and Redis to core 1
${IDLE_CLIENT_USAGE}
  --keep-dir      keep the scratch directories (site files, gateway logs)
  --node-opt OPT  pass a node option to the gateway process`;

const TARGET_P99_ADDED_MS = 2;
/** the heartbeat period at the default directoryTtlSec (6 s): ttl / 3 (beatMsFor, core/directory/redis-liveness.ts) */
const BEAT_S = 2;
const TICK_MS = 4;
const OPEN_CONCURRENCY = 16;
const MAX_SEND_BACKLOG = 1024 * 1024;
const MAX_IN_FLIGHT = 32;
const PROBE_APP = { appId: 'probe', user: 'probe', password: 'probe' };
/** this bench's own calls to Redis, left out of the counts */
const OWN_COMMANDS = new Set(['info', 'dbsize', 'config|resetstat', 'config', 'flushall', 'monitor', 'ping', 'client|setname', 'client']);

export function parseArgs(args: string[]): FleetDirectoryOptions {
  const o: FleetDirectoryOptions = {
    terminals: 500,
    rounds: 3,
    seconds: 20,
    rate: 20,
    quiet: 10,
    burst: 100,
    warmup: 5,
    mbps: 1,
    capture: '',
    players: true,
    pin: true,
    busyClient: true,
    profile: false,
    keepDir: false,
    nodeOpts: [],
  };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--terminals':
        o.terminals = r.num(a, 10, 5000, true);
        break;
      case '--rounds':
        o.rounds = r.num(a, 1, 20, true);
        break;
      case '--rate':
        o.rate = r.num(a, 0.1, 1000, false);
        break;
      case '--quiet':
        o.quiet = r.num(a, 1, 25, false);
        break;
      case '--burst':
        o.burst = r.num(a, 1, 1000, true);
        break;
      case '--no-players':
        o.players = false;
        break;
      case '--idle-client':
        o.busyClient = false;
        break;
      default:
        if (!windowArg(a, r, o) && !loadArg(a, r, o)) r.unknown(a);
    }
  }
  if (o.profile) throw r.error('--profile is not supported by fleet-directory');
  o.capture = captureFile(o.capture);
  return o;
}

// --- Redis accounting ---------------------------------------------------------------------------------------------

type Counts = Map<string, number>;

/** INFO commandstats as calls per command (every command Redis ran, those inside scripts included), without the bench's own */
export function parseCommandStats(info: string): Counts {
  const out: Counts = new Map();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (!OWN_COMMANDS.has(m[1])) out.set(m[1], Number(m[2]));
  return out;
}

function minus(a: Counts, b: Counts): Counts {
  const out: Counts = new Map();
  for (const [k, v] of a) if (v - (b.get(k) ?? 0) !== 0) out.set(k, v - (b.get(k) ?? 0));
  return out;
}

const sum = (c: Counts): number => [...c.values()].reduce((s, v) => s + v, 0);
const shown = (c: Counts, per = 1): string =>
  [...c]
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k} ${f2(v / per)}`)
    .join(', ') || 'none';

/** what the gateway sent (round trips) and what ran inside its scripts, from MONITOR */
class Monitor {
  sent: Counts = new Map();
  inScripts: Counts = new Map();
  private constructor(private readonly conn: Redis) {}

  static async start(url: string): Promise<Monitor> {
    const c = new Redis(url, { lazyConnect: true });
    await c.connect();
    const conn = await c.monitor();
    c.disconnect();
    const m = new Monitor(conn);
    conn.on('monitor', (_time: string, args: string[], source: string) => {
      const name = String(args[0] ?? '').toLowerCase();
      if (OWN_COMMANDS.has(name)) return;
      const into = source === 'lua' ? m.inScripts : m.sent;
      into.set(name, (into.get(name) ?? 0) + 1);
    });
    return m;
  }

  take(): { sent: Counts; inScripts: Counts } {
    const r = { sent: this.sent, inScripts: this.inScripts };
    this.sent = new Map();
    this.inScripts = new Map();
    return r;
  }

  stop(): void {
    this.conn.disconnect();
  }
}

interface Snap {
  at: number;
  stats: Counts;
  usedMemory: number;
  keys: number;
}

async function snap(r: Redis): Promise<Snap> {
  const [stats, mem, keys] = await Promise.all([r.info('commandstats'), r.info('memory'), r.dbsize()]);
  const used = /^used_memory:(\d+)/m.exec(mem);
  return { at: performance.now(), stats: parseCommandStats(stats), usedMemory: used ? Number(used[1]) : NaN, keys };
}

/** resolves just after the node's next heartbeat (its PEXPIRE of gw:node:<id>), so a short burst has no beat in it */
async function afterBeat(r: Redis, signal: AbortSignal): Promise<void> {
  const beats = async () => (await snap(r)).stats.get('pexpire') ?? 0;
  const start = await beats();
  const by = performance.now() + 10_000;
  while ((await beats()) === start) {
    checkDeadline(signal);
    if (performance.now() > by) throw new Error('no heartbeat seen within 10 s');
    await sleep(5);
  }
  // the beat's claim refreshes are pipelined right behind it
  await sleep(150);
}

// --- one run ------------------------------------------------------------------------------------------------------

interface Window {
  seconds: number;
  commands: Counts;
  sent?: Counts;
  inScripts?: Counts;
}

export interface RedisFigures {
  /** streams opened, and what Redis held before/after */
  bytesPer1000Streams: number;
  keysPerStream: number;
  /** first open of a new channel (the stream's claim, the request) */
  firstOpen: { count: number; window: Window };
  /** close of a channel's only request (the request, the claim's release) */
  lastClose: { count: number; window: Window };
  /** probe window: open + close of a request on a live channel */
  probePair: { count: number; window: Window };
  playing: Window & { packets: number };
  paused: Window;
}

export interface RunResult {
  mode: 'redis' | 'memory';
  open: Summary;
  close: Summary;
  /** raw probe samples, pooled over rounds for the comparison */
  openSamples: number[];
  failed: number;
  errors: string[];
  redis?: RedisFigures;
}

interface Session {
  o: FleetDirectoryOptions;
  stream: SynthStream;
  redis: RedisServer;
  client: Redis;
  pin: boolean;
  deadline: AbortSignal;
}

async function oneRun(s: Session, mode: 'redis' | 'memory', round: number): Promise<RunResult> {
  const { o, stream, deadline } = s;
  const dir = scratchDir(`bench-fleet-directory-${mode}`);
  const httpPort = await freePort();
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      applications: [...benchApplications(o.terminals + o.burst), PROBE_APP],
      ...(mode === 'redis' ? { directoryUrl: s.redis.url, nodeId: 'bench-node' } : { nodeId: 'bench-node' }),
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
    ],
  };
  if (mode === 'redis') {
    await s.client.flushall();
    await s.client.config('RESETSTAT');
  }
  const siteFile = writeSite(dir, site);
  const gw = startGateway({ siteFile, dir, pin: s.pin, nodeOpts: o.nodeOpts, workers: 1 });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const api = new Api(httpPort, deadline);
  const terminals: SynthTerminal[] = [];
  const players: BenchPlayer[] = [];
  let probe: OpenProbe | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let monitor: Monitor | undefined;
  let paused = false;
  try {
    await waitHealthy(gw, api, deadline);
    probe = new OpenProbe();
    ticker = setInterval(() => {
      if (paused) return;
      const now = performance.now();
      for (let i = 0; i < terminals.length; i++) terminals[i].sendDue(now, 64);
    }, TICK_MS);
    const reqIds: string[][] = [];
    const phases = new StartPhases(stream, o.terminals, performance.now());
    const sims = Array.from({ length: o.terminals }, (_x, i) => String(13900000000 + i));
    const r0 = mode === 'redis' ? await snap(s.client) : undefined;
    await pool(
      sims.map((_x, i) => i),
      OPEN_CONCURRENCY,
      0,
      async (i) => {
        const sim = sims[i];
        const app = Math.floor(i / REQUESTS_PER_APP);
        const r = await api.openLive(sim, app);
        (reqIds[app] ??= []).push(r.reqId);
        const sock = await connectTcp(r.port, deadline);
        sock.on('error', () => undefined);
        sock.on('data', () => undefined);
        const term = new SynthTerminal(sim, sock, stream, MAX_SEND_BACKLOG);
        term.start(phases.at(i, performance.now()), stream.keyframes[(i * 7) % stream.keyframes.length]);
        terminals.push(term);
        if (o.players) {
          const player = new BenchPlayer(term, {});
          players.push(player);
          await player.connect(r.url, deadline);
        }
      },
      deadline,
    );
    await sleep(1000, undefined, { signal: deadline });
    const r1 = mode === 'redis' ? await snap(s.client) : undefined;
    await api.keep(reqIds);
    await sleep(o.warmup * 1000, undefined, { signal: deadline });
    if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);

    // --- the probe window
    const p0 = mode === 'redis' ? await snap(s.client) : undefined;
    const pr = await probe.run(
      {
        port: httpPort,
        user: PROBE_APP.user,
        password: PROBE_APP.password,
        sims,
        rate: o.rate,
        seconds: o.seconds,
        maxInFlight: MAX_IN_FLIGHT,
      },
      deadline,
    );
    const p1 = mode === 'redis' ? await snap(s.client) : undefined;
    const result: RunResult = { mode, open: summarise(pr.open), close: summarise(pr.close), openSamples: pr.open, failed: pr.failed, errors: pr.errors };

    if (mode === 'redis') {
      monitor = await Monitor.start(s.redis.url);
      // --- quiet, terminals pushing; then the same with them paused (the background alone)
      // each window starts just after a heartbeat and lasts whole beat periods (ttl/3 = 2 s), so both hold as many beats
      const window = async (seconds: number): Promise<Window> => {
        seconds = Math.max(1, Math.round(seconds / BEAT_S)) * BEAT_S;
        await afterBeat(s.client, deadline);
        monitor!.take();
        const a = await snap(s.client);
        await sleep(seconds * 1000, undefined, { signal: deadline });
        const b = await snap(s.client);
        const m = monitor!.take();
        return { seconds: (b.at - a.at) / 1000, commands: minus(b.stats, a.stats), sent: m.sent, inScripts: m.inScripts };
      };
      const frames0 = terminals.reduce((n, t) => n + t.frames, 0);
      const playing = await window(o.quiet);
      const packets = (terminals.reduce((n, t) => n + t.frames, 0) - frames0) * (stream.packetsPerSecond / stream.framesPerSecond);
      paused = true;
      const pausedWin = await window(o.quiet);

      // --- bursts: new channels opened just after a beat, then their requests closed the same way
      const burstSims = Array.from({ length: o.burst }, (_x, i) => String(13800000000 + round * 10_000 + i));
      // the last bench application: it has room for the burst beside the terminals' requests (benchApplications)
      const burstApp = Math.floor((o.terminals + o.burst - 1) / REQUESTS_PER_APP);
      const burstIds: string[] = [];
      const measured = async (fn: () => Promise<void>): Promise<Window> => {
        await afterBeat(s.client, deadline);
        monitor!.take();
        const a = await snap(s.client);
        await fn();
        await sleep(100);
        const b = await snap(s.client);
        const m = monitor!.take();
        return { seconds: (b.at - a.at) / 1000, commands: minus(b.stats, a.stats), sent: m.sent, inScripts: m.inScripts };
      };
      const openWin = await measured(() =>
        pool(
          burstSims,
          OPEN_CONCURRENCY,
          0,
          async (sim) => {
            const [r] = await api.post<Array<{ reqId: string }>>(
              '/strm/open',
              { user: { token: 't' }, typ: 'live', simNo: sim, chanId: 1, keepIntv: 600 },
              burstApp,
            );
            burstIds.push(r.reqId);
          },
          deadline,
        ),
      );
      const closeWin = await measured(async () => {
        for (let i = 0; i < burstIds.length; i += 1) await api.post('/strm/close', { reqIds: [burstIds[i]] }, burstApp);
      });
      result.redis = {
        bytesPer1000Streams: ((r1!.usedMemory - r0!.usedMemory) / o.terminals) * 1000,
        keysPerStream: (r1!.keys - r0!.keys) / o.terminals,
        firstOpen: { count: burstIds.length, window: openWin },
        lastClose: { count: burstIds.length, window: closeWin },
        probePair: { count: pr.open.length, window: { seconds: (p1!.at - p0!.at) / 1000, commands: minus(p1!.stats, p0!.stats) } },
        playing: { ...playing, packets },
        paused: pausedWin,
      };
    }
    return result;
  } catch (err) {
    if (deadline.aborted) checkDeadline(deadline);
    throw err;
  } finally {
    if (ticker) clearInterval(ticker);
    monitor?.stop();
    await probe?.close();
    for (const p of players) p.socket?.destroy();
    for (const t of terminals) t.socket.destroy();
    await stopGateway(gw);
    process.off('exit', killGateway);
    endScratch(dir, o.keepDir);
  }
}

// --- the session --------------------------------------------------------------------------------------------------

export interface FleetDirectoryResult {
  rounds: Array<{ redis: RunResult; memory: RunResult }>;
  pooled: { redis: Summary; memory: Summary; addedP99: number };
}

export async function run(args: string[]): Promise<FleetDirectoryResult> {
  const o = parseArgs(args);
  const stream = synthesise(o.capture, o.mbps, 950);
  const perRun = BOOT_TIMEOUT_MS + o.terminals * 200 + (o.warmup + o.seconds + 2 * o.quiet + 30) * 1000 + 60_000;
  const budget = runDeadline(perRun * o.rounds * 2 + 60_000);
  const deadline = budget.signal;
  const pin = canPin(o.pin, 'fleet-directory');
  const redis = await startRedis();
  const client = new Redis(redis.url);
  let stopSpinning: (() => void) | undefined;
  console.log(
    `fleet-directory: ${o.terminals} terminals x ${f2((stream.bytesPerSecond * 8) / 1e6)} Mbit/s${o.players ? ', one HTTP-FLV player each' : ''}; ` +
      `probe ${o.rate} opens/s of live channels for ${o.seconds} s (each closed once answered); ${o.rounds} round(s) of: directory on Redis ` +
      `(${redis.url}, redis-server ${await client.info('server').then((t) => /redis_version:(\S+)/.exec(t)?.[1] ?? '?')}), then the in-process directory`,
  );
  const rounds: FleetDirectoryResult['rounds'] = [];
  try {
    if (pin) {
      if (!pinSelf(1)) console.warn('fleet-directory: could not pin this process to core 1');
      // Redis beside the load generator and the probe, off the gateway's core
      const pid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1]);
      if (pid) spawnSync('taskset', ['-pc', '1', String(pid)], { stdio: 'ignore' });
    }
    if (o.busyClient) stopSpinning = keepAwake();
    for (let i = 0; i < o.rounds; i++) {
      const r = await oneRun({ o, stream, redis, client, pin, deadline }, 'redis', i);
      const m = await oneRun({ o, stream, redis, client, pin, deadline }, 'memory', i);
      rounds.push({ redis: r, memory: m });
      console.log(
        `  round ${i + 1}: open p50/p99/max with Redis ${f2(r.open.p50)}/${f2(r.open.p99)}/${f2(r.open.max)} ms, in-process ` +
          `${f2(m.open.p50)}/${f2(m.open.p99)}/${f2(m.open.max)} ms (p99 ${r.open.p99 - m.open.p99 >= 0 ? '+' : ''}${f2(r.open.p99 - m.open.p99)} ms)` +
          `; ${r.open.count}/${m.open.count} probes answered, ${r.failed}/${m.failed} failed` +
          ([...r.errors, ...m.errors].length ? `; errors: ${[...r.errors, ...m.errors].slice(0, 3).join('; ')}` : ''),
      );
    }
  } finally {
    stopSpinning?.();
    client.disconnect();
    await redis.stop();
    budget.dispose();
  }
  const pooledOf = (k: 'redis' | 'memory') => summarise(rounds.flatMap((r) => r[k].openSamples));
  const pooled = { redis: pooledOf('redis'), memory: pooledOf('memory'), addedP99: 0 };
  pooled.addedP99 = pooled.redis.p99 - pooled.memory.p99;
  report(rounds, pooled, o);
  return { rounds, pooled };
}

function report(rounds: FleetDirectoryResult['rounds'], pooled: FleetDirectoryResult['pooled'], o: FleetDirectoryOptions): void {
  const lines: string[] = [];
  const s = (x: Summary) => `p50 ${f2(x.p50)} ms, p99 ${f2(x.p99)} ms, max ${f2(x.max)} ms (${x.count} opens)`;
  lines.push(`  open latency under ${o.terminals} live streams, pooled over ${rounds.length} round(s):`);
  lines.push(`    Redis directory:      ${s(pooled.redis)}`);
  lines.push(`    in-process directory: ${s(pooled.memory)}`);
  lines.push(
    `    added at p99: ${f2(pooled.addedP99)} ms (target < ${TARGET_P99_ADDED_MS} ms: ${pooled.addedP99 < TARGET_P99_ADDED_MS ? 'ok' : 'MISSED'}); ` +
      `per round: ${rounds.map((r) => f2(r.redis.open.p99 - r.memory.open.p99)).join(', ')} ms`,
  );
  const rs = rounds.map((r) => r.redis.redis!).filter(Boolean);
  const mean = (f: (x: RedisFigures) => number) => rs.reduce((n, x) => n + f(x), 0) / rs.length;
  const perOp = (w: Window, count: number, bgPerSec: number) => (sum(w.commands) - bgPerSec * w.seconds) / count;
  const sentPerOp = (w: Window, count: number, bgPerSec: number) => (sum(w.sent ?? new Map()) - bgPerSec * w.seconds) / count;
  const last = rs[rs.length - 1];
  lines.push('  Redis (commandstats counts every command Redis ran, those inside scripts included; "sent" is what the gateway sent, from MONITOR):');
  // held claims are refreshed a slice every 100 ms: the whole background runs in a burst's window too
  const bgRun = (x: RedisFigures) => sum(x.paused.commands) / x.paused.seconds;
  const bgSent = (x: RedisFigures) => sum(x.paused.sent!) / x.paused.seconds;
  lines.push(
    `    first open of a channel: ${f2(mean((x) => perOp(x.firstOpen.window, x.firstOpen.count, bgRun(x))))} commands run, ` +
      `${f2(mean((x) => sentPerOp(x.firstOpen.window, x.firstOpen.count, bgSent(x))))} sent per open, background taken off` +
      ` (last round, per open, background in: sent ${shown(last.firstOpen.window.sent!, last.firstOpen.count)}; in scripts ${shown(last.firstOpen.window.inScripts!, last.firstOpen.count)})`,
  );
  lines.push(
    `    close of a channel's last request: ${f2(mean((x) => perOp(x.lastClose.window, x.lastClose.count, bgRun(x))))} run, ` +
      `${f2(mean((x) => sentPerOp(x.lastClose.window, x.lastClose.count, bgSent(x))))} sent per close, background taken off` +
      ` (last round, per close, background in: sent ${shown(last.lastClose.window.sent!, last.lastClose.count)})`,
  );
  lines.push(
    `    open + close of a request on a live channel (probe window, background taken off): ` +
      `${f2(mean((x) => perOp(x.probePair.window, x.probePair.count, bgRun(x))))} commands run per pair`,
  );
  lines.push(
    `    background (heartbeat, claim refreshes, view reads) with ${o.terminals} streams held, terminals paused: ` +
      `${f1(mean(bgRun))} commands run/s per node, ${f1(mean(bgSent))} sent/s (last round, sent per second: ${shown(last.paused.sent!, last.paused.seconds)})`,
  );
  const perPacket = (x: RedisFigures) => ((sum(x.playing.commands) / x.playing.seconds - bgRun(x)) * x.playing.seconds) / x.playing.packets;
  lines.push(
    `    media: ${f1(mean((x) => x.playing.packets / x.playing.seconds))} packets/s pushed in the quiet window; ` +
      `${mean((x) => sum(x.playing.commands) / x.playing.seconds).toFixed(1)} commands/s playing vs ${mean(bgRun).toFixed(1)} paused: ` +
      `${mean(perPacket).toExponential(2)} commands per media packet`,
  );
  lines.push(
    `    memory: ${f1(mean((x) => x.bytesPer1000Streams) / 1024)} KiB of used_memory per 1,000 streams; ${f2(mean((x) => x.keysPerStream))} keys per stream (DBSIZE)`,
  );
  console.log(lines.join('\n'));
}
