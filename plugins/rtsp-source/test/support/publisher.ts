/**
 * ffmpeg as the camera's encoder: a short clip made once (lavfi test pattern and a tone), then published in a loop
 * at its own pace (`-re -stream_loop -1 -c copy`) to the test server with RTSP ANNOUNCE/RECORD over TCP.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { TestGateway } from '../../../../plugin-sdk/testkit';
import { requireTool } from '../../../../test/support/tools';
import { scratchDir } from '../../../../test/support/paths';
import { runProcessOk } from '../../../../test/support/run-process';
import { countFrames } from '../../../../test/support/ffprobe';

export type ClipKind = 'h264-aac' | 'h265-pcma' | 'h264-pcmu';

const made = new Map<ClipKind, string>();
let dir: string | undefined;

/** a 4 s clip in Matroska (which carries all three pairs); made once per process */
export function clipFile(kind: ClipKind): string {
  const have = made.get(kind);
  if (have) return have;
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  dir ??= scratchDir('rtsp-source-clips');
  const file = path.join(dir, `${kind}.mkv`);
  const video =
    kind === 'h265-pcma'
      ? ['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'keyint=25:bframes=0:log-level=error']
      : ['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '25', '-bf', '0', '-pix_fmt', 'yuv420p'];
  const audio =
    kind === 'h264-aac' ? ['-c:a', 'aac', '-ar', '16000', '-ac', '1'] : ['-c:a', kind === 'h265-pcma' ? 'pcm_alaw' : 'pcm_mulaw', '-ar', '8000', '-ac', '1'];
  const r = spawnSync(
    ffmpeg,
    [
      '-v',
      'error',
      '-y',
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=320x240:rate=25',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=1000:sample_rate=16000',
      '-t',
      '4',
      ...video,
      ...audio,
      file,
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  if (r.status !== 0) throw new Error(`ffmpeg could not make the ${kind} clip: ${r.stderr}`);
  made.set(kind, file);
  return file;
}

/** ffmpeg publishing the clip in a loop until stopped */
export function publish(kind: ClipKind, url: string): { proc: ChildProcess; stop(): Promise<void> } {
  const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
  const proc = spawn(ffmpeg, ['-v', 'error', '-re', '-stream_loop', '-1', '-i', clipFile(kind), '-c', 'copy', '-f', 'rtsp', '-rtsp_transport', 'tcp', url], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (err.length < 4000) err += c.toString();
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    proc,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** ffprobe of a URL, run without blocking (the gateway under test serves from this process) */
export async function probeUrl(url: string, timeoutMs = 30_000): Promise<{ streams: Array<Record<string, string | number>>; stderr: string }> {
  const p = await runProcessOk(
    requireTool('ffprobe', 'ffmpeg'),
    [
      '-v',
      'error',
      '-rw_timeout',
      '15000000',
      '-analyzeduration',
      '3000000',
      '-show_entries',
      'stream=codec_type,codec_name,width,height,sample_rate',
      '-of',
      'json',
      url,
    ],
    timeoutMs,
  );
  return { streams: (JSON.parse(p.stdout) as { streams: Array<Record<string, string | number>> }).streams, stderr: p.stderr };
}

/** `n` video units of a bus stream from its latest keyframe, as one Annex-B buffer */
export function collectVideo(gw: TestGateway, stream: string, n: number, timeoutMs = 15_000): Promise<Buffer> {
  const s = gw.bus.get(stream);
  if (!s) throw new Error(`no bus stream ${stream}`);
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const t = setTimeout(() => {
      sub.close();
      reject(new Error(`only ${parts.length} of ${n} video units of ${stream} came`));
    }, timeoutMs);
    const sub = s.subscribe(
      {
        write(u) {
          if (parts.length >= n) return;
          parts.push(u.payload);
          if (parts.length === n) {
            clearTimeout(t);
            queueMicrotask(() => sub.close());
            resolve(Buffer.concat(parts));
          }
        },
      },
      { media: 'v' },
    );
  });
}

/** ffprobe (frames counted) of an elementary stream or FLV, given as bytes */
export async function probeFile(
  data: Buffer,
  format: 'h264' | 'hevc' | 'flv',
): Promise<{ codec: string; width: number; height: number; frames: number; errors: string }> {
  dir ??= scratchDir('rtsp-source-clips');
  const file = path.join(dir, `probe-${process.pid}-${Date.now()}.${format}`);
  fs.writeFileSync(file, data);
  try {
    const c = await countFrames(file, ['-f', format, '-select_streams', 'v']);
    const v = c.streams[0];
    return { codec: v.codec_name, width: Number(v.width), height: Number(v.height), frames: Number(v.nb_read_frames), errors: c.stderr };
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/** the first `n` bytes of an HTTP response body */
export function firstBytes(url: string, n: number, timeoutMs = 15_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let have = 0;
    const req = http.get(url, (res) => {
      if (res.statusCode !== 200) {
        req.destroy();
        return reject(new Error(`HTTP ${res.statusCode} for ${url}`));
      }
      res.on('data', (c: Buffer) => {
        parts.push(c);
        have += c.length;
        if (have >= n) {
          clearTimeout(t);
          req.destroy();
          resolve(Buffer.concat(parts));
        }
      });
    });
    req.on('error', () => undefined);
    const t = setTimeout(() => {
      req.destroy();
      reject(new Error(`only ${have} bytes from ${url}`));
    }, timeoutMs);
  });
}

/** ffmpeg decodes `seconds` of a URL to nothing; its error output (empty when every frame decoded) */
export async function decodeUrl(url: string, seconds: number, timeoutMs = 30_000): Promise<{ errors: string; frames: { video: number } }> {
  const p = await runProcessOk(
    requireTool('ffmpeg', 'ffmpeg'),
    [
      '-v',
      'error',
      '-stats_period',
      '0.5',
      '-progress',
      'pipe:1',
      '-t',
      String(seconds),
      '-i',
      url,
      '-map',
      '0:v',
      '-f',
      'null',
      '-',
      '-map',
      '0:a',
      '-f',
      'null',
      '-',
    ],
    timeoutMs,
  );
  const frames = [...p.stdout.matchAll(/^frame=(\d+)/gm)].map((m) => Number(m[1]));
  return { errors: p.stderr.trim(), frames: { video: frames.at(-1) ?? 0 } };
}
