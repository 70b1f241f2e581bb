/**
 * The AAC engine under real-time load: N encoders in one worker thread (plugins/audio-aac/src/engine), each fed
 * chunks of speech the size terminals send (20 ms by default) at the pace they come, spread over the chunk
 * interval as sockets deliver them. For each rate asked, after a warm-up, a measured window reports:
 *   - worker CPU per stream-second (the worker thread's own CPU time, /proc/thread-self/schedstat),
 *   - main-thread CPU per stream-second (this thread: making the chunks, the engine's client, the replies),
 *   - RSS and wasm memory per encoder, encode-call round trips (p50/p99), and whether the worker kept up,
 *   - how many streams one worker thread would hold in real time at 100 % of a core (1000 / worker ms per s).
 * With --ffmpeg the same load goes to one ffmpeg child process per stream instead (`-c:a aac`), for comparison.
 *
 * The speech is the G.726 fixture (81 s of 8 kHz speech, shared/fixtures/g726/in_32.g726) decoded and resampled
 * by ffmpeg; each stream starts at a different place in it.
 *
 *   node dist/test/bench/run.js aac-engine [--streams N] [--seconds S] [--warmup S] [--rates 16000,8000]
 *        [--chunk-ms MS] [--bitrate B] [--coder fast|twoloop] [--ffmpeg]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { AacEngine, type AacCoder } from '../../plugins/audio-aac/src/engine';
import { fixturePath } from '../support/paths';
import { requireTool } from '../support/tools';
import { cpuSeconds, quantile } from './support/process-probe';

const USAGE = `usage: aac-engine [--streams N] [--seconds S] [--warmup S] [--rates 16000,8000] [--chunk-ms MS] [--bitrate B] [--coder fast|twoloop] [--ffmpeg]`;
const TARGET_STREAMS_PER_CORE = 500;

export interface AacEngineBenchOptions {
  streams: number;
  seconds: number;
  warmup: number;
  rates: number[];
  chunkMs: number;
  bitrate: number;
  coder: AacCoder;
  ffmpeg: boolean;
}

export interface AacEngineBenchRate {
  rate: number;
  streams: number;
  windowSeconds: number;
  /** CPU of the encoding thread(s) (the worker; with --ffmpeg all the children) per second of one stream's audio */
  encodeMsPerStreamSecond: number;
  /** this process's main thread per second of one stream (chunks made here, client, replies) */
  mainMsPerStreamSecond: number;
  /** the whole process (all threads, GC helpers included) per stream-second; with --ffmpeg, + the children */
  processMsPerStreamSecond: number;
  rssPerEncoderKB: number;
  wasmPerEncoderKB: number;
  /** encode call to its frames (engine), or chunk written to first byte after it read (ffmpeg: not measured) */
  roundTripMs: { p50: number; p99: number };
  /** chunks still unanswered at the end of the window: more than a few means it fell behind */
  backlog: number;
  kbps: number;
  /** CPU of the encoding thread(s) in the window, % of one core */
  workerCpuPct: number;
  /** audio answered / audio sent in the window (engine; 1 for ffmpeg, which is not asked) */
  keptUp: number;
  /** 1000 / encodeMsPerStreamSecond: streams one core holds at 100 % */
  streamsPerCore: number;
  openMs: number;
}

export function parseArgs(args: string[]): AacEngineBenchOptions {
  const o: AacEngineBenchOptions = { streams: 500, seconds: 10, warmup: 3, rates: [16000, 8000], chunkMs: 20, bitrate: 24000, coder: 'fast', ffmpeg: false };
  const num = (i: number, flag: string, min: number, max: number): number => {
    const v = args[i + 1];
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < min || n > max) throw new Error(`${flag} needs a number from ${min} to ${max}\n\n${USAGE}`);
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    switch (a) {
      case '--streams':
        o.streams = Math.round(num(i++, a, 1, 5000));
        break;
      case '--seconds':
        o.seconds = num(i++, a, 1, 600);
        break;
      case '--warmup':
        o.warmup = num(i++, a, 0, 60);
        break;
      case '--chunk-ms':
        o.chunkMs = num(i++, a, 5, 1000);
        break;
      case '--bitrate':
        o.bitrate = Math.round(num(i++, a, 8000, 320000));
        break;
      case '--rates': {
        const v = args[++i] ?? '';
        o.rates = v.split(',').map(Number);
        if (o.rates.length === 0 || o.rates.some((r) => !Number.isInteger(r) || r < 8000 || r > 48000))
          throw new Error(`--rates needs rates such as 16000,8000\n\n${USAGE}`);
        break;
      }
      case '--coder': {
        const v = args[++i];
        if (v !== 'fast' && v !== 'twoloop') throw new Error(`--coder is fast or twoloop\n\n${USAGE}`);
        o.coder = v;
        break;
      }
      case '--ffmpeg':
        o.ffmpeg = true;
        break;
      case '-h':
      case '--help':
        throw new Error(USAGE);
      default:
        throw new Error(`unknown argument '${a}'\n\n${USAGE}`);
    }
  }
  return o;
}

