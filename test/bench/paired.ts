/**
 * `npm run bench -- paired`: two ingest-flv runs at the same time, one against each of two gateways, both gateways on
 * core 0 and both load generators on core 1, and the ratio of their CPU.
 *
 * Why at the same time: this machine's speed drifts. The same build at 700 terminals gave 53 to 70 % of core 0 in
 * runs a few minutes apart, so runs alternated one after the other (`--vs-floor`, the A/B notes) could not tell a
 * 5 % change from noise. Two gateways that share the core through the same window see the same machine: pairs of
 * the same build agree to within 1-2 %, and a known 12 % cost (GW_REUSE_PAYLOADS=false) shows as 1.11 and 1.13 in two
 * pairs. Each side still has its own terminals and players (the load is the same, not shared), and each pair swaps
 * which side is spawned first (both start at once: a second apart, the side started first read a few % more).
 *
 * What it cannot say: absolute CPU (the other gateway's work is on the same core; each side's "other processes"
 * line counts the other side), nor anything about latency (the two event loops delay each other).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';
import { BenchArgs } from './support/bench-args';
import { boundVerdict, spellLine, spellOf } from './support/spell';

export const USAGE = `usage: npm run bench -- paired (--against DIR | --floor | --env NAME=VALUE... | --b-workers N) [--pairs N] [--b-node-opt OPT]...
                       [--readers rtsp|hls] [-- INGEST-FLV ARGS]
  Runs ingest-flv against two gateways at once (A: this checkout; B: as chosen), both on core 0, and prints B's CPU
  over A's for each pair and over all pairs. INGEST-FLV ARGS go to both sides (default: --terminals 350 --seconds 20).
  --against DIR      B is another checkout's build (DIR/dist/test/bench/run.js, e.g. a git worktree of the old main);
                     with --floor among the INGEST-FLV ARGS, both sides run their build's floor
  --floor            B is the bare-relay floor (ingest-flv --floor) on the same load
  --env NAME=VALUE   B is this checkout with NAME=VALUE in its environment (GW_* variables reach the gateway); repeatable
  --b-workers N      B is this checkout's gateway with N worker processes (ingest-flv --workers N, all on core 0), A one
                     process: B / A is what the split costs, and N / (B / A) what N cores hold against one, a figure the
                     machine's drift does not move as it moves ingest-flv --vs-workers' alternated rounds
  --pairs N          pairs to run (default 4)
  --b-node-opt OPT   a node option for B's gateway only (ingest-flv --node-opt); repeatable
  --readers K        each side's readers are RTSP/TCP sessions (rtsp) or HLS clients (hls) instead of FLV players: both
                     sides run that bench's one reader run (rtsp --rounds 0, ingest-hls --rounds 0) with the same
                     INGEST-FLV ARGS; with --against only (a floor has no such readers)`;

export interface PairedOptions {
  against?: string;
  floor: boolean;
  env: Record<string, string>;
  pairs: number;
  /** B's worker processes (0: B is not a multi-worker gateway) */
  bWorkers: number;
  bNodeOpts: string[];
  ingestArgs: string[];
  /** the bench each side runs: ingest-flv, or the one of --readers */
  bench: 'ingest-flv' | 'rtsp' | 'ingest-hls';
}

export function parseArgs(args: string[]): PairedOptions {
  const split = args.indexOf('--');
  const own = split < 0 ? args : args.slice(0, split);
  const o: PairedOptions = {
    floor: false,
    env: {},
    pairs: 4,
    bWorkers: 0,
    bNodeOpts: [],
    ingestArgs: split < 0 ? ['--terminals', '350', '--seconds', '20'] : args.slice(split + 1),
    bench: 'ingest-flv',
  };
  const r = new BenchArgs(own, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--against': {
        const dir = r.value();
        if (dir === undefined || dir.startsWith('--')) throw r.error('--against needs a directory');
        o.against = path.resolve(dir);
        break;
      }
      case '--floor':
        o.floor = true;
        break;
      case '--env': {
        const kv = r.value() ?? '';
        const eq = kv.indexOf('=');
        if (eq <= 0) throw r.error(`--env needs NAME=VALUE, got '${kv}'`);
        o.env[kv.slice(0, eq)] = kv.slice(eq + 1);
        break;
      }
      case '--pairs':
        o.pairs = r.num(a, 1, 50, true);
        break;
      case '--b-workers':
        o.bWorkers = r.num(a, 2, 16, true);
        break;
      case '--b-node-opt': {
        const v = r.value();
        if (v === undefined || !v.startsWith('--')) throw r.error('--b-node-opt needs a node option such as --trace-gc');
        o.bNodeOpts.push(v);
        break;
      }
      case '--readers': {
        const v = r.value();
        if (v !== 'rtsp' && v !== 'hls') throw r.error(`--readers takes rtsp or hls, got '${v ?? ''}'`);
        o.bench = v === 'rtsp' ? 'rtsp' : 'ingest-hls';
        break;
      }
      default:
        r.unknown(a);
    }
  }
  const sides = (o.against ? 1 : 0) + (o.floor ? 1 : 0) + (o.bWorkers > 0 ? 1 : 0) + (Object.keys(o.env).length > 0 || o.bNodeOpts.length > 0 ? 1 : 0);
  if (sides === 0) throw r.error('say what B is: --against DIR, --floor, --b-workers N, or --env NAME=VALUE (or --b-node-opt)');
  if (o.against && o.floor) throw r.error('--against and --floor are two different B sides: pick one');
  if (o.bWorkers > 0 && (o.against || o.floor)) throw r.error("--b-workers runs this build's gateway with workers: not with --against or --floor");
  if (o.ingestArgs.some((a) => a.startsWith('--vs-'))) throw r.error('ingest-flv arguments for both sides cannot hold --vs-*');
  if (o.ingestArgs.includes('--workers')) throw r.error('--workers after --: both sides would run workers (--b-workers N gives them to B)');
  // both sides' floors: only two builds' floors differ
  if (o.ingestArgs.includes('--floor') && !o.against)
    throw r.error("--floor after --: both sides would run the same floor (with --against DIR it compares two builds' floors)");
  if (o.bench !== 'ingest-flv' && (!o.against || o.ingestArgs.includes('--floor')))
    throw r.error('--readers compares two builds (--against DIR): neither a floor nor another setting of this one has such readers to weigh');
  if (o.against && !fs.existsSync(runnerOf(o.against))) throw r.error(`${runnerOf(o.against)} not found: build that checkout first (npx tsc -p tsconfig.json)`);
  return o;
}

