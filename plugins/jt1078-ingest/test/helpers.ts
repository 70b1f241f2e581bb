/** Shared helpers for the jt1078-ingest tests (not a test file itself). */
import * as fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fixturePath } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import { splitAnnexB } from '../../../plugin-sdk/formats';
import type { AccessUnit, AudioTrackInfo, TrackInfo } from '../../../plugin-sdk';
import { bodyOf, Jt1078Packet, SUB_MARK } from '../src/packet';
import { Jt1078Parser, ParserOptions } from '../src/parser';
import { AudioFraming, Jt1078StreamAssembler, StreamAssemblerOptions } from '../src/stream-assembler';
import { Jt1078Packer, PacketFields, encodePacket } from '../src/packer';
import { prng } from '../../../test/support/prng';
export { prng };

export interface CaptureFacts {
  file: string;
  packets: number;
  sim: string;
  channel: number;
  videoFrames: number;
  audioFrames: number;
  width: number;
  height: number;
  profile: string;
}

/** What the fixtures README (and a byte-level count) says about each capture. */
export const CAPTURES: CaptureFacts[] = [
  {
    file: 'jt1078/glaciall-cif-h264-2013.bin',
    packets: 6063,
    sim: '13800138000',
    channel: 1,
    videoFrames: 4111,
    audioFrames: 0,
    width: 352,
    height: 288,
    profile: 'Main',
  },
  {
    file: 'jt1078/xunilcyl-d1-h264-2013.bin',
    packets: 1634,
    sim: '132570034500',
    channel: 1,
    videoFrames: 631,
    audioFrames: 0,
    width: 704,
    height: 576,
    profile: 'High',
  },
  {
    file: 'jt1078/gojt808-d1-h264-g711a-2013.bin',
    packets: 540,
    sim: '156987000796',
    channel: 1,
    videoFrames: 102,
    audioFrames: 214,
    width: 720,
    height: 576,
    profile: 'High',
  },
  {
    file: 'jt1078/smallchi-cif-h264-2013.bin',
    packets: 1478,
    sim: '1901305037',
    channel: 3,
    videoFrames: 931,
    audioFrames: 0,
    width: 352,
    height: 288,
    profile: 'Main',
  },
];

const cache = new Map<string, Buffer>();
export function readCapture(file: string): Buffer {
  let b = cache.get(file);
  if (!b) {
    b = fs.readFileSync(fixturePath(file));
    cache.set(file, b);
  }
  return b;
}

export function parseAll(data: Buffer, opts?: ParserOptions): { packets: Jt1078Packet[]; parser: Jt1078Parser } {
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p), opts);
  parser.push(data);
  parser.end();
  return { packets, parser };
}

export function capturePackets(file: string): Jt1078Packet[] {
  return parseAll(readCapture(file)).packets;
}

/** The fields of a packet, for re-encoding it (optionally changed). */
export function fieldsOf(p: Jt1078Packet, change: Partial<PacketFields> = {}): PacketFields {
  return {
    layout: p.layout,
    sim: p.sim,
    channel: p.channel,
    pt: p.pt,
    marker: p.marker,
    seq: p.seq,
    dataType: p.dataType,
    subMark: p.subMark,
    timestamp: p.timestamp,
    lastIFrameInterval: p.lastIFrameInterval,
    lastFrameInterval: p.lastFrameInterval,
    ...change,
  };
}

export function reencode(p: Jt1078Packet, change: Partial<PacketFields> = {}): Buffer {
  return encodePacket(fieldsOf(p, change), p.body);
}

/** A comparable summary of a packet (body as hex is too slow for thousands; a checksum does). */
export function packetKey(p: Jt1078Packet): string {
  return `${p.layout}/${p.sim}/${p.channel}/${p.pt}/${p.marker ? 1 : 0}/${p.seq}/${p.dataType}/${p.subMark}/${p.timestamp}/${bodyOf(p).length}/${checksum(bodyOf(p))}`;
}

export function checksum(b: Buffer): number {
  let h = 2166136261;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 16777619);
  return h >>> 0;
}