/** The fixture's speech at `rate`, float mono. */
function speech(rate: number): Float32Array {
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  const r = spawnSync(
    ffmpeg,
    [
      '-v',
      'error',
      '-f',
      'g726',
      '-code_size',
      '4',
      '-sample_rate',
      '8000',
      '-ch_layout',
      'mono',
      '-i',
      fixturePath('g726/in_32.g726'),
      '-f',
      'f32le',
      '-ar',
      String(rate),
      'pipe:1',
    ],
    { maxBuffer: 1 << 28 },
  );
  if (r.status !== 0) throw new Error(`ffmpeg could not decode the G.726 fixture: ${r.stderr.toString()}`);
  const b = Buffer.from(r.stdout);
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

function threadCpuMs(): number {
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
}

function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function rssNow(): number {
  return process.memoryUsage().rss;
}

/** what each stream does per chunk: engine or ffmpeg */
interface Sink {
  send(stream: number, pcm: Float32Array): void;
  inFlight(): number;
}

/**
 * Drives `streams` streams in real time: a 4 ms timer, each stream due every chunkMs with its own phase, so calls
 * arrive spread over the interval as socket reads would. Returns when `seconds` have passed.
 */
async function drive(sink: Sink, pcm: Float32Array, streams: number, rate: number, chunkMs: number, seconds: number): Promise<number> {
  const chunk = Math.round((rate * chunkMs) / 1000);
  const start = performance.now();
  const phase = Array.from({ length: streams }, (_, s) => (s * chunkMs) / streams);
  const sent = new Array<number>(streams).fill(0);
  const pos = Array.from({ length: streams }, (_, s) => Math.floor((s * 7919 * chunk) % (pcm.length - chunk)));
  let chunks = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now() - start;
      for (let s = 0; s < streams; s++) {
        // catch up if the timer was late: every stream sends what is due, as a terminal's socket would deliver it
        while (phase[s]! + sent[s]! * chunkMs <= now) {
          if (pos[s]! + chunk > pcm.length) pos[s] = 0;
          sink.send(s, pcm.slice(pos[s]!, pos[s]! + chunk));
          pos[s]! += chunk;
          sent[s]!++;
          chunks++;
        }
      }
      if (now >= seconds * 1000) {
        clearInterval(timer);
        resolve();
      }
    }, 4);
  });
  return chunks;
}

