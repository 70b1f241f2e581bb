/**
 * Test helpers for hls-out: a gateway with a stand-in ingest (or the real jt1078-ingest), hls-out and audio-aac;
 * fetching playlists and media over real loopback HTTP; a small RFC 8216 playlist reader for the checks; and
 * ffmpeg/ffprobe as the independent players.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import hlsOut from '../index';
import { runProcess } from '../../../test/support/run-process';
import { countFrames, type ProbedStream } from '../../../test/support/ffprobe';
import { requireTool } from '../../../test/support/tools';

export async function startHlsGateway(o: { hls?: Record<string, unknown>; ingest?: 'stub' | 'jt1078'; aac?: boolean } = {}): Promise<TestGateway> {
  const plugins: Array<{ name: string; config?: Record<string, unknown>; def?: any }> = [];
  if ((o.ingest ?? 'stub') === 'stub') {
    const stub = stubMediaPlugin({ fmts: [0] });
    plugins.push({ name: stub.name, def: stub.def });
  } else {
    plugins.push({ name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, disconnectGraceMs: 300 } });
  }
  if (o.aac !== false) plugins.push({ name: 'audio-aac' });
  plugins.push({ name: 'hls-out', def: hlsOut, config: o.hls ?? {} });
  return startTestGateway({ plugins });
}

export async function get(url: string): Promise<{ status: number; headers: Headers; body: Buffer; text: string }> {
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body, text: body.toString('utf8') };
}

export interface ParsedPart {
  duration: number;
  uri: string;
  independent: boolean;
}
export interface ParsedSegment {
  msn: number;
  duration: number;
  uri: string;
  discontinuity: boolean;
  map?: string;
  programDateTime?: number;
  parts: ParsedPart[];
}
export interface ParsedPlaylist {
  version: number;
  targetDuration: number;
  mediaSequence: number;
  discontinuitySequence: number;
  partTarget?: number;
  serverControl?: Record<string, string>;
  segments: ParsedSegment[];
  /** parts after the last complete segment */
  trailingParts: ParsedPart[];
  preloadHint?: string;
  independentSegments: boolean;
  tags: string[];
}

function attrs(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  const re = /([A-Z0-9-]+)=("[^"]*"|[^,]*)/g;
  for (let m = re.exec(s); m; m = re.exec(s)) out[m[1]] = m[2].replace(/^"|"$/g, '');
  return out;
}

/** A strict reader of the media playlists this plugin makes: fails on lines it does not know. */
export function parsePlaylist(text: string): ParsedPlaylist {
  const lines = text.split('\n').filter((l) => l.length > 0);
  assert.equal(lines[0], '#EXTM3U');
  const p: ParsedPlaylist = {
    version: 1,
    targetDuration: -1,
    mediaSequence: 0,
    discontinuitySequence: 0,
    segments: [],
    trailingParts: [],
    independentSegments: false,
    tags: [],
  };
  let pending: Partial<ParsedSegment> & { parts: ParsedPart[] } = { parts: [] };
  let map: string | undefined;
  let extinf: number | undefined;
  for (const line of lines.slice(1)) {
    if (!line.startsWith('#')) {
      assert.notEqual(extinf, undefined, `a URI without EXTINF: ${line}`);
      p.segments.push({
        msn: p.mediaSequence + p.segments.length,
        duration: extinf!,
        uri: line,
        discontinuity: !!pending.discontinuity,
        map,
        programDateTime: pending.programDateTime,
        parts: pending.parts,
      });
      pending = { parts: [] };
      extinf = undefined;
      continue;
    }
    const [tag, value = ''] = line.split(/:(.*)/s);
    p.tags.push(tag);
    switch (tag) {
      case '#EXT-X-VERSION':
        p.version = Number(value);
        break;
      case '#EXT-X-TARGETDURATION':
        p.targetDuration = Number(value);
        break;
      case '#EXT-X-MEDIA-SEQUENCE':
        p.mediaSequence = Number(value);
        break;
      case '#EXT-X-DISCONTINUITY-SEQUENCE':
        p.discontinuitySequence = Number(value);
        break;
      case '#EXT-X-INDEPENDENT-SEGMENTS':
        p.independentSegments = true;
        break;
      case '#EXT-X-SERVER-CONTROL':
        p.serverControl = attrs(value);
        break;
      case '#EXT-X-PART-INF':
        p.partTarget = Number(attrs(value)['PART-TARGET']);
        break;
      case '#EXT-X-MAP':
        map = attrs(value).URI;
        break;
      case '#EXT-X-DISCONTINUITY':
        pending.discontinuity = true;
        break;
      case '#EXT-X-PROGRAM-DATE-TIME':
        pending.programDateTime = Date.parse(value);
        break;
      case '#EXT-X-PART': {
        const a = attrs(value);
        pending.parts.push({ duration: Number(a.DURATION), uri: a.URI, independent: a.INDEPENDENT === 'YES' });
        break;
      }
      case '#EXT-X-PRELOAD-HINT':
        p.preloadHint = attrs(value).URI;
        break;
      case '#EXTINF':
        extinf = Number(value.split(',')[0]);
        break;
      default:
        assert.fail(`unknown tag ${tag}`);
    }
  }
  p.trailingParts = pending.parts;
  return p;
}

