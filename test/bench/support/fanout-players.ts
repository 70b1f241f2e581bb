/**
 * Players of the fan-out benchmark in child processes: `PlayerProcs` forks K of them (`node
 * dist/test/bench/support/fanout-players.js`, IPC) and deals the play URLs out; each child plays its share over
 * HTTP-FLV (raw socket, FlvPlayCounter) or WS-FLV (`ws`), and between 'start' and 'stop' records every video frame
 * each player reads (FLV timestamp, key flag, read time on the system-wide monotonic clock). After the run the
 * bench sends the frames its terminal sent (`SentFrames`) and each child checks its players against them
 * (`checkFrames`) and returns per-player figures and a mergeable latency histogram: no sample crosses the process
 * boundary during the window, and the check cannot race the send times.
 *
 * Several processes so one player process's event loop does not carry 2000 sockets alone; they all share the
 * bench's core (they inherit its CPU affinity), so they add no CPU, only isolation.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type * as net from 'node:net';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { replyFrom, stopChild } from './child-reply';
import { FlvPlayCounter } from './flv-play-counter';
import { connectTcp } from './gateway-harness';
import { LatencyHistogram, checkFrames, indexSent, perfToMonotonic, type FrameCheck, type SentFrames } from './perf-probes';

const CHILD_MAIN = path.join(__dirname, 'fanout-players.js');
const CONNECT_CONCURRENCY = 32;
const REPLY_TIMEOUT_MS = 60_000;

/** per player, what the child sends back after the check */
export interface PlayerFigures extends FrameCheck {
  /** FLV bytes read between 'start' and 'mark' (HTTP framing and WS headers not counted) */
  bytes: number;
  /** the player's connection ended or failed before 'stop' */
  closed: boolean;
  error?: string;
}

export interface MarkReply {
  t: 'marked';
  /** seconds between 'start' and 'mark' in the child */
  seconds: number;
  /** this child's own event-loop delay in that time, ms */
  loopP99: number;
  loopMax: number;
}

export interface AnalysisReply {
  t: 'analysis';
  players: PlayerFigures[];
  latency: ReturnType<LatencyHistogram['toJSON']>;
}

type ToChild =
  | { t: 'connect'; urls: string[]; ws: boolean; capacity: number }
  | { t: 'start' }
  | { t: 'mark' }
  | { t: 'stop' }
  | { t: 'check'; sent: { ts: number[]; at: number[]; key: boolean[] }; from: number; to: number };

type FromChild =
  | { t: 'connected'; ok: number; failed: number; errors: string[] }
  | { t: 'started' }
  | MarkReply
  | { t: 'stopped' }
  | AnalysisReply
  | { t: 'error'; message: string };

// ------------------------------------------------------------------------------------------------------------
// parent side

export class PlayerProcs {
  readonly children: ChildProcess[] = [];

  constructor(count: number) {
    for (let i = 0; i < count; i++) {
      // stdio inherited so a child's crash is seen; the affinity (core 1 when the bench pinned itself) is inherited
      const c = fork(CHILD_MAIN, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
      c.on('error', () => undefined);
      this.children.push(c);
    }
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid).filter((p): p is number => p !== undefined);
  }

  private ask<T extends FromChild>(c: ChildProcess, msg: ToChild, want: T['t'], signal: AbortSignal): Promise<T> {
    return replyFrom<FromChild, T>(
      c,
      msg,
      (m) => {
        if (m.t === want) return { ok: m as T };
        if (m.t === 'error') return { err: new Error(`player process ${c.pid}: ${m.message}`) };
        return undefined;
      },
      { who: `player process ${c.pid}`, timeoutMs: REPLY_TIMEOUT_MS, timeoutText: `no '${want}' within ${REPLY_TIMEOUT_MS / 1000} s`, signal },
    );
  }

  private all<T extends FromChild>(msg: (i: number) => ToChild, want: T['t'], signal: AbortSignal): Promise<T[]> {
    return Promise.all(this.children.map((c, i) => this.ask<T>(c, msg(i), want, signal)));
  }

