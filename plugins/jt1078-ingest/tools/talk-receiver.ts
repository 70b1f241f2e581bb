/**
 * The terminal's side of intercom, for the simulator and tests: reads what the gateway sends down a terminal's push
 * connection, keeps the audio packets (data type 3), joins subpackages into frames, removes a HiSilicon header,
 * decodes each frame by its payload type (G.711A/U, G.726, IMA ADPCM) to 16-bit PCM, optionally into a WAV file,
 * and reports what came (packets, codec, layout, SIM, channel, sequence gaps, seconds of audio).
 */
import * as fs from 'node:fs';
import { createDecoder, type AudioDecoder } from '../../../plugin-sdk/codecs';
import type { AudioTrackInfo, G726Packing } from '../../../plugin-sdk';
import { hasHisiliconHeader, g726BitsFromFrameLength } from '../src/audio';
import { DATA_TYPE, SUB_MARK, type Jt1078Layout, type Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { audioCodecOfPt, g726BitsOfPt, sampleRateOfPt } from '../src/payload-types';

export interface TalkReceiverOptions {
  /** the layout to read (what the terminal expects intercom audio in); default 2013 */
  layout?: Jt1078Layout;
  /** G.726 bits per sample when the payload type does not say (default: from the frame length) */
  g726Bits?: number;
  g726Packing?: G726Packing;
  /** write the decoded audio to this WAV file (16-bit mono) */
  wavFile?: string;
  /** keep the decoded PCM in memory too, up to this many samples (default 0) */
  keepSamples?: number;
}

export interface TalkReport {
  packets: number;
  frames: number;
  /** frames whose codec could not be decoded */
  undecoded: number;
  samples: number;
  seconds: number;
  codec: string | undefined;
  pt: number | undefined;
  sampleRate: number | undefined;
  layout: Jt1078Layout | undefined;
  sim: string | undefined;
  channel: number | undefined;
  hisilicon: boolean;
  /** packets missing by sequence number */
  seqGaps: number;
  firstTimestamp: number | undefined;
  lastTimestamp: number | undefined;
  wavFile: string | undefined;
}

/** the most a frame being joined from subpackages may hold */
const MAX_FRAME_BYTES = 64 * 1024;

export class TalkReceiver {
  private readonly parser: Jt1078Parser;
  private parts: Buffer[] = [];
  private partBytes = 0;
  private decoder: { key: string; dec: AudioDecoder } | undefined;
  private lastSeq = -1;
  private wavFd: number | undefined;
  private wavBytes = 0;
  private kept: Int16Array;
  private keptLen = 0;
  private readonly r: TalkReport;
  /** called with each decoded frame (the array is reused: copy to keep) */
  onFrame: ((pcm: Int16Array, p: Jt1078Packet) => void) | undefined;

  constructor(private readonly opts: TalkReceiverOptions = {}) {
    this.parser = new Jt1078Parser((p) => this.onPacket(p), { layout: opts.layout ?? '2013' });
    this.kept = new Int16Array(opts.keepSamples ?? 0);
    this.r = {
      packets: 0,
      frames: 0,
      undecoded: 0,
      samples: 0,
      seconds: 0,
      codec: undefined,
      pt: undefined,
      sampleRate: undefined,
      layout: undefined,
      sim: undefined,
      channel: undefined,
      hisilicon: false,
      seqGaps: 0,
      firstTimestamp: undefined,
      lastTimestamp: undefined,
      wavFile: opts.wavFile,
    };
    if (opts.wavFile) {
      this.wavFd = fs.openSync(opts.wavFile, 'w');
      fs.writeSync(this.wavFd, wavHeader(0, 8000));
    }
  }

  /** bytes from a TCP connection */
  push(chunk: Buffer): void {
    this.parser.push(chunk);
  }

  /** one UDP datagram */
  pushDatagram(d: Buffer): void {
    this.parser.pushDatagram(d);
  }

  /** the PCM kept so far (keepSamples) */
  get pcm(): Int16Array {
    return this.kept.subarray(0, this.keptLen);
  }

  report(): TalkReport {
    return { ...this.r };
  }

  /** Finishes the WAV file (its sizes) and returns the report. */
  close(): TalkReport {
    this.parser.end();
    if (this.wavFd !== undefined) {
      const fd = this.wavFd;
      this.wavFd = undefined;
      fs.writeSync(fd, wavHeader(this.wavBytes, this.r.sampleRate ?? 8000), 0, 44, 0);
      fs.closeSync(fd);
    }
    return this.report();
  }

  private onPacket(p: Jt1078Packet): void {
    if (p.dataType !== DATA_TYPE.AUDIO) return;
    const r = this.r;
    r.packets++;
    r.layout = p.layout;
    r.sim = p.sim;
    r.channel = p.channel;
    r.firstTimestamp ??= p.timestamp;
    r.lastTimestamp = p.timestamp;
    if (this.lastSeq >= 0) r.seqGaps += (p.seq - this.lastSeq - 1) & 0xffff;
    this.lastSeq = p.seq;
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.FIRST) {
      this.parts = [];
      this.partBytes = 0;
    }
    if (this.partBytes + p.body.length > MAX_FRAME_BYTES) {
      this.parts = [];
      this.partBytes = 0;
      return;
    }
    this.parts.push(p.body);
    this.partBytes += p.body.length;
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.LAST) {
      const frame = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
      this.parts = [];
      this.partBytes = 0;
      this.onFrameBytes(frame, p);
    }
  }

  private onFrameBytes(raw: Buffer, p: Jt1078Packet): void {
    const r = this.r;
    r.frames++;
    const hisilicon = hasHisiliconHeader(raw);
    if (hisilicon) r.hisilicon = true;
    const frame = hisilicon ? raw.subarray(4) : raw;
    const codec = audioCodecOfPt(p.pt);
    r.codec = codec;
    r.pt = p.pt;
    const rate = sampleRateOfPt(p.pt) ?? 8000;
    const bits = codec === 'g726' ? (g726BitsOfPt(p.pt) ?? this.opts.g726Bits ?? g726BitsFromFrameLength(frame.length)) : undefined;
    const key = `${p.pt}/${bits}`;
    if (this.decoder?.key !== key) {
      const track: AudioTrackInfo = { kind: 'audio', codec, sampleRate: rate, channels: 1, bitsPerSample: bits, packing: this.opts.g726Packing };
      const dec = createDecoder(track);
      this.decoder = dec ? { key, dec } : undefined;
    }
    if (!this.decoder) {
      r.undecoded++;
      return;
    }
    const pcm = this.decoder.dec.decode(frame);
    r.sampleRate = this.decoder.dec.sampleRate;
    r.samples += pcm.length;
    r.seconds = r.samples / r.sampleRate;
    if (this.keptLen < this.kept.length) {
      const n = Math.min(pcm.length, this.kept.length - this.keptLen);
      this.kept.set(pcm.subarray(0, n), this.keptLen);
      this.keptLen += n;
    }
    if (this.wavFd !== undefined) {
      const b = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
      fs.writeSync(this.wavFd, b);
      this.wavBytes += b.length;
    }
    this.onFrame?.(pcm, p);
  }
}

/** A 44-byte WAV header for 16-bit mono PCM (little-endian hosts: Int16Array bytes are what WAV wants). */
export function wavHeader(dataBytes: number, sampleRate: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** One line for a person: what the terminal heard. */
export function describeTalk(r: TalkReport): string {
  if (r.packets === 0) return 'talk: no intercom audio received';
  return (
    `talk: ${r.packets} audio packets, ${r.frames} frames (${r.codec}, PT ${r.pt}${r.hisilicon ? ', HiSilicon header' : ''}, ${r.layout} layout, ` +
    `SIM ${r.sim} channel ${r.channel}), ${r.seconds.toFixed(2)} s decoded, ${r.seqGaps} missing by sequence` +
    (r.undecoded > 0 ? `, ${r.undecoded} frames not decodable` : '') +
    (r.wavFile ? `, written to ${r.wavFile}` : '')
  );
}