function knowsIdleClient(root: string): boolean {
  try {
    return fs.readFileSync(path.join(root, 'dist', 'test', 'bench', 'ingest-flv.js'), 'utf8').includes('--idle-client');
  } catch {
    return false;
  }
}

function runnerOf(root: string): string {
  return path.join(root, 'dist', 'test', 'bench', 'run.js');
}

/** The figures of one ingest-flv run, read from what it prints (older builds print the same lines). */
export interface SideFigures {
  cpuPct: number;
  gcPct?: number;
  /**
   * full collections in the window: a gateway that shares its core through the same window with another process now
   * and then runs several (5 in 20 s, JS heap +20 MB, scavenges 3x, 41 % of reads set aside) and takes 4-6 % more CPU
   * than in a pair without (bench README, paired): the line says which pairs did
   */
  markCompacts?: number;
  kbPerStream?: number;
}

export function readFigures(out: string): SideFigures {
  const cpu = /gateway CPU: ([\d.]+) %/.exec(out);
  if (!cpu) throw new Error(`no "gateway CPU" line in the run's output:\n${out.split('\n').slice(-15).join('\n')}`);
  const gc = /gateway GC pauses: ([\d.]+) %/.exec(out);
  const mc = /gateway GC pauses: .*, (\d+) mark-compacts in/.exec(out);
  const kb = /: ([\d.]+) KB per stream/.exec(out);
  return {
    cpuPct: Number(cpu[1]),
    gcPct: gc ? Number(gc[1]) : undefined,
    markCompacts: mc ? Number(mc[1]) : undefined,
    kbPerStream: kb ? Number(kb[1]) : undefined,
  };
}

export interface PairResult {
  a: SideFigures;
  b: SideFigures;
  firstSide: 'A' | 'B';
}

/** B's CPU over A's across all pairs (sums, so a pair run slower counts by its weight), and the spread of single pairs. */
export function summarise(pairs: readonly PairResult[]): { ratio: number; min: number; max: number } {
  let a = 0;
  let b = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const p of pairs) {
    a += p.a.cpuPct;
    b += p.b.cpuPct;
    const r = p.b.cpuPct / p.a.cpuPct;
    min = Math.min(min, r);
    max = Math.max(max, r);
  }
  return { ratio: b / a, min, max };
}