  /** deals `urls` out round-robin and waits until every player has its 200 (or WS open) or failed */
  async connect(urls: string[], ws: boolean, capacity: number, signal: AbortSignal): Promise<{ ok: number; failed: number; errors: string[] }> {
    const share = (i: number) => urls.filter((_u, k) => k % this.children.length === i);
    const r = await this.all<{ t: 'connected'; ok: number; failed: number; errors: string[] }>(
      (i) => ({ t: 'connect', urls: share(i), ws, capacity }),
      'connected',
      signal,
    );
    return { ok: r.reduce((n, x) => n + x.ok, 0), failed: r.reduce((n, x) => n + x.failed, 0), errors: r.flatMap((x) => x.errors) };
  }

  async start(signal: AbortSignal): Promise<void> {
    await this.all(() => ({ t: 'start' }), 'started', signal);
  }

  mark(signal: AbortSignal): Promise<MarkReply[]> {
    return this.all<MarkReply>(() => ({ t: 'mark' }), 'marked', signal);
  }

  async stop(signal: AbortSignal): Promise<void> {
    await this.all(() => ({ t: 'stop' }), 'stopped', signal);
  }

  /** each child checks its players against the sent frames over sent indexes [from, to] */
  async check(sent: SentFrames, from: number, to: number, signal: AbortSignal): Promise<{ players: PlayerFigures[]; latency: LatencyHistogram }> {
    const msg: ToChild = { t: 'check', sent: { ts: Array.from(sent.ts), at: Array.from(sent.at), key: Array.from(sent.key) }, from, to };
    const r = await this.all<AnalysisReply>(() => msg, 'analysis', signal);
    const latency = new LatencyHistogram();
    for (const x of r) latency.merge(LatencyHistogram.fromJSON(x.latency));
    return { players: r.flatMap((x) => x.players), latency };
  }

  async close(): Promise<void> {
    await Promise.all(this.children.map(stopChild));
  }
}

// ------------------------------------------------------------------------------------------------------------
// child side

/** FLV video tag head: frame type in the high nibble of byte 0 (1 = key), AVCPacketType in byte 1 (0 = sequence header) */
const isKey = (head: number): boolean => head >> 12 === 1;
const isSequenceHeader = (head: number): boolean => (head & 0xff) === 0;

class Player {
  readonly counter: FlvPlayCounter;
  closed = false;
  error: string | undefined;
  recording = false;
  count = 0;
  ts: Float64Array;
  at: Float64Array;
  key: Uint8Array;
  bytesAtStart = 0;
  bytesAtMark = 0;
  private sock?: net.Socket;
  private ws?: WebSocket;

  constructor(
    private readonly clock: number,
    capacity: number,
  ) {
    this.ts = new Float64Array(capacity);
    this.at = new Float64Array(capacity);
    this.key = new Uint8Array(capacity);
    this.counter = new FlvPlayCounter((type, ts, _size, head) => {
      if (type !== 9 || !this.recording || head < 0 || isSequenceHeader(head)) return;
      if (this.count === this.ts.length) this.grow();
      this.ts[this.count] = ts;
      this.at[this.count] = performance.now() + this.clock;
      this.key[this.count] = isKey(head) ? 1 : 0;
      this.count++;
    });
  }

  private grow(): void {
    const n = this.ts.length * 2;
    const ts = new Float64Array(n);
    ts.set(this.ts);
    const at = new Float64Array(n);
    at.set(this.at);
    const key = new Uint8Array(n);
    key.set(this.key);
    this.ts = ts;
    this.at = at;
    this.key = key;
  }

