/**
 * Reading another process from outside: CPU time and RSS from /proc, Prometheus text from /metrics, and a
 * summary of a V8 .cpuprofile. Used by benchmarks to measure the gateway without touching its code.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

let clkTck: number | undefined;

/** Clock ticks per second for /proc times (getconf CLK_TCK; 100 on every Linux we run on). */
export function clockTicks(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

/** User plus system CPU seconds a process has used (all its threads), from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // the command name (field 2) may hold spaces and parentheses: count fields after its closing one
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) throw new Error(`cannot read CPU times from /proc/${pid}/stat`);
  return (utime + stime) / clockTicks();
}

/** A process's threads: id and name (comm; Node 20 names them all 'node' unless something renames them). */
export function threadsOf(pid: number): Array<{ tid: number; comm: string }> {
  return fs.readdirSync(`/proc/${pid}/task`).map((t) => {
    let comm = '';
    try {
      comm = fs.readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim();
    } catch {
      // the thread ended between the listing and the read
    }
    return { tid: Number(t), comm };
  });
}

/**
 * CPU seconds one thread has run: the first field of /proc/<pid>/task/<tid>/schedstat (nanoseconds, so short windows
 * are exact), or utime+stime of its stat (clock ticks) where schedstat is missing. NaN once the thread is gone.
 */
export function threadCpuSeconds(pid: number, tid: number): number {
  try {
    const ns = Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns)) return ns / 1e9;
  } catch {
    // fall through to stat
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / clockTicks();
  } catch {
    return NaN;
  }
}

/**
 * Resident bytes of a process's WebAssembly memories, from /proc/<pid>/smaps. On 64-bit V8 reserves 8 GiB and
 * more per memory and makes only its current size accessible: that part is a read-write mapping directly followed
 * by the rest of the reservation, inaccessible (---p) and at least 4 GiB. Nothing else in a Node process looks
 * like that, so the sum of those read-write parts is the wasm heaps (e.g. an AAC encoder pool's).
 */
export function wasmRssBytes(pid: number): { bytes: number; memories: number } {
  const maps: Array<{ start: bigint; end: bigint; perm: string; rssKB: number }> = [];
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const h = /^([0-9a-f]+)-([0-9a-f]+) (\S+) /.exec(line);
    if (h) {
      maps.push({ start: BigInt('0x' + h[1]), end: BigInt('0x' + h[2]), perm: h[3], rssKB: 0 });
      continue;
    }
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    if (r && maps.length > 0) maps[maps.length - 1].rssKB = Number(r[1]);
  }
  const minGuard = BigInt(4) << BigInt(30);
  let bytes = 0;
  let memories = 0;
  for (let i = 0; i + 1 < maps.length; i++) {
    const a = maps[i];
    const b = maps[i + 1];
    if (a.perm.startsWith('rw') && a.end === b.start && b.perm === '---p' && b.end - b.start >= minGuard) {
      bytes += a.rssKB * 1024;
      memories++;
    }
  }
  return { bytes, memories };
}

/** Resident set size in bytes, from VmRSS in /proc/<pid>/status. */
export function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/**
 * A process's read-family and write-family system calls since it started (/proc/<pid>/io: syscr, syscw), and its
 * main thread's voluntary context switches (each one a sleep in epoll and a wake-up: how finely the loop was fed).
 * A relay's CPU is mostly these calls, and how many it makes depends on how the sender's writes batch up, which
 * varies from run to run on the same machine: the counts say whether a run's CPU moved with its calls or with the
 * machine.
 */
export function syscallCounts(pid: number): { reads: number; writes: number; wakeups: number } {
  const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (text: string, re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return { reads: field(io, /^syscr:\s+(\d+)/m), writes: field(io, /^syscw:\s+(\d+)/m), wakeups: field(status, /^voluntary_ctxt_switches:\s+(\d+)/m) };
}

/**
 * CPU seconds per core since boot, from /proc/stat (index = core number): busy (everything but idle and
 * iowait), irq (hard and soft interrupts, e.g. loopback TCP delivery, charged to no process) and total.
 */
export function coreTimes(): Array<{ busy: number; irq: number; total: number }> {
  const out: Array<{ busy: number; irq: number; total: number }> = [];
  for (const line of fs.readFileSync('/proc/stat', 'utf8').split('\n')) {
    const m = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    // user nice system idle iowait irq softirq steal
    const v = m[2].trim().split(/\s+/).slice(0, 8).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const t = clockTicks();
    out[Number(m[1])] = { busy: (total - v[3] - (v[4] ?? 0)) / t, irq: ((v[5] ?? 0) + (v[6] ?? 0)) / t, total: total / t };
  }
  return out;
}

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text exposition parsed into name -> samples (comments skipped; label values unescaped). */
export function parsePrometheus(text: string): Map<string, Sample[]> {
  const out = new Map<string, Sample[]>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let lm: RegExpExecArray | null;
      while ((lm = re.exec(m[3])) !== null) labels[lm[1]] = lm[2].replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
    }
    const value = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    let list = out.get(m[1]);
    if (!list) out.set(m[1], (list = []));
    list.push({ labels, value });
  }
  return out;
}