function runSide(runner: string, bench: PairedOptions['bench'], args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  // the reader benches' one run of their readers, without the FLV rounds they alternate with by default
  const own = bench === 'ingest-flv' ? [] : ['--rounds', '0'];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [runner, bench, ...own, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${bench} exited ${code}:\n${out.split('\n').slice(-20).join('\n')}`))));
  });
}

const f1 = (n: number | undefined): string => (n === undefined ? '-' : n.toFixed(1));

export async function run(args: string[]): Promise<void> {
  const o = parseArgs(args);
  const here = runnerOf(repoRoot);
  const bRunner = o.against ? runnerOf(o.against) : here;
  const bArgs = [
    ...o.ingestArgs,
    ...(o.floor ? ['--floor'] : []),
    ...(o.bWorkers > 0 ? ['--workers', String(o.bWorkers)] : []),
    ...o.bNodeOpts.flatMap((x) => ['--node-opt', x]),
  ];
  // a build from before the spinning load generator has only the sleeping one: A sleeps too, or the loads would differ
  const aArgs = o.against && !knowsIdleClient(o.against) ? [...o.ingestArgs, '--idle-client'] : o.ingestArgs;
  if (aArgs !== o.ingestArgs) console.log("paired: B's ingest-flv predates --idle-client (its load generator always sleeps): A gets --idle-client");
  const bEnv = { ...process.env, ...o.env };
  const what = o.against
    ? `the build in ${o.against}`
    : o.floor
      ? 'the floor (bare relay)'
      : o.bWorkers > 0
        ? `this build with ${o.bWorkers} workers`
        : `this build with ${[...Object.entries(o.env).map(([k, v]) => `${k}=${v}`), ...o.bNodeOpts].join(' ')}`;
  console.log(`paired: ${o.pairs} pair(s) of ${o.bench} ${o.ingestArgs.join(' ')}, run at the same time; A = this build, B = ${what}`);
  const pairs: PairResult[] = [];
  for (let i = 0; i < o.pairs; i++) {
    const firstSide = i % 2 === 0 ? 'A' : 'B';
    // both at once: started a second apart (until 2026-11-29), the side started first read 2.5-4.5 % more CPU than
    // the other in every pair, A against A too (0.953-0.965 with A first, 1.042-1.051 with B first), and with its
    // warm-up a second longer so the windows matched, still 2.5 %; started together, A against A read 0.991-1.009
    const aRun = (): Promise<string> => runSide(here, o.bench, aArgs, process.env);
    const bRun = (): Promise<string> => runSide(bRunner, o.bench, bArgs, bEnv);
    const [aOut, bOut] = firstSide === 'A' ? await Promise.all([aRun(), bRun()]) : (await Promise.all([bRun(), aRun()])).reverse();
    const p: PairResult = { a: readFigures(aOut), b: readFigures(bOut), firstSide };
    pairs.push(p);
    console.log(
      `  pair ${i + 1} (${firstSide} first): A ${f1(p.a.cpuPct)} %, B ${f1(p.b.cpuPct)} % -> B / A ${(p.b.cpuPct / p.a.cpuPct).toFixed(3)}; ` +
        `GC pauses A ${f1(p.a.gcPct)} / B ${f1(p.b.gcPct)} %, mark-compacts A ${p.a.markCompacts ?? '-'} / B ${p.b.markCompacts ?? '-'}; ` +
        `KB per stream A ${f1(p.a.kbPerStream)} / B ${f1(p.b.kbPerStream)}`,
    );
  }
  const s = summarise(pairs);
  console.log(`  B / A over ${pairs.length} pair(s): ${s.ratio.toFixed(3)} (single pairs ${s.min.toFixed(3)} to ${s.max.toFixed(3)})`);
  if (o.bWorkers > 0) console.log(`  ${workersVerdict(o.bWorkers, s)}`);
  if (o.floor && !o.against) for (const line of floorVerdict(pairs, terminalsOf(o.ingestArgs))) console.log(`  ${line}`);
}

/** the terminals ingest-flv runs with these arguments (its default: 500) */
export function terminalsOf(ingestArgs: readonly string[]): number {
  const i = ingestArgs.indexOf('--terminals');
  const n = i >= 0 ? Number(ingestArgs[i + 1]) : 500;
  return Number.isFinite(n) && n > 0 ? n : 500;
}

/**
 * Issue 48's figure from pairs whose B is the floor: gateway / floor (A / B) a pair, the spell the floor's CPU names,
 * and the bound for that spell judged on every pair. The floor here shares core 0 with the gateway through the whole
 * window, so the two see the same machine (alternated rounds do not: see the bench README); sharing the core costs
 * each side a little, so the spell may read a shade slower than the floor alone would.
 */
export function floorVerdict(pairs: readonly PairResult[], terminals: number): string[] {
  const ratios = pairs.map((p) => p.a.cpuPct / p.b.cpuPct);
  const gateway = pairs.reduce((n, p) => n + p.a.cpuPct, 0);
  const floor = pairs.reduce((n, p) => n + p.b.cpuPct, 0);
  const spell = spellOf(floor / pairs.length, terminals);
  return [
    `gateway / floor: ${(gateway / floor).toFixed(2)} over ${pairs.length} pair(s) ` +
      `(single pairs ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)})`,
    `${spellLine(spell, terminals)}, beside the gateway on its core`,
    boundVerdict(spell, ratios, 'pair'),
  ];
}

/**
 * What N workers make of N cores, from B / A (B: N workers, A: one process, the same load at the same time on one
 * core): each core holds 1 / (B / A) of what one process holds on it. Issue 16's target is 1.8x on 2 cores (0.9 N).
 */
export function workersVerdict(n: number, s: { ratio: number; min: number; max: number }): string {
  const on = (r: number) => n / r;
  return (
    `on ${n} cores: ${on(s.ratio).toFixed(2)} x one process (single pairs ${on(s.max).toFixed(2)} to ${on(s.min).toFixed(2)}; ` +
    `target ${(0.9 * n).toFixed(1)} x: ${on(s.ratio) >= 0.9 * n ? 'ok' : 'MISSED'}; assumes the cores are independent)`
  );
}
