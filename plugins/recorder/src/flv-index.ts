/**
 * One pass over a record's FLV file that finds every media sample (where its bytes are, how long, its times) and the
 * codec configurations, for the MP4 form of the file (mp4-layout.ts). Only tag headers and the first bytes of each
 * body are looked at: payloads are skipped, so memory follows the sample count, not the file size. A torn last tag
 * (a recording cut by a crash, or one still being written) ends the index quietly; a tag that does not parse ends
 * it with `stopped` saying why, and what came before is kept.
 */
import * as fs from 'node:fs';
import { promisify } from 'node:util';
import { parseH264Sps } from '../../../plugin-sdk/formats';
import { parseH265Sps } from '../../../plugin-sdk/formats';
import { SampleTable, type SampleDescription } from './mp4-samples';

const TAG_HEADER = 11;
const PREV_SIZE = 4;
const WINDOW = 1 << 20;
/** a sequence header is a few dozen bytes; a bigger one is not one */
const MAX_CONFIG = 64 * 1024;
const readAsync = promisify(fs.read);
const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export interface FlvIndex {
  samples: SampleTable;
  /** sample descriptions by track (0 video, 1 audio), as samples' `desc` number them */
  descriptions: [SampleDescription[], SampleDescription[]];
  /** bytes of the file the index covers (up to the end of the last tag it took) */
  flvLength: number;
  /** why the pass stopped before the end of the file, when a tag did not parse */
  stopped?: string;
  /** audio the MP4 cannot carry (FLV SoundFormat numbers), left out */
  skippedAudioFormats: number[];
  /**
   * An audio track made by an encoder (G.711 as AAC, mp4-aac.ts) rather than taken from the FLV: `skipMs` of its
   * media is the encoder's priming (the edit list skips it) and `presentMs` is what it presents after that.
   */
  audioEdit?: { skipMs: number; presentMs: number };
}

/** Reads a file forward in windows, so a tag header costs no system call of its own. */
class WindowReader {
  private buf = Buffer.alloc(0);
  private at = 0;
  private filled = 0;
  constructor(
    private readonly fd: number,
    readonly size: number,
  ) {}

  /** bytes [pos, pos+n), or null past the end of the file */
  async get(pos: number, n: number): Promise<Buffer | null> {
    if (pos + n > this.size) return null;
    if (pos < this.at || pos + n > this.at + this.filled) {
      const len = Math.min(Math.max(n, WINDOW), this.size - pos);
      if (this.buf.length < len) this.buf = Buffer.allocUnsafe(len);
      const { bytesRead } = await readAsync(this.fd, this.buf, 0, len, pos);
      this.at = pos;
      this.filled = bytesRead;
      if (bytesRead < n) return null;
    }
    return this.buf.subarray(pos - this.at, pos - this.at + n);
  }
}

interface TrackState {
  /** the index in descriptions of the config in force; -1 before the first */
  current: number;
  /** video: samples wait for the first keyframe after a config */
  started: boolean;
}

function sameConfig(a: SampleDescription, b: SampleDescription): boolean {
  return a.codec === b.codec && a.config.equals(b.config) && a.sampleRate === b.sampleRate && a.channels === b.channels;
}

function useConfig(list: SampleDescription[], st: TrackState, d: SampleDescription): void {
  const cur = list[st.current];
  if (cur && sameConfig(cur, d)) return;
  const found = list.findIndex((x) => sameConfig(x, d));
  st.current = found >= 0 ? found : list.push(d) - 1;
}

