/**
 * ffprobe for plugin tests: what a player would see of an output's URL (HTTP-FLV, raw H.264, RTSP), or of bytes a test
 * collected, decoded frame by frame. Asynchronous: the gateway under test runs in this process and must go on
 * answering while ffprobe reads.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { findFfmpeg } from './testkit-clips';

/** ffprobe beside the test kit's ffmpeg (Debian's ffmpeg package has both) */
export function findFfprobe(): string {
  return path.join(path.dirname(findFfmpeg()), 'ffprobe');
}

export interface ProbedFrame {
  keyFrame: boolean;
  /** 'I', 'P', 'B' */
  pictType: string;
  /** presentation time, seconds, when the container gives one */
  ptsSec: number | undefined;
}

export interface VideoProbe {
  /** every stream's codec, in order (e.g. ['h264', 'aac']) */
  streams: string[];
  codec: string;
  width: number;
  height: number;
  /** every frame decoded, in order */
  frames: ProbedFrame[];
  /** what ffprobe wrote on stderr at its `error` level (empty: nothing failed to decode) */
  errors: string;
}

export interface ProbeOptions {
  /** the container when ffprobe cannot guess it (bytes, or a URL without an extension): 'h264', 'flv' */
  format?: string;
  /** stop after this many packets, of all streams (a live URL never ends); default: read it all */
  packets?: number;
  /**
   * Media time ffprobe reads to learn the streams before it reports frames (default 1000; ffprobe's own is 5 s, which
   * a live stream takes 5 s of the clock to give)
   */
  analyzeMs?: number;
  /** ffprobe is killed after this (default 20 s) */
  timeoutMs?: number;
}

/** The first video stream of a URL or of bytes as ffprobe decodes it (and the codecs of all its streams). */
export async function probeVideo(input: string | Buffer, opts: ProbeOptions = {}): Promise<VideoProbe> {
  let dir: string | undefined;
  let target: string;
  if (typeof input === 'string') target = input;
  else {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probe-'));
    target = path.join(dir, 'input');
    fs.writeFileSync(target, input);
  }
  const args = [
    '-v',
    'error',
    '-show_streams',
    '-show_frames',
    '-show_entries',
    'stream=index,codec_type,codec_name,width,height:frame=stream_index,key_frame,pict_type,pts_time',
    '-of',
    'json',
  ];
  args.push('-analyzeduration', String(Math.round((opts.analyzeMs ?? 1000) * 1000)));
  if (opts.packets !== undefined) args.push('-read_intervals', `%+#${opts.packets}`);
  if (opts.format) args.push('-f', opts.format);
  args.push(target);
  try {
    const { code, stdout, stderr } = await run(findFfprobe(), args, opts.timeoutMs ?? 20_000);
    if (code !== 0) throw new Error(`ffprobe ${target} exited ${code}: ${stderr.trim()}`);
    const out = JSON.parse(stdout) as { streams?: Array<Record<string, unknown>>; frames?: Array<Record<string, unknown>> };
    const s = out.streams?.find((x) => x.codec_type === 'video');
    if (!s) throw new Error(`ffprobe found no video stream in ${target}: ${stderr.trim()}`);
    return {
      streams: (out.streams ?? []).map((x) => String(x.codec_name)),
      codec: String(s.codec_name),
      width: Number(s.width),
      height: Number(s.height),
      errors: stderr.trim(),
      frames: (out.frames ?? [])
        .filter((f) => f.stream_index === s.index)
        .map((f) => ({
          keyFrame: f.key_frame === 1,
          pictType: String(f.pict_type),
          ptsSec: f.pts_time === undefined ? undefined : Number(f.pts_time),
        })),
    };
  } finally {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${path.basename(cmd)} took longer than ${timeoutMs} ms: ${stderr.trim()}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