export class Collector {
  tracks: TrackInfo[] = [];
  units: AccessUnit[] = [];
  framings: AudioFraming[] = [];
  onTrack(info: TrackInfo): void {
    this.tracks.push(info);
  }
  onAudioFraming(f: AudioFraming): void {
    this.framings.push(f);
  }
  onAccessUnit(au: AccessUnit): void {
    this.units.push(au);
  }
  video(): AccessUnit[] {
    return this.units.filter((u) => u.kind === 'video');
  }
  audio(): AccessUnit[] {
    return this.units.filter((u) => u.kind === 'audio');
  }
}

/** Packets -> assembler, collecting tracks and access units. */
export function assemble(packets: Jt1078Packet[], opts?: StreamAssemblerOptions): { out: Collector; asm: Jt1078StreamAssembler } {
  const out = new Collector();
  const asm = new Jt1078StreamAssembler(out, opts);
  for (const p of packets) asm.push(p);
  asm.flush();
  return { out, asm };
}

export interface ProbeResult {
  codec: string;
  width: number;
  height: number;
  profile: string;
  level: number;
  frames: number;
}

/** ffprobe as the independent decoder: decodes every frame of a raw Annex-B file. */
export function ffprobeRaw(file: string, format: 'h264' | 'hevc'): ProbeResult {
  const ffprobe = requireTool('ffprobe', 'ffmpeg');
  const r = spawnSync(
    ffprobe,
    [
      '-v',
      'error',
      '-f',
      format,
      '-count_frames',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=codec_name,width,height,profile,level,nb_read_frames',
      '-of',
      'json',
      file,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`ffprobe failed on ${file}: ${r.stderr}`);
  const s = JSON.parse(r.stdout).streams[0];
  return { codec: s.codec_name, width: s.width, height: s.height, profile: s.profile, level: s.level, frames: Number(s.nb_read_frames) };
}

/** Rebuilds frames of packets (by marks), so tests can edit payloads and re-pack them. */
export function framesOf(packets: Jt1078Packet[]): Array<{ first: Jt1078Packet; payload: Buffer }> {
  const out: Array<{ first: Jt1078Packet; payload: Buffer }> = [];
  const open: Record<number, Jt1078Packet[]> = {};
  for (const p of packets) {
    const k = p.dataType === 3 ? 1 : 0;
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.FIRST) open[k] = [];
    open[k].push(p);
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.LAST) {
      out.push({ first: open[k][0], payload: Buffer.concat(open[k].map((x) => x.body)) });
    }
  }
  return out;
}

export function parsePackets(bufs: Buffer[]): Jt1078Packet[] {
  const out: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => out.push(p));
  for (const b of bufs) parser.push(b);
  parser.end();
  return out;
}

/** smallchi's frames as a terminal that sends parameter sets on its first key frame only, with 3-byte start codes */
export function sparseParameterSets(): { packets: Jt1078Packet[]; wire: Buffer[] } {
  const packets = capturePackets('jt1078/smallchi-cif-h264-2013.bin');
  const frames = framesOf(packets);
  let keyframes = 0;
  const packer = new Jt1078Packer({ layout: '2013', sim: '1901305037', channel: 3 });
  const wire: Buffer[] = [];
  for (const f of frames) {
    let nals = splitAnnexB(f.payload);
    if (f.first.dataType === 0 && keyframes++ > 0) nals = nals.filter((n) => (n[0] & 0x1f) === 5);
    // 3-byte start codes everywhere
    const payload = Buffer.concat(nals.flatMap((n) => [Buffer.from([0, 0, 1]), n]));
    wire.push(...packer.packFrame({ dataType: f.first.dataType, pt: f.first.pt, timestamp: f.first.timestamp, payload }));
  }
  return { packets, wire };
}

export interface AudioFrameIn {
  pt: number;
  /** device ms */
  ts: number;
  payload: Buffer;
}

/** Audio frames as a terminal would push them (JT/T 1078 packets, parsed back), through the assembler. */
export function pushAudio(frames: AudioFrameIn[], opts?: StreamAssemblerOptions) {
  const packer = new Jt1078Packer({ layout: '2013', sim: '13800138000', channel: 1 });
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p));
  for (const f of frames) for (const b of packer.packFrame({ dataType: 3, pt: f.pt, timestamp: f.ts, payload: f.payload })) parser.push(b);
  parser.end();
  return assemble(packets, opts);
}

export function audioTracks(tracks: ReadonlyArray<{ kind: string }>): AudioTrackInfo[] {
  return tracks.filter((t): t is AudioTrackInfo => t.kind === 'audio');
}