/** the picture size from the first SPS of an avcC / hvcC record (0x0 when it does not parse) */
function pictureSize(codec: 'h264' | 'h265', rec: Buffer): { width: number; height: number } {
  try {
    if (codec === 'h264') {
      if (rec.length < 8 || (rec[5]! & 0x1f) < 1) return { width: 0, height: 0 };
      const len = rec.readUInt16BE(6);
      const sps = parseH264Sps(rec.subarray(8, 8 + len));
      return { width: sps.width, height: sps.height };
    }
    let p = 23;
    const arrays = rec[22] ?? 0;
    for (let i = 0; i < arrays && p + 3 <= rec.length; i++) {
      const type = rec[p]! & 0x3f;
      const count = rec.readUInt16BE(p + 1);
      p += 3;
      for (let j = 0; j < count && p + 2 <= rec.length; j++) {
        const len = rec.readUInt16BE(p);
        if (type === 33) {
          const sps = parseH265Sps(rec.subarray(p + 2, p + 2 + len));
          return { width: sps.width, height: sps.height };
        }
        p += 2 + len;
      }
    }
  } catch {
    // a size the player finds in the stream itself
  }
  return { width: 0, height: 0 };
}

function aacDescription(asc: Buffer): SampleDescription | undefined {
  if (asc.length < 2) return undefined;
  const freqIdx = ((asc[0]! & 0x07) << 1) | (asc[1]! >> 7);
  const sampleRate = freqIdx === 15 && asc.length >= 5 ? (asc.readUInt32BE(1) >>> 7) & 0xffffff : AAC_RATES[freqIdx];
  const channels = (asc[1]! >> 3) & 0x0f;
  if (!sampleRate) return undefined;
  return { codec: 'aac', config: Buffer.from(asc), sampleRate, channels: channels || 1, width: 0, height: 0 };
}

export interface IndexOptions {
  /** index no further than this many bytes (a snapshot of a file still being written) */
  length?: number;
}

/** Indexes the FLV file at `file` (opened without following symlinks). Throws only when it cannot be read at all. */
export async function indexFlv(file: string, opts: IndexOptions = {}): Promise<FlvIndex> {
  const fd = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const size = Math.min((await fd.stat()).size, opts.length ?? Infinity);
    return await indexOpen(fd.fd, size);
  } finally {
    await fd.close();
  }
}

async function indexOpen(fd: number, size: number): Promise<FlvIndex> {
  const r = new WindowReader(fd, size);
  const out: FlvIndex = { samples: new SampleTable(), descriptions: [[], []], flvLength: 0, skippedAudioFormats: [] };
  const head = await r.get(0, 9);
  if (!head || head.toString('latin1', 0, 3) !== 'FLV') {
    out.stopped = 'not an FLV file';
    return out;
  }
  const dataOffset = head.readUInt32BE(5);
  if (dataOffset < 9) {
    out.stopped = 'bad FLV header';
    return out;
  }
  let pos = dataOffset + PREV_SIZE;
  out.flvLength = Math.min(pos, size);
  const video: TrackState = { current: -1, started: false };
  const audio: TrackState = { current: -1, started: true };
  for (;;) {
    const h = await r.get(pos, TAG_HEADER);
    if (!h) break; // the end, or a torn header
    const type = h[0]!;
    const dataSize = h.readUIntBE(1, 3);
    const ts = ((h[7]! << 24) | h.readUIntBE(4, 3)) >>> 0;
    const end = pos + TAG_HEADER + dataSize + PREV_SIZE;
    if (type !== 8 && type !== 9 && type !== 18) {
      out.stopped = `tag type ${type} at byte ${pos}`;
      break;
    }
    if (end > size) break; // torn last tag
    const prev = await r.get(end - PREV_SIZE, PREV_SIZE);
    if (!prev || prev.readUInt32BE(0) !== TAG_HEADER + dataSize) {
      out.stopped = `PreviousTagSize does not match the tag at byte ${pos}`;
      break;
    }
    const body = pos + TAG_HEADER;
    const problem = type === 9 ? await videoTag(r, out, video, body, dataSize, ts) : type === 8 ? await audioTag(r, out, audio, body, dataSize, ts) : undefined;
    if (problem) {
      out.stopped = `${problem} at byte ${pos}`;
      break;
    }
    pos = end;
    out.flvLength = end;
  }
  return out;
}

async function config(r: WindowReader, at: number, len: number): Promise<Buffer | string> {
  if (len <= 0 || len > MAX_CONFIG) return `a sequence header of ${len} bytes`;
  const b = await r.get(at, len);
  return b ? Buffer.from(b) : 'a torn sequence header';
}