/** The sum of a metric's samples whose labels include `match` (0 when absent). */
export function sumOf(metrics: Map<string, Sample[]>, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of metrics.get(name) ?? []) {
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** what a metric (summed like sumOf) grew by between two scrapes */
export function sumDelta(later: Map<string, Sample[]>, earlier: Map<string, Sample[]>, name: string, match: Record<string, string> = {}): number {
  return sumOf(later, name, match) - sumOf(earlier, name, match);
}

export interface Buckets {
  /** upper bounds, ascending, ending with Infinity */
  le: number[];
  /** cumulative counts per bound */
  counts: number[];
}

/** A histogram's cumulative buckets (samples of `<name>_bucket`), or undefined when the metric is absent. */
export function bucketsOf(metrics: Map<string, Sample[]>, name: string): Buckets | undefined {
  const list = metrics.get(`${name}_bucket`);
  if (!list || list.length === 0) return undefined;
  const byLe = new Map<number, number>();
  for (const s of list) {
    const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  const le = [...byLe.keys()].sort((a, b) => a - b);
  return { le, counts: le.map((x) => byLe.get(x)!) };
}

/** later minus earlier, bucket by bucket (same bounds): the observations made between two scrapes. */
export function bucketsDelta(later: Buckets, earlier: Buckets | undefined): Buckets {
  if (!earlier) return later;
  return { le: later.le, counts: later.counts.map((c, i) => c - (earlier.counts[i] ?? 0)) };
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly inside the bucket it falls in (as
 * Prometheus' histogram_quantile does). NaN without observations; the highest finite bound when it falls
 * in the +Inf bucket.
 */
export function histogramQuantile(b: Buckets, q: number): number {
  const total = b.counts[b.counts.length - 1] ?? 0;
  if (!(total > 0)) return NaN;
  const rank = q * total;
  for (let i = 0; i < b.le.length; i++) {
    if (b.counts[i] >= rank) {
      if (b.le[i] === Infinity) return b.le[i - 1] ?? NaN;
      const lo = i === 0 ? 0 : b.le[i - 1];
      const below = i === 0 ? 0 : b.counts[i - 1];
      const inBucket = b.counts[i] - below;
      return inBucket > 0 ? lo + ((b.le[i] - lo) * (rank - below)) / inBucket : b.le[i];
    }
  }
  return b.le[b.le.length - 2] ?? NaN;
}

/** Exact quantile of unsorted samples (sorts a copy). */
export function quantile(samples: Float64Array | number[], q: number): number {
  if (samples.length === 0) return NaN;
  const s = Float64Array.from(samples).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileEntry {
  /** function name, or V8's (garbage collector), (program), (idle) */
  name: string;
  /** file relative to `root` (or as V8 gives it) and 1-based line */
  where: string;
  selfMs: number;
  /** share of the non-idle time */
  pct: number;
}

export interface ProfileSummary {
  totalMs: number;
  busyMs: number;
  functions: ProfileEntry[];
  /** self time by file (node:internal modules, node_modules packages, our files) */
  files: ProfileEntry[];
}

/** Self time per function and per file from a .cpuprofile, largest first. */
export function summariseCpuProfile(file: string, root: string, top = 25): ProfileSummary {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of prof.nodes) byId.set(n.id, n);
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time before sample i: charge it to the sample it leads to
  for (let i = 0; i < prof.samples.length; i++) {
    const d = prof.timeDeltas[i] ?? 0;
    selfUs.set(prof.samples[i], (selfUs.get(prof.samples[i]) ?? 0) + Math.max(0, d));
  }
  const fnMap = new Map<string, ProfileEntry>();
  const fileMap = new Map<string, ProfileEntry>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    if (!n) continue;
    totalUs += us;
    const cf = n.callFrame;
    if (cf.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const url = shortUrl(cf.url, root);
    const name = cf.functionName || '(anonymous)';
    const where = url ? `${url}:${cf.lineNumber + 1}` : '';
    const key = `${name}@${where}`;
    const e = fnMap.get(key) ?? { name, where, selfMs: 0, pct: 0 };
    e.selfMs += us / 1000;
    fnMap.set(key, e);
    const fkey = url || name;
    const f = fileMap.get(fkey) ?? { name: fkey, where: '', selfMs: 0, pct: 0 };
    f.selfMs += us / 1000;
    fileMap.set(fkey, f);
  }
  const busyMs = (totalUs - idleUs) / 1000;
  const finish = (m: Map<string, ProfileEntry>) =>
    [...m.values()]
      .map((e) => ({ ...e, pct: busyMs > 0 ? (100 * e.selfMs) / busyMs : 0 }))
      .sort((a, b) => b.selfMs - a.selfMs)
      .slice(0, top);
  return { totalMs: totalUs / 1000, busyMs, functions: finish(fnMap), files: finish(fileMap) };
}

function shortUrl(url: string, root: string): string {
  if (!url) return '';
  let p = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  if (p.startsWith(root + path.sep)) p = path.relative(root, p);
  return p;
}
