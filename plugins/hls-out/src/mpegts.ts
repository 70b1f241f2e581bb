/**
 * A small MPEG-TS writer for HLS: PAT and PMT at the start of every segment, H.264 / H.265 video as Annex-B PES
 * (an access unit delimiter first, parameter sets before every keyframe), AAC as ADTS PES, PCR on the video PID
 * (the audio PID for audio only). Continuity counters run on across the chunks of a stream.
 */
import type { AudioSample, VideoSample } from './samples';
import type { MuxTrack } from './mux-types';

const PACKET = 188;
const PMT_PID = 0x1000;
const VIDEO_PID = 0x100;
const AUDIO_PID = 0x101;
const TS_CLOCK = 90_000;
const WRAP = 2 ** 33;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 24;
    for (let k = 0; k < 8; k++) c = c & 0x80000000 ? (c << 1) ^ 0x04c11db7 : c << 1;
    t[i] = c >>> 0;
  }
  return t;
})();

/** CRC-32/MPEG-2 of a PSI section */
function crc32(b: Buffer): number {
  let crc = 0xffffffff;
  for (const x of b) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ x) & 0xff]) >>> 0;
  return crc >>> 0;
}

const H264_AUD = Buffer.from([0, 0, 0, 1, 0x09, 0xf0]);
const H265_AUD = Buffer.from([0, 0, 0, 1, 0x46, 0x01, 0x50]);
const START = Buffer.from([0, 0, 0, 1]);

/** ADTS sampling_frequency_index by rate */
const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/** object type, sampling index and channel configuration from an AudioSpecificConfig */
export function parseAsc(asc: Buffer, sampleRate: number, channels: number): { objectType: number; freqIndex: number; channelConfig: number } {
  if (asc.length >= 2) {
    const objectType = asc[0] >> 3;
    const freqIndex = ((asc[0] & 7) << 1) | (asc[1] >> 7);
    const channelConfig = (asc[1] >> 3) & 0xf;
    if (objectType > 0 && objectType < 31 && freqIndex < 13) return { objectType, freqIndex, channelConfig };
  }
  const i = AAC_RATES.indexOf(sampleRate);
  return { objectType: 2, freqIndex: i < 0 ? 11 : i, channelConfig: channels };
}

export class TsWriter {
  private readonly cc = new Map<number, number>();
  private readonly video: MuxTrack | undefined;
  private readonly audio: MuxTrack | undefined;
  private readonly pcrPid: number;

  constructor(tracks: ReadonlyArray<MuxTrack>) {
    this.video = tracks.find((t) => t.kind === 'video');
    this.audio = tracks.find((t) => t.kind === 'audio');
    this.pcrPid = this.video ? VIDEO_PID : AUDIO_PID;
  }

  /** one chunk of a segment: its samples' PES packets in decode order (PAT and PMT first at a segment's start) */
  chunk(video: ReadonlyArray<VideoSample>, audio: ReadonlyArray<AudioSample>, segmentStart: boolean): Buffer {
    const out: Buffer[] = [];
    if (segmentStart) {
      out.push(this.section(0, this.pat()), this.section(PMT_PID, this.pmt()));
    }
    let v = 0;
    let a = 0;
    const aTime = (s: AudioSample) => (s.dts * TS_CLOCK) / (this.audio?.timescale ?? TS_CLOCK);
    while (v < video.length || a < audio.length) {
      if (a >= audio.length || (v < video.length && video[v].dts <= aTime(audio[a]))) this.videoPes(video[v++], out);
      else this.audioPes(audio[a++], out);
    }
    return Buffer.concat(out);
  }

  private pat(): Buffer {
    const s = Buffer.from([0x00, 0xb0, 0, 0x00, 0x01, 0xc1, 0x00, 0x00, 0x00, 0x01, 0xe0 | (PMT_PID >> 8), PMT_PID & 0xff]);
    return s;
  }

  private pmt(): Buffer {
    const streams: Buffer[] = [];
    if (this.video) streams.push(Buffer.from([this.video.codec === 'h265' ? 0x24 : 0x1b, 0xe0 | (VIDEO_PID >> 8), VIDEO_PID & 0xff, 0xf0, 0x00]));
    if (this.audio) streams.push(Buffer.from([0x0f, 0xe0 | (AUDIO_PID >> 8), AUDIO_PID & 0xff, 0xf0, 0x00]));
    return Buffer.concat([Buffer.from([0x02, 0xb0, 0, 0x00, 0x01, 0xc1, 0x00, 0x00, 0xe0 | (this.pcrPid >> 8), this.pcrPid & 0xff, 0xf0, 0x00]), ...streams]);
  }

  /** a PSI section (length and CRC filled in) in one packet */
  private section(pid: number, s: Buffer): Buffer {
    s.writeUInt16BE(0xb000 | (s.length + 4 - 3), 1);
    const crc = Buffer.allocUnsafe(4);
    crc.writeUInt32BE(crc32(s), 0);
    const p = Buffer.alloc(PACKET, 0xff);
    p[0] = 0x47;
    p.writeUInt16BE(0x4000 | pid, 1);
    p[3] = 0x10 | this.nextCc(pid);
    p[4] = 0; // pointer field
    s.copy(p, 5);
    crc.copy(p, 5 + s.length);
    return p;
  }