/** undefined when the tag was taken or skipped; a reason when it does not parse */
async function videoTag(r: WindowReader, out: FlvIndex, st: TrackState, body: number, size: number, ts: number): Promise<string | undefined> {
  const b = await r.get(body, Math.min(size, 8));
  if (!b || b.length < 5) return size === 0 ? undefined : 'a video tag too short';
  const b0 = b[0]!;
  let codec: 'h264' | 'h265';
  let packet: number;
  let frameType: number;
  let cts = 0;
  let dataAt: number;
  if (b0 & 0x80) {
    // Enhanced FLV: FrameType, PacketType, then a FourCC
    frameType = (b0 >> 4) & 0x07;
    packet = b0 & 0x0f;
    const fourcc = b.toString('latin1', 1, 5);
    if (fourcc !== 'hvc1' && fourcc !== 'avc1') return undefined;
    codec = fourcc === 'hvc1' ? 'h265' : 'h264';
    if (packet === 1) {
      if (b.length < 8) return 'a video tag too short';
      cts = b.readIntBE(5, 3);
      dataAt = 8;
    } else {
      dataAt = 5;
      if (packet === 3) packet = 1; // CodedFramesX: CodedFrames with no composition offset
    }
  } else {
    frameType = b0 >> 4;
    const id = b0 & 0x0f;
    // 7 AVC; 12 the common (non-Adobe) HEVC extension with the same layout
    if (id !== 7 && id !== 12) return undefined;
    codec = id === 7 ? 'h264' : 'h265';
    packet = b[1]!;
    cts = b.readIntBE(2, 3);
    dataAt = 5;
  }
  if (frameType === 5) return undefined; // video info / command frame
  const list = out.descriptions[0];
  if (packet === 0) {
    const rec = await config(r, body + dataAt, size - dataAt);
    if (typeof rec === 'string') return rec;
    useConfig(list, st, { codec, config: rec, sampleRate: 0, channels: 0, ...pictureSize(codec, rec) });
    return undefined;
  }
  if (packet !== 1 || size <= dataAt) return undefined;
  const cur = list[st.current];
  if (!cur || cur.codec !== codec) return undefined; // frames before their configuration cannot be decoded
  const key = frameType === 1;
  if (!st.started && !key) return undefined;
  st.started = true;
  if (st.current > 255) return 'more than 256 video configurations';
  out.samples.push(0, body + dataAt, size - dataAt, ts, cts, key, st.current);
  return undefined;
}

async function audioTag(r: WindowReader, out: FlvIndex, st: TrackState, body: number, size: number, ts: number): Promise<string | undefined> {
  if (size < 1) return undefined;
  const b = await r.get(body, Math.min(size, 2));
  if (!b) return 'a torn audio tag';
  const format = b[0]! >> 4;
  const list = out.descriptions[1];
  if (format === 10) {
    if (size < 2) return undefined;
    if (b[1] === 0) {
      const asc = await config(r, body + 2, size - 2);
      if (typeof asc === 'string') return asc;
      const d = aacDescription(asc);
      if (d) useConfig(list, st, d);
      return undefined;
    }
    if (list[st.current]?.codec !== 'aac' || size <= 2) return undefined;
    out.samples.push(1, body + 2, size - 2, ts, 0, true, st.current);
    return undefined;
  }
  if (format === 7 || format === 8) {
    // FLV has no rate field for G.711: it is 8 kHz (the recorder's muxer refuses other rates)
    const channels = (b[0]! & 0x01) + 1;
    useConfig(list, st, { codec: format === 7 ? 'alaw' : 'ulaw', config: Buffer.alloc(0), sampleRate: 8000, channels, width: 0, height: 0 });
    if (size > 1) out.samples.push(1, body + 1, size - 1, ts, 0, true, st.current);
    return undefined;
  }
  if (!out.skippedAudioFormats.includes(format)) out.skippedAudioFormats.push(format);
  return undefined;
}
