/**
 * The MP4 form of a record file (`?format=mp4`), made on the fly for every request against once into a sidecar
 * file: a 10-minute recording (H.264 D1 with G.711A, written by the gateway's FLV muxer), served over loopback
 * HTTP three ways, each request alternated between them and repeated:
 *   - fly-cold: a new layout for every request (the FLV indexed, the moov built, the mdat read from the FLV);
 *   - fly-warm: the layout kept in memory (what the recorder does: Mp4LayoutCache), the mdat read from the FLV;
 *   - sidecar: the first request writes `{reqId}.mp4` beside the FLV and later ones send that file.
 * For each: time to first byte and CPU (this process: server and client) of a whole download and of a 1 MiB range
 * at 80 % (a seek), median of --runs (default 7), and the sidecar's one-off cost and disk bytes.
 * Then `audio=aac`'s one-off cost (the layout with the G.711 encoded as AAC in the recorder's worker, median of 3):
 * wall time, this thread's CPU, the whole process's (the worker's included) and the longest event-loop stall.
 *
 *   node dist/test/bench/run.js record-mp4 [--minutes N] [--runs N]
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { flvFileHeader, FlvMuxer, serializeTag } from '../../plugin-sdk/formats/flv';
import { shiftUnit } from '../../plugin-sdk';
import { testClip } from '../../plugin-sdk/testkit';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { G711Transcoder } from '../../plugins/recorder/src/g711-aac';
import { mp4LayoutOf, mp4Stream, type Mp4Layout } from '../../plugins/recorder/src/mp4-layout';
import { mp4LayoutFor } from '../../plugins/recorder/src/mp4-route';
import { parseRange } from '../../plugins/recorder/src/range';

type Mode = 'fly-cold' | 'fly-warm' | 'sidecar';
const MODES: Mode[] = ['fly-cold', 'fly-warm', 'sidecar'];

function arg(args: string[], name: string, def: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
}

/** `minutes` of the clip looped, through the FLV muxer, appended tag by tag as the recorder does */
function makeFlv(file: string, minutes: number): void {
  const clip = testClip({ seconds: 10, size: '704x576', audio: true });
  const muxer = new FlvMuxer();
  for (const t of clip.tracks) muxer.setTrack(t);
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, flvFileHeader(true, true));
  for (let loop = 0; loop < minutes * 6; loop++) {
    const chunk: Buffer[] = [];
    for (const u of clip.units) for (const t of muxer.push(shiftUnit(u, loop * clip.durationMs))) chunk.push(Buffer.from(serializeTag(t)));
    fs.writeSync(fd, Buffer.concat(chunk));
  }
  fs.closeSync(fd);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** this thread's CPU, ms (process.cpuUsage counts the worker threads too) */
function threadCpuMs(): number {
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
}

/** `audio=aac`: the layout with the file's G.711 encoded as AAC, made from nothing as a first request does */
async function aacFirstLayout(
  flv: string,
): Promise<{ ms: number; mainThreadCpuMs: number; processCpuMs: number; maxStallMs: number; aacBytes: number; mp4Bytes: number }> {
  const transcoder = new G711Transcoder(pino({ level: 'silent' }));
  const runs: Array<{ ms: number; mainThreadCpuMs: number; processCpuMs: number; maxStallMs: number; aacBytes: number; mp4Bytes: number }> = [];
  try {
    for (let i = 0; i < 3; i++) {
      const h = monitorEventLoopDelay({ resolution: 1 });
      h.enable();
      const t = performance.now();
      const c = process.cpuUsage();
      const tc = threadCpuMs();
      const l = await mp4LayoutFor(flv, undefined, 'aac', transcoder);
      const u = process.cpuUsage(c);
      h.disable();
      runs.push({
        ms: performance.now() - t,
        mainThreadCpuMs: threadCpuMs() - tc,
        processCpuMs: (u.user + u.system) / 1000,
        maxStallMs: h.max / 1e6,
        aacBytes: l.memory?.length ?? 0,
        mp4Bytes: l.total,
      });
    }
  } finally {
    await transcoder.close();
  }
  const m = (k: keyof (typeof runs)[number]): number => +median(runs.map((r) => r[k])).toFixed(1);
  return {
    ms: m('ms'),
    mainThreadCpuMs: m('mainThreadCpuMs'),
    processCpuMs: m('processCpuMs'),
    maxStallMs: m('maxStallMs'),
    aacBytes: m('aacBytes'),
    mp4Bytes: m('mp4Bytes'),
  };
}

