/**
 * The open-latency probe, in a child process of its own (`OpenProbe` forks `dist/test/bench/support/open-probe.js`)
 * so that the load generator's event loop, busy with a thousand terminals and players, does not add its delays to
 * the figures. At a steady rate (`ProbeScheduler`: open loop, no waiting for earlier probes) it sends
 * `POST /strm/open` for a channel that is already live (a new request, of the probe's own application, on a stream
 * other requests hold and a terminal pushes), checks the answer (errCode 0, `ready: true` at once, `ctrl: false`, a
 * play URL) and closes that request with `POST /strm/close`. Latency: request written -> whole answer read, over a
 * keep-alive connection (a few are opened before the probe starts).
 */
import { fork, type ChildProcess } from 'node:child_process';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { replyFrom, stopChild } from './child-reply';
import { ProbeScheduler } from './perf-probes';

const CHILD_MAIN = path.join(__dirname, 'open-probe.js');
const HTTP_TIMEOUT_MS = 15_000;
export const PROBE_NICE = -10;

export interface ProbeJob {
  port: number;
  user: string;
  password: string;
  /** live channels (channel 1 of each SIM), probed round-robin */
  sims: string[];
  rate: number;
  seconds: number;
  maxInFlight: number;
}

export interface ProbeResult {
  /** open latency of every probe answered with errCode 0, ms */
  open: number[];
  /** close latency of those, ms */
  close: number[];
  /** how late each probe started against its schedule (the probe process's own delay), ms */
  late: number[];
  /** probes started */
  started: number;
  /** answered errCode 0 but not ready at once (the channel was not live), or ctrl true (no other request held it) */
  notReady: number;
  ctrlTrue: number;
  /** close answered anything but closed: true */
  notClosed: number;
  /** failed: HTTP error, errCode != 0, timeout (first few messages kept) */
  failed: number;
  errors: string[];
  /** probes skipped because maxInFlight were still running */
  skipped: number;
  /** the probe process's event-loop delay during the run (10 ms timer), ms */
  loopP99: number;
  loopMax: number;
}

type ToChild = { t: 'run'; job: ProbeJob };
type FromChild = { t: 'result'; result: ProbeResult } | { t: 'error'; message: string };

// ------------------------------------------------------------------------------------------------------------
// parent side

export class OpenProbe {
  readonly child: ChildProcess;
  /** whether the probe runs at nice PROBE_NICE (else at the bench's own priority) */
  niced = false;