/**
 * RFC 8216 rules every playlist of ours must keep: EXTINF rounded within the target duration (and, stricter, not
 * above it), parts within the part target, the version tag matching what is used, a URI on every entry.
 */
export function checkRfc(p: ParsedPlaylist, container: 'fmp4' | 'mpegts'): void {
  assert.ok(p.targetDuration >= 1, 'EXT-X-TARGETDURATION present');
  for (const s of p.segments) {
    // RFC 8216 4.3.3.1: EXTINF rounded to the nearest integer
    assert.ok(Math.round(s.duration) <= p.targetDuration, `segment ${s.msn} (${s.duration} s) within the target duration ${p.targetDuration}`);
    assert.ok(s.duration > 0);
    if (container === 'fmp4') assert.ok(s.map, `segment ${s.msn} has an EXT-X-MAP`);
  }
  assert.equal(p.version, container === 'fmp4' ? 6 : 3, 'version 6 for EXT-X-MAP, 3 for TS with decimal EXTINF');
  if (p.partTarget !== undefined) {
    for (const part of [...p.segments.flatMap((s) => s.parts), ...p.trailingParts]) {
      assert.ok(part.duration <= p.partTarget + 1e-9, `part ${part.uri} (${part.duration}) within PART-TARGET ${p.partTarget}`);
    }
    assert.ok(Number(p.serverControl?.['PART-HOLD-BACK']) >= 3 * p.partTarget - 1e-9, 'PART-HOLD-BACK at least three part targets');
  }
}

/** Polls the playlist until `ok` holds for it. */
export async function waitPlaylist(url: string, ok: (p: ParsedPlaylist) => boolean, timeoutMs = 15_000): Promise<ParsedPlaylist> {
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    const r = await get(url);
    if (r.status === 200) {
      last = r.text;
      const p = parsePlaylist(r.text);
      if (ok(p)) return p;
    } else {
      last = `HTTP ${r.status} ${r.text}`;
    }
    if (Date.now() > deadline) throw new Error(`playlist never got there; last: ${last}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

export function resolveUri(base: string, uri: string): string {
  return new URL(uri, base).toString();
}

export interface Probe {
  video?: { codec: string; width: number; height: number; codecTag?: string };
  audio?: { codec: string; sampleRate: number; channels: number };
  frames: number;
  audioFrames: number;
  errors: string;
}

/**
 * What a test reads of ffprobe's streams: the first video and audio stream, and their frames decoded. The sample
 * entry's tag only where the file is ours (`withTag`): in ffmpeg's copy it is the copy's container's.
 */
function probeOf(streams: ProbedStream[], errors: string, withTag: boolean): Probe {
  const v = streams.find((s) => s.codec_type === 'video');
  const a = streams.find((s) => s.codec_type === 'audio');
  return {
    video: v && { codec: v.codec_name, width: Number(v.width), height: Number(v.height), ...(withTag && { codecTag: String(v.codec_tag_string) }) },
    audio: a && { codec: a.codec_name, sampleRate: Number(a.sample_rate), channels: Number(a.channels) },
    frames: Number(v?.nb_read_frames ?? 0),
    audioFrames: Number(a?.nb_read_frames ?? 0),
    errors,
  };
}

/**
 * ffmpeg plays the play URL (a live HLS playlist) for `seconds`, copying what it gets into a file; ffprobe then
 * decodes every frame of that file. Both are Debian's ffmpeg, which knows nothing of our code.
 */
export async function playWithFfmpeg(url: string, seconds: number): Promise<Probe> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hls-play-'));
  const file = path.join(dir, 'out.mkv');
  try {
    const rec = await runProcess(
      requireTool('ffmpeg', 'ffmpeg'),
      ['-v', 'error', '-nostdin', '-i', url, '-t', String(seconds), '-map', '0', '-c', 'copy', '-y', file],
      60_000,
    );
    assert.equal(rec.code, 0, `ffmpeg read the playlist: ${rec.stderr}`);
    const c = await countFrames(file);
    return probeOf(c.streams, (rec.stderr + c.stderr).trim(), false);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** ffprobe on bytes (an init segment followed by a segment, written to a file first) */
export async function probeBytes(data: Buffer, ext: string): Promise<Probe & { raw: ProbedStream[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hls-probe-'));
  const file = path.join(dir, `media.${ext}`);
  try {
    fs.writeFileSync(file, data);
    const c = await countFrames(file);
    return { ...probeOf(c.streams, c.stderr, true), raw: c.streams };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A terminal pushing pre-packed JT/T 1078 frames (one Buffer[] of packets per frame) over TCP at `fps`, on the
 * wall clock; stops at the end or when stopped.
 */
export function pacedTerminal(port: number, frames: Buffer[][], fps: number): { done: Promise<void>; stop(): void } {
  let stopped = false;
  const done = (async () => {
    const net = await import('node:net');
    const s = net.connect({ host: '127.0.0.1', port });
    s.setNoDelay(true);
    s.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      s.once('connect', resolve);
      s.once('error', reject);
    });
    const t0 = Date.now();
    for (let i = 0; i < frames.length && !stopped; i++) {
      const wait = t0 + (i * 1000) / fps - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      for (const p of frames[i]) s.write(p);
    }
    s.end();
  })();
  return {
    done,
    stop: () => {
      stopped = true;
    },
  };
}