export async function run(args: string[]): Promise<unknown> {
  const minutes = arg(args, 'minutes', 10);
  const runs = arg(args, 'runs', 7);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-record-mp4-'));
  const flv = path.join(dir, 'rec.flv');
  const sidecar = path.join(dir, 'rec.mp4');
  makeFlv(flv, minutes);
  let warm: Mp4Layout | undefined;
  let sidecarMade: { ms: number; cpuMs: number } | undefined;

  const server = http.createServer((req, res) => {
    void (async () => {
      const mode = req.url!.slice(1) as Mode;
      let size: number;
      let open: (start: number, end: number) => NodeJS.ReadableStream;
      if (mode === 'sidecar') {
        if (!fs.existsSync(sidecar)) {
          const t = performance.now();
          const c = process.cpuUsage();
          const l = await mp4LayoutOf(flv);
          const fd = fs.openSync(flv, 'r');
          await pipeline(
            mp4Stream(l, fd, 0, l.total - 1, () => fs.closeSync(fd)),
            fs.createWriteStream(sidecar + '.tmp'),
          );
          fs.renameSync(sidecar + '.tmp', sidecar);
          const u = process.cpuUsage(c);
          sidecarMade = { ms: performance.now() - t, cpuMs: (u.user + u.system) / 1000 };
        }
        size = fs.statSync(sidecar).size;
        open = (start, end) => fs.createReadStream(sidecar, { start, end });
      } else {
        const l = mode === 'fly-warm' && warm ? warm : await mp4LayoutOf(flv);
        if (mode === 'fly-warm') warm = l;
        size = l.total;
        open = (start, end) => {
          const fd = fs.openSync(flv, 'r');
          return mp4Stream(l, fd, start, end, () => fs.closeSync(fd));
        };
      }
      const r = parseRange(req.headers.range, size);
      const [start, end] = r.status === 206 ? [r.start, r.end] : [0, size - 1];
      res.writeHead(r.status === 206 ? 206 : 200, { 'Content-Type': 'video/mp4', 'Content-Length': end - start + 1 });
      await pipeline(open(start, end) as never, res);
    })().catch((err) => {
      res.destroy(err as Error);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const agent = new http.Agent({ keepAlive: true });

  const fetchOnce = (mode: Mode, range?: string): Promise<{ ttfbMs: number; totalMs: number; cpuMs: number; bytes: number }> =>
    new Promise((resolve, reject) => {
      const t = performance.now();
      const c = process.cpuUsage();
      const req = http.get({ host: '127.0.0.1', port, path: `/${mode}`, agent, headers: range ? { Range: range } : {} }, (res) => {
        let ttfb = 0;
        let bytes = 0;
        res.on('data', (b: Buffer) => {
          if (!ttfb) ttfb = performance.now() - t;
          bytes += b.length;
        });
        res.on('end', () => {
          const u = process.cpuUsage(c);
          resolve({ ttfbMs: ttfb, totalMs: performance.now() - t, cpuMs: (u.user + u.system) / 1000, bytes });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
    });

  // the first sidecar request pays for the file: measured apart, then every mode is warmed up once
  const first = await fetchOnce('sidecar');
  for (const m of MODES) await fetchOnce(m);
  const total = warm!.total;
  const seek = `bytes=${Math.floor(total * 0.8)}-${Math.floor(total * 0.8) + (1 << 20) - 1}`;
  const samples: Record<string, Array<{ ttfbMs: number; totalMs: number; cpuMs: number }>> = {};
  for (let i = 0; i < runs; i++) {
    for (const m of MODES) {
      (samples[`${m} whole`] ??= []).push(await fetchOnce(m));
      (samples[`${m} seek 1 MiB`] ??= []).push(await fetchOnce(m, seek));
    }
  }
  server.close();
  agent.destroy();
  const flvBytes = fs.statSync(flv).size;
  const aacFirst = await aacFirstLayout(flv);
  const result = {
    aacFirst,
    minutes,
    flvBytes,
    mp4Bytes: total,
    samples: warm!.samples.count,
    layoutBytes: warm!.bytes,
    sidecarFirstRequest: {
      ttfbMs: +first.ttfbMs.toFixed(1),
      totalMs: +first.totalMs.toFixed(1),
      made: sidecarMade && { ms: +sidecarMade.ms.toFixed(1), cpuMs: +sidecarMade.cpuMs.toFixed(1) },
    },
    medians: Object.fromEntries(
      Object.entries(samples).map(([k, xs]) => [
        k,
        {
          ttfbMs: +median(xs.map((x) => x.ttfbMs)).toFixed(2),
          totalMs: +median(xs.map((x) => x.totalMs)).toFixed(1),
          cpuMs: +median(xs.map((x) => x.cpuMs)).toFixed(1),
        },
      ]),
    ),
  };
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(JSON.stringify(result, null, 2));
  return result;
}

if (require.main === module) void run(process.argv.slice(2));