  /** resolves once the response head is read (HTTP 200, or the WebSocket is open); rejects on a refusal */
  async connect(url: string, ws: boolean, signal: AbortSignal): Promise<void> {
    if (ws) return this.connectWs(url, signal);
    const u = new URL(url);
    let headRead!: () => void;
    let refused!: (err: Error) => void;
    const head = new Promise<void>((resolve, reject) => {
      headRead = resolve;
      refused = reject;
    });
    const s = await connectTcp(Number(u.port || 80), signal, (chunk, end) => {
      this.counter.push(chunk, end);
      if (this.counter.status === 200) headRead();
      if (this.counter.error !== undefined) {
        this.error ??= this.counter.error;
        refused(new Error(this.counter.error));
        this.sock?.destroy();
      }
    });
    this.sock = s;
    s.on('error', (err) => {
      this.error ??= err.message;
    });
    s.on('close', () => {
      this.closed = true;
    });
    s.once('close', () => refused(new Error(this.error ?? 'connection closed before the response')));
    s.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n`);
    const onAbort = () => {
      this.error ??= 'no response head in time';
      s.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    await head.finally(() => signal.removeEventListener('abort', onAbort));
  }

  private async connectWs(url: string, signal: AbortSignal): Promise<void> {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), { perMessageDeflate: false, handshakeTimeout: 15_000 });
    this.ws = ws;
    const onAbort = () => ws.terminate();
    signal.addEventListener('abort', onAbort, { once: true });
    ws.binaryType = 'nodebuffer';
    // the counter reads an HTTP response: give it a head, then each binary message is FLV as it comes
    this.counter.push(Buffer.from('HTTP/1.1 200 OK\r\n\r\n', 'latin1'));
    this.counter.bytes = 0;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) return;
      this.counter.push(data);
      if (this.counter.error !== undefined) {
        this.error ??= this.counter.error;
        ws.terminate();
      }
    });
    ws.on('close', (code) => {
      this.closed = true;
      if (code !== 1000) this.error ??= `WebSocket closed with ${code}`;
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', (err) => {
        this.error ??= err.message;
        reject(err);
      });
      ws.once('close', (code) => reject(new Error(`WebSocket closed with ${code} before opening`)));
    }).finally(() => signal.removeEventListener('abort', onAbort));
  }

  destroy(): void {
    this.sock?.destroy();
    this.ws?.terminate();
  }
}

async function childMain(): Promise<void> {
  const send = (m: FromChild) => process.send?.(m);
  const players: Player[] = [];
  const clock = perfToMonotonic();
  const ctrl = new AbortController();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  let startedAt = 0;
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => {
    for (const p of players) p.destroy();
    process.exit(0);
  });
  process.on('message', (m: ToChild) => {
    void (async () => {
      try {
        switch (m.t) {
          case 'connect': {
            const errors: string[] = [];
            let failed = 0;
            let next = 0;
            const worker = async () => {
              while (next < m.urls.length) {
                const url = m.urls[next++];
                const p = new Player(clock, m.capacity);
                players.push(p);
                try {
                  await p.connect(url, m.ws, AbortSignal.any([ctrl.signal, AbortSignal.timeout(15_000)]));
                } catch (err) {
                  failed++;
                  if (errors.length < 5) errors.push((err as Error).message);
                }
                await sleep(0);
              }
            };
            await Promise.all(Array.from({ length: Math.min(CONNECT_CONCURRENCY, m.urls.length) }, worker));
            send({ t: 'connected', ok: m.urls.length - failed, failed, errors });
            break;
          }
          case 'start':
            for (const p of players) {
              p.count = 0;
              p.bytesAtStart = p.counter.flvBytes;
              p.recording = true;
            }
            loop.reset();
            loop.enable();
            startedAt = performance.now();
            send({ t: 'started' });
            break;
          case 'mark':
            for (const p of players) p.bytesAtMark = p.counter.flvBytes;
            loop.disable();
            send({ t: 'marked', seconds: (performance.now() - startedAt) / 1000, loopP99: loop.percentile(99) / 1e6, loopMax: loop.max / 1e6 });
            break;
          case 'stop':
            for (const p of players) p.recording = false;
            send({ t: 'stopped' });
            break;
          case 'check': {
            const sent: SentFrames = { ts: m.sent.ts, at: m.sent.at, key: m.sent.key };
            const index = indexSent(sent);
            const latency = new LatencyHistogram();
            const out: PlayerFigures[] = players.map((p) => {
              const c = checkFrames(sent, index, m.from, m.to, { count: p.count, ts: p.ts, at: p.at, key: Array.from(p.key, (k) => k === 1) }, (ms) =>
                latency.add(ms),
              );
              return { ...c, bytes: p.bytesAtMark - p.bytesAtStart, closed: p.closed, ...(p.error !== undefined ? { error: p.error } : {}) };
            });
            send({ t: 'analysis', players: out, latency: latency.toJSON() });
            break;
          }
        }
      } catch (err) {
        send({ t: 'error', message: (err as Error).message });
      }
    })();
  });
}

if (require.main === module && process.send) void childMain();