async function runEngine(o: AacEngineBenchOptions, rate: number, pcm: Float32Array): Promise<AacEngineBenchRate> {
  const engine = new AacEngine({ log: pino({ level: 'warn' }), coder: o.coder, hangMs: 30_000 });
  try {
    await engine.stats(); // the worker up, before the baseline
    const rss0 = rssNow();
    const wasm0 = (await engine.stats()).wasmBytes;
    const t0 = performance.now();
    const ids: number[] = [];
    for (let s = 0; s < o.streams; s += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, o.streams - s) }, () => engine.open({ sampleRate: rate, channels: 1, bitrate: o.bitrate })),
      );
      for (const b of batch) ids.push(b.id);
    }
    const openMs = (performance.now() - t0) / o.streams;
    // Streams start at different moments of a frame, as real ones do: started together, all 500 would complete a
    // frame in the same 20 ms and the worker would see bursts of encoding no real load has.
    await Promise.all(ids.map((id, s) => engine.encode(id, pcm.slice(0, Math.floor((s * 1024) / o.streams)))));
    let inFlight = 0;
    let answered = 0;
    let bytes = 0;
    let counting = false;
    let failures = 0;
    const rtt: number[] = [];
    const sink: Sink = {
      send(stream, chunk) {
        inFlight++;
        const at = performance.now();
        const n = chunk.length; // the chunk is detached once sent
        engine.encode(ids[stream]!, chunk).then(
          (frames) => {
            inFlight--;
            if (!counting) return;
            rtt.push(performance.now() - at);
            answered += n;
            for (const f of frames) bytes += f.data.length;
          },
          () => {
            inFlight--;
            failures++;
          },
        );
      },
      inFlight: () => inFlight,
    };
    await drive(sink, pcm, o.streams, rate, o.chunkMs, o.warmup);
    const s0 = await engine.stats();
    const main0 = threadCpuMs();
    const proc0 = processCpuMs();
    counting = true;
    const w0 = performance.now();
    await drive(sink, pcm, o.streams, rate, o.chunkMs, o.seconds);
    const windowSeconds = (performance.now() - w0) / 1000;
    const backlog = inFlight;
    counting = false;
    const s1 = await engine.stats();
    const main1 = threadCpuMs();
    const proc1 = processCpuMs();
    const rss1 = rssNow();
    if (failures > 0) throw new Error(`${failures} encode calls failed`);
    const streamSeconds = o.streams * windowSeconds;
    // per second of audio the worker answered: a worker that falls behind has done less than it was given
    const encodeMs = (s1.cpuMs - s0.cpuMs) / (answered / rate);
    const workerCpuPct = ((s1.cpuMs - s0.cpuMs) / (windowSeconds * 1000)) * 100;
    return {
      rate,
      streams: o.streams,
      windowSeconds,
      keptUp: answered / rate / streamSeconds,
      workerCpuPct,
      encodeMsPerStreamSecond: encodeMs,
      mainMsPerStreamSecond: (main1 - main0) / streamSeconds,
      processMsPerStreamSecond: (proc1 - proc0) / streamSeconds,
      rssPerEncoderKB: (rss1 - rss0) / o.streams / 1024,
      wasmPerEncoderKB: (s1.wasmBytes - wasm0) / o.streams / 1024,
      roundTripMs: { p50: quantile(rtt, 0.5), p99: quantile(rtt, 0.99) },
      backlog,
      kbps: (bytes * 8) / streamSeconds / 1000,
      streamsPerCore: 1000 / encodeMs,
      openMs,
    };
  } finally {
    await engine.stop();
  }
}

