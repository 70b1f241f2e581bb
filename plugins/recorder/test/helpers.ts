/** Shared by the recorder's plugin-level tests: waiting, raw HTTP, ffprobe and metrics reading. */
import { spawnSync } from 'node:child_process';
import * as http from 'node:http';
import { Client } from 'pg';
import { requireTool } from '../../../test/support/tools';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until cond() is truthy; fails naming what it waited for. */
export async function waitFor<T>(cond: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request whose path goes out exactly as written (fetch would normalise `..` and escapes). */
export function rawRequest(baseUrl: string, method: string, path: string, auth: string | null, headers: Record<string, string> = {}): Promise<RawReply> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: { ...headers, ...(auth ? { authorization: 'Basic ' + Buffer.from(auth).toString('base64') } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export interface ProbeResult {
  codec: string;
  width: number;
  height: number;
  /** frames the decoder actually decoded */
  frames: number;
  duration: number;
  stderr: string;
}

/** Decodes the first video stream of a file with ffprobe (counting frames means decoding every one). */
export function probeVideo(file: string): ProbeResult {
  const ffprobe = requireTool('ffprobe', 'ffmpeg');
  const r = spawnSync(
    ffprobe,
    [
      '-v',
      'error',
      '-count_frames',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=codec_name,width,height,nb_read_frames:format=duration',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`ffprobe failed on ${file}: ${r.stderr}`);
  const j = JSON.parse(r.stdout) as { streams: Array<Record<string, unknown>>; format: Record<string, unknown> };
  const s = j.streams[0];
  if (!s) throw new Error(`ffprobe found no video stream in ${file}`);
  return {
    codec: String(s.codec_name),
    width: Number(s.width),
    height: Number(s.height),
    frames: Number(s.nb_read_frames),
    duration: Number(j.format.duration),
    stderr: r.stderr,
  };
}

/** The value of one sample in Prometheus text, or undefined when absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const labelText = rest[0] === '{' ? rest.slice(1, rest.indexOf('}')) : '';
    if (want.every((w) => labelText.split(',').includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** codec_type:codec_name of every stream ffprobe finds, in order. */
export function probeStreams(file: string): string[] {
  const ffprobe = requireTool('ffprobe', 'ffmpeg');
  const r = spawnSync(ffprobe, ['-v', 'error', '-show_entries', 'stream=codec_type,codec_name', '-of', 'json', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ffprobe failed on ${file}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { streams: Array<{ codec_type: string; codec_name: string }> }).streams.map((s) => `${s.codec_type}:${s.codec_name}`);
}

/** one query on its own connection to the PostgreSQL at `url`: its rows */
export async function pgRows<T = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}