  constructor() {
    // the affinity of this process (core 1 when the bench pinned itself) is inherited
    this.child = fork(CHILD_MAIN, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    this.child.on('error', () => undefined);
    // the probe is the instrument: ahead of the load generator on the core they share (needs root or CAP_SYS_NICE)
    try {
      if (this.child.pid !== undefined) os.setPriority(this.child.pid, PROBE_NICE);
      this.niced = true;
    } catch {
      this.niced = false;
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  run(job: ProbeJob, signal: AbortSignal): Promise<ProbeResult> {
    return replyFrom<FromChild, ProbeResult>(
      this.child,
      { t: 'run', job } satisfies ToChild,
      (m) => (m.t === 'result' ? { ok: m.result } : { err: new Error(`open probe: ${m.message}`) }),
      { who: 'open probe', timeoutMs: job.seconds * 1000 + HTTP_TIMEOUT_MS * 2 + 10_000, timeoutText: 'no result in time', signal },
    );
  }

  async close(): Promise<void> {
    await stopChild(this.child);
  }
}

// ------------------------------------------------------------------------------------------------------------
// child side

interface Answer {
  ms: number;
  status: number;
  doc?: { errCode?: number; message?: string; data?: unknown };
}

function call(agent: http.Agent, job: ProbeJob, method: string, p: string, body?: unknown): Promise<Answer> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const auth = 'Basic ' + Buffer.from(`${job.user}:${job.password}`).toString('base64');
  return new Promise<Answer>((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      {
        host: '127.0.0.1',
        port: job.port,
        path: p,
        method,
        agent,
        timeout: HTTP_TIMEOUT_MS,
        headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': payload.length, Authorization: auth } : { Authorization: auth },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => {
          const ms = performance.now() - t0;
          let doc: Answer['doc'];
          try {
            doc = JSON.parse(Buffer.concat(parts).toString('utf8'));
          } catch {
            doc = undefined;
          }
          resolve({ ms, status: res.statusCode ?? 0, doc });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${p}: no answer within ${HTTP_TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

async function probe(job: ProbeJob): Promise<ProbeResult> {
  // fifo: the idle connections take turns, and one idle for 2 s is closed here first, so none is reused in the
  // instant the server's keep-alive timeout (5 s) closes it (an ECONNRESET that would be the probe's fault)
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.maxInFlight, scheduling: 'fifo', timeout: 2000 });
  const r: ProbeResult = {
    open: [],
    close: [],
    late: [],
    started: 0,
    notReady: 0,
    ctrlTrue: 0,
    notClosed: 0,
    failed: 0,
    errors: [],
    skipped: 0,
    loopP99: NaN,
    loopMax: NaN,
  };
  const fail = (why: string) => {
    r.failed++;
    if (r.errors.length < 5 && !r.errors.includes(why)) r.errors.push(why);
  };
  // open a few keep-alive connections first, so the figures are the API's, not TCP handshakes
  await Promise.all(Array.from({ length: 4 }, () => call(agent, job, 'GET', '/healthz').catch(() => undefined)));
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const one = async (sim: string) => {
    try {
      const o = await call(agent, job, 'POST', '/strm/open', { user: { token: 'probe' }, typ: 'live', simNo: sim, chanId: 1, keepIntv: 15 });
      const item = Array.isArray(o.doc?.data) ? (o.doc!.data as Array<Record<string, unknown>>)[0] : undefined;
      if (o.doc?.errCode !== 0 || !item || typeof item.reqId !== 'string') {
        fail(`open: HTTP ${o.status}, errCode ${o.doc?.errCode}: ${o.doc?.message ?? 'no JSON'}`);
        return;
      }
      r.open.push(o.ms);
      if (item.ready !== true) r.notReady++;
      if (item.ctrl !== false) r.ctrlTrue++;
      if (typeof item.playUrl !== 'string') fail('open: no playUrl');
      const c = await call(agent, job, 'POST', '/strm/close', { reqIds: [item.reqId] });
      const ci = Array.isArray(c.doc?.data) ? (c.doc!.data as Array<Record<string, unknown>>)[0] : undefined;
      if (c.doc?.errCode !== 0) {
        fail(`close: HTTP ${c.status}, errCode ${c.doc?.errCode}: ${c.doc?.message ?? 'no JSON'}`);
        return;
      }
      r.close.push(c.ms);
      if (ci?.closed !== true) r.notClosed++;
    } catch (err) {
      fail((err as Error).message);
    }
  };
  const start = performance.now() + 20;
  const sched = new ProbeScheduler(job.rate, start, start + job.seconds * 1000, job.maxInFlight);
  let inFlight = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      for (const s of sched.take(performance.now(), inFlight)) {
        r.started++;
        r.late.push(s.lateMs);
        inFlight++;
        void one(job.sims[s.index % job.sims.length]).finally(() => {
          inFlight--;
          if (sched.done && inFlight === 0) resolve();
        });
      }
      if (!sched.done) setTimeout(tick, Math.max(0, sched.nextDueAt() - performance.now()));
      else if (inFlight === 0) resolve();
    };
    setTimeout(tick, Math.max(0, start - performance.now()));
  });
  loop.disable();
  r.skipped = sched.skipped;
  r.loopP99 = loop.percentile(99) / 1e6;
  r.loopMax = loop.max / 1e6;
  agent.destroy();
  return r;
}

function childMain(): void {
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
  process.on('message', (m: ToChild) => {
    if (m.t !== 'run') return;
    probe(m.job).then(
      (result) => process.send?.({ t: 'result', result } satisfies FromChild),
      (err: unknown) => process.send?.({ t: 'error', message: (err as Error).message } satisfies FromChild),
    );
  });
}

if (require.main === module && process.send) childMain();