/** One ffmpeg per stream, fed the same chunks on its stdin; CPU and RSS from /proc. */
async function runFfmpeg(o: AacEngineBenchOptions, rate: number, pcm: Float32Array): Promise<AacEngineBenchRate> {
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  const kids: ChildProcess[] = [];
  let bytes = 0;
  let counting = false;
  const t0 = performance.now();
  try {
    for (let s = 0; s < o.streams; s++) {
      const c = spawn(
        ffmpeg,
        [
          '-v',
          'error',
          '-probesize',
          '32',
          '-analyzeduration',
          '0',
          '-fflags',
          'nobuffer',
          '-f',
          'f32le',
          '-ar',
          String(rate),
          '-ac',
          '1',
          '-i',
          'pipe:0',
          '-c:a',
          'aac',
          '-aac_coder',
          o.coder,
          '-b:a',
          String(o.bitrate),
          '-flush_packets',
          '1',
          '-f',
          'adts',
          'pipe:1',
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      c.stdout!.on('data', (d: Buffer) => {
        if (counting) bytes += d.length;
      });
      c.stdin!.on('error', () => undefined);
      kids.push(c);
    }
    const openMs = (performance.now() - t0) / o.streams;
    const sink: Sink = { send: (s, chunk) => void kids[s]!.stdin!.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)), inFlight: () => 0 };
    await drive(sink, pcm, o.streams, rate, o.chunkMs, o.warmup);
    const cpu = () => kids.reduce((a, k) => a + cpuSeconds(k.pid!) * 1000, 0);
    const pss = () => kids.reduce((a, k) => a + Number(/^Pss:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${k.pid!}/smaps_rollup`, 'utf8'))?.[1] ?? 0) * 1024, 0);
    const c0 = cpu();
    const main0 = threadCpuMs();
    const proc0 = processCpuMs();
    counting = true;
    const w0 = performance.now();
    await drive(sink, pcm, o.streams, rate, o.chunkMs, o.seconds);
    const windowSeconds = (performance.now() - w0) / 1000;
    counting = false;
    const c1 = cpu();
    const streamSeconds = o.streams * windowSeconds;
    const encodeMs = (c1 - c0) / streamSeconds;
    return {
      rate,
      streams: o.streams,
      windowSeconds,
      keptUp: 1,
      workerCpuPct: ((c1 - c0) / (windowSeconds * 1000)) * 100,
      encodeMsPerStreamSecond: encodeMs,
      mainMsPerStreamSecond: (threadCpuMs() - main0) / streamSeconds,
      processMsPerStreamSecond: (processCpuMs() - proc0) / streamSeconds + encodeMs,
      rssPerEncoderKB: pss() / o.streams / 1024, // PSS: the shared libraries counted once, not per child
      wasmPerEncoderKB: 0,
      roundTripMs: { p50: NaN, p99: NaN },
      backlog: 0,
      kbps: (bytes * 8) / streamSeconds / 1000,
      streamsPerCore: 1000 / encodeMs,
      openMs,
    };
  } finally {
    for (const k of kids) k.kill('SIGKILL');
    await sleep(100);
  }
}

export async function run(args: string[]): Promise<AacEngineBenchRate[]> {
  const o = parseArgs(args);
  const out: AacEngineBenchRate[] = [];
  const what = o.ffmpeg ? `one ffmpeg child per stream (-aac_coder ${o.coder})` : `one worker thread, coder ${o.coder}`;
  console.log(
    `aac-engine: ${o.streams} streams, mono, ${o.bitrate / 1000} kbit/s, ${o.chunkMs} ms chunks, ${what}; warm-up ${o.warmup} s, window ${o.seconds} s`,
  );
  for (const rate of o.rates) {
    const pcm = speech(rate);
    const r = o.ffmpeg ? await runFfmpeg(o, rate, pcm) : await runEngine(o, rate, pcm);
    out.push(r);
    const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
    console.log(`\n  ${rate} Hz, ${r.streams} streams, ${f(r.windowSeconds, 1)} s window`);
    console.log(
      `    encoding CPU      ${f(r.encodeMsPerStreamSecond)} ms per stream-second (the ${o.ffmpeg ? 'children' : 'worker thread'} used ${f(r.workerCpuPct, 1)} % of a core)`,
    );
    console.log(`    main thread CPU   ${f(r.mainMsPerStreamSecond)} ms per stream-second (load generation included)`);
    console.log(`    process CPU       ${f(r.processMsPerStreamSecond)} ms per stream-second`);
    console.log(
      `    memory            ${f(r.rssPerEncoderKB, 0)} KB RSS per encoder${o.ffmpeg ? ' (PSS of each child)' : `, ${f(r.wasmPerEncoderKB, 0)} KB of wasm memory`}; open ${f(r.openMs)} ms each`,
    );
    if (!o.ffmpeg) {
      const behind = r.keptUp < 0.99 || r.roundTripMs.p99 > 250;
      console.log(`    round trip        p50 ${f(r.roundTripMs.p50, 1)} ms, p99 ${f(r.roundTripMs.p99, 1)} ms; ${r.backlog} chunks unanswered at the end`);
      console.log(`    real time         ${f(r.keptUp * 100, 1)} % of the audio sent was encoded in the window: ${behind ? 'FELL BEHIND' : 'kept up'}`);
    }
    console.log(`    output            ${f(r.kbps, 1)} kbit/s per stream`);
    const verdict = r.streamsPerCore >= TARGET_STREAMS_PER_CORE ? 'meets' : 'MISSES';
    console.log(`    one core holds    ${f(r.streamsPerCore, 0)} streams in real time at 100 % (${verdict} the ${TARGET_STREAMS_PER_CORE} per core target)`);
  }
  return out;
}