  private videoPes(s: VideoSample, out: Buffer[]): void {
    const t = this.video!;
    const hevc = t.codec === 'h265';
    const aud = hevc ? H265_AUD : H264_AUD;
    // the track's parameter sets (the samples' own were taken out for fMP4), before every keyframe
    const sets = s.unit.keyframe ? (t.paramSets ?? []) : [];
    let size = aud.length + s.size;
    for (const ps of sets) size += START.length + ps.length;
    const es = Buffer.allocUnsafe(size);
    let at = aud.copy(es, 0);
    for (const ps of sets) {
      at += START.copy(es, at);
      at += ps.copy(es, at);
    }
    s.writeAnnexB(es, at);
    const dts = s.dts % WRAP;
    const pts = (s.dts + s.cto) % WRAP;
    const head = Buffer.allocUnsafe(19);
    head.writeUIntBE(0x000001e0, 0, 4);
    head.writeUInt16BE(0, 4); // unbounded: video PES may exceed 65535 bytes
    head[6] = 0x80;
    head[7] = 0xc0;
    head[8] = 10;
    writeTs(head, 9, 0x3, pts);
    writeTs(head, 14, 0x1, dts);
    this.packetize(VIDEO_PID, [head, es], { pcr: dts, rai: s.unit.keyframe }, out);
  }

  private audioPes(s: AudioSample, out: Buffer[]): void {
    const t = this.audio!;
    const pts = Math.round((s.dts * TS_CLOCK) / t.timescale) % WRAP;
    const len = 7 + s.size;
    const adts = Buffer.allocUnsafe(7);
    const a = t.aac!;
    adts[0] = 0xff;
    adts[1] = 0xf1;
    adts[2] = (((a.objectType - 1) & 3) << 6) | ((a.freqIndex & 0xf) << 2) | ((a.channelConfig >> 2) & 1);
    adts[3] = ((a.channelConfig & 3) << 6) | ((len >> 11) & 3);
    adts[4] = (len >> 3) & 0xff;
    adts[5] = ((len & 7) << 5) | 0x1f;
    adts[6] = 0xfc;
    const head = Buffer.allocUnsafe(14);
    head.writeUIntBE(0x000001c0, 0, 4);
    head.writeUInt16BE(3 + 5 + len, 4);
    head[6] = 0x80;
    head[7] = 0x80;
    head[8] = 5;
    writeTs(head, 9, 0x2, pts);
    const pcr = this.pcrPid === AUDIO_PID ? pts : undefined;
    this.packetize(AUDIO_PID, [head, adts, s.unit.payload], { pcr, rai: this.pcrPid === AUDIO_PID }, out);
  }

  /** a PES as 188-byte packets; the first may carry a PCR and the random access flag, the last is stuffed */
  private packetize(pid: number, parts: Buffer[], o: { pcr?: number; rai: boolean }, out: Buffer[]): void {
    const pes = Buffer.concat(parts);
    let at = 0;
    let first = true;
    while (at < pes.length) {
      const p = Buffer.allocUnsafe(PACKET);
      p[0] = 0x47;
      p.writeUInt16BE((first ? 0x4000 : 0) | pid, 1);
      const withPcr = first && o.pcr !== undefined;
      const afMin = withPcr ? 8 : first && o.rai ? 2 : 0; // adaptation field bytes, its length byte included
      const room = PACKET - 4 - afMin;
      const take = Math.min(room, pes.length - at);
      const af = PACKET - 4 - take; // what the payload leaves: adaptation field (stuffing included)
      p[3] = (af > 0 ? 0x30 : 0x10) | this.nextCc(pid);
      if (af > 0) {
        p[4] = af - 1;
        if (af > 1) {
          p[5] = (withPcr ? 0x10 : 0) | (first && o.rai ? 0x40 : 0);
          let k = 6;
          if (withPcr) {
            const base = o.pcr! % WRAP;
            p.writeUInt32BE(Math.floor(base / 2), 6);
            p[10] = ((base & 1) << 7) | 0x7e;
            p[11] = 0;
            k = 12;
          }
          p.fill(0xff, k, 4 + af);
        }
      }
      pes.copy(p, 4 + af, at, at + take);
      at += take;
      first = false;
      out.push(p);
    }
  }

  private nextCc(pid: number): number {
    const c = this.cc.get(pid) ?? 0;
    this.cc.set(pid, (c + 1) & 0xf);
    return c;
  }
}

/** a 33-bit PES timestamp with its 4-bit prefix and marker bits */
function writeTs(b: Buffer, at: number, prefix: number, ts: number): void {
  const hi = Math.floor(ts / 2 ** 30) & 0x7;
  const mid = Math.floor(ts / 2 ** 15) & 0x7fff;
  const lo = ts & 0x7fff;
  b[at] = (prefix << 4) | (hi << 1) | 1;
  b.writeUInt16BE((mid << 1) | 1, at + 1);
  b.writeUInt16BE((lo << 1) | 1, at + 3);
}
