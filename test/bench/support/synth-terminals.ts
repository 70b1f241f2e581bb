/**
 * Many simulated JT/T 1078 terminals from one process, cheaply: a capture's frames are re-packed once into
 * packet templates (padded with H.264 filler data to reach a target bitrate, optionally with G.711A speech
 * added), and each send copies one frame's template and patches SIM, sequence numbers and timestamps in place,
 * then writes it with a single socket write. One timer paces every terminal.
 */
import type { Socket as UdpSocket } from 'node:dgram';
import * as fs from 'node:fs';
import { G711Encoder, G726Decoder } from '../../../plugin-sdk/codecs';
import { loadCapture } from '../../../plugins/jt1078-ingest/tools/simulator';
import { DATA_TYPE, SUB_MARK, headerLength } from '../../../plugins/jt1078-ingest/src/packet';
import { Jt1078Packer, encodeSim } from '../../../plugins/jt1078-ingest/src/packer';
import { PT } from '../../../plugins/jt1078-ingest/src/payload-types';
import { WireScratch } from '../../../plugin-sdk/wire-scratch';

/** 2013 layout offsets inside a packet header (the templates are always 2013) */
const SEQ_AT = 6;
const SIM_AT = 8;
const TS_AT = 16;

export interface FrameTemplate {
  /** every packet of the frame, back to back; SIM, sequence numbers and timestamps are patched per send */
  buf: Buffer;
  /** where each packet starts in buf */
  packets: Uint32Array;
  /** media time of the frame from the start of the stream (first pass), ms */
  t: number;
  video: boolean;
  key: boolean;
}

export interface SynthStream {
  frames: FrameTemplate[];
  /** added to t on each pass over the frames, so timestamps keep rising */
  loopMs: number;
  /** bytes per second of the packets (headers included), as sent */
  bytesPerSecond: number;
  /** bytes per second of the capture's frames before padding */
  captureBytesPerSecond: number;
  /** how much video frames were enlarged (1 = not padded) */
  padFactor: number;
  packetsPerSecond: number;
  framesPerSecond: number;
  /** indexes of the I frames (of every frame in an audio-only stream): where a terminal may start */
  keyframes: number[];
  /** where the audio comes from: none, the capture's own, or G.711A speech added here */
  audio: 'none' | 'capture' | 'synthetic';
  /** audio frames per second and their payload bytes per second (0 without audio) */
  audioFramesPerSecond: number;
  audioPayloadBytesPerSecond: number;
}

/** G.711A speech added to a stream (synthesise) or making one (synthAudioStream). */
export interface SynthAudio {
  /** 8 kHz mono speech, looped as needed */
  pcm: Int16Array;
  /** ms of audio per frame (one packet each): terminals send 20 or 40 */
  frameMs: number;
}

/**
 * 8 kHz speech, 16-bit: the G.726 fixture (81 s of speech at 32 kbit/s, ffmpeg's `g726` bit packing) decoded by
 * the project's own decoder, so no ffmpeg is needed to make the load. Real speech rather than a tone: the AAC
 * encoder's cost depends on what it encodes.
 */
export function speechPcm(file: string): Int16Array {
  const coded = fs.readFileSync(file);
  const dec = new G726Decoder({ bitsPerSample: 4, packing: 'left' });
  const out = new Int16Array(dec.samplesIn(coded.length));
  dec.decodeInto(coded, out, 0);
  return out;
}

/** G.711A payload of `samples` samples of `pcm` from `from` (wrapping around its end). */
function alawChunk(enc: G711Encoder, pcm: Int16Array, from: number, samples: number): Buffer {
  const chunk = new Int16Array(samples);
  for (let i = 0; i < samples; i++) chunk[i] = pcm[(from + i) % pcm.length];
  return enc.encode(chunk);
}

function checkAudio(a: SynthAudio): number {
  const samples = (a.frameMs * 8000) / 1000;
  if (!Number.isInteger(samples) || samples < 8 || samples > 8000) throw new RangeError(`audio frame of ${a.frameMs} ms: need whole samples, 1-1000 ms`);
  if (a.pcm.length < samples) throw new RangeError('speech shorter than one frame');
  return samples;
}

interface RawFrame {
  dataType: number;
  pt: number;
  t: number;
  payload: Buffer;
}

/** Reassembles a capture's packets into frames with monotonic media times (pacing steps capped at 1 s). */
function captureFrames(file: string): RawFrame[] {
  const cap = loadCapture(file);
  const frames: RawFrame[] = [];
  let parts: Buffer[] = [];
  let first = -1;
  for (let i = 0; i < cap.packets.length; i++) {
    const p = cap.packets[i];
    if (p.dataType === DATA_TYPE.TRANSPARENT) continue;
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.FIRST) {
      parts = [p.body];
      first = i;
    } else if (first >= 0 && cap.packets[first].dataType === p.dataType) {
      parts.push(p.body);
    } else {
      first = -1; // a middle or last part without its first: skip the frame
      continue;
    }
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.LAST) {
      const f = cap.packets[first];
      frames.push({ dataType: f.dataType, pt: f.pt, t: cap.offsets[first], payload: Buffer.concat(parts) });
      first = -1;
    }
  }
  return frames;
}

/** An H.264 filler-data NAL unit (type 12) of exactly n bytes, start code included (n >= 6). */
function fillerNal(n: number): Buffer {
  const b = Buffer.alloc(n, 0xff);
  b.writeUInt32BE(1, 0);
  b[4] = 0x0c;
  b[n - 1] = 0x80; // rbsp stop bit
  return b;
}

/**
 * Frame templates for a capture at `mbps` per terminal. Video frames are padded in proportion to their size
 * (I frames stay larger than P frames); a capture already above the target is used as it is. With `audio`, a
 * capture without audio gets G.711A speech (PT 6, one packet per frame) on a grid of frameMs from its first I frame,
 * counted in the target rate (the video is padded a little less); a capture with audio keeps its own.
 */
export function synthesise(file: string, mbps: number, maxBody = 950, audio?: SynthAudio): SynthStream {
  const raw = captureFrames(file);
  const hasAudio = raw.some((f) => f.dataType === DATA_TYPE.AUDIO);
  const addAudio = audio !== undefined && !hasAudio;
  const frameSamples = audio ? checkAudio(audio) : 0;
  const firstKey = raw.findIndex((f) => f.dataType === DATA_TYPE.VIDEO_I);
  if (firstKey < 0) throw new Error(`capture '${file}' holds no I frame`);
  const frames = raw.slice(firstKey);
  const t0 = frames[0].t;
  // media time from the first I frame, strictly rising per kind so the gateway never has to clamp it
  const last = { video: -1, audio: -1 };
  for (const f of frames) {
    const kind = f.dataType === DATA_TYPE.AUDIO ? 'audio' : 'video';
    let t = f.t - t0;
    if (t <= last[kind]) t = last[kind] + 1;
    last[kind] = t;
    f.t = t;
  }
  const videoTimes = frames.filter((f) => f.dataType !== DATA_TYPE.AUDIO).map((f) => f.t);
  const step = videoTimes.length > 1 ? Math.max(1, Math.round(videoTimes[videoTimes.length - 1] / (videoTimes.length - 1))) : 40;
  let loopMs = Math.max(last.video, last.audio) + step;
  if (addAudio) {
    // a whole number of audio frames per pass: the next pass's first frame then follows the last one back to back
    // (an overlap would look like time going back and restart the stream's AAC encoder every pass)
    loopMs = Math.ceil(loopMs / audio.frameMs) * audio.frameMs;
    const enc = new G711Encoder('alaw');
    const added: RawFrame[] = [];
    for (let k = 0; k * audio.frameMs < loopMs; k++) {
      added.push({ dataType: DATA_TYPE.AUDIO, pt: PT.G711A, t: k * audio.frameMs, payload: alawChunk(enc, audio.pcm, k * frameSamples, frameSamples) });
    }
    // by time; at equal times the video frame first (a stable sort keeps the order given)
    const merged = [...frames, ...added].sort((a, b) => a.t - b.t);
    frames.length = 0;
    frames.push(...merged);
  }
  const seconds = loopMs / 1000;

  const videoBytes = frames.reduce((s, f) => s + (f.dataType === DATA_TYPE.AUDIO ? 0 : f.payload.length), 0);
  const audioBytes = frames.reduce((s, f) => s + (f.dataType === DATA_TYPE.AUDIO ? f.payload.length : 0), 0);
  const capturePayloadBps = (videoBytes + audioBytes) / seconds;
  // audio goes on the wire as it is, headers (26 bytes a packet) included; video headers are about 30 bytes per
  // 950-byte packet: aim its payload a little lower so the wire rate hits the target
  const audioWire = frames.reduce(
    (s, f) =>
      s + (f.dataType === DATA_TYPE.AUDIO ? f.payload.length + Math.max(1, Math.ceil(f.payload.length / maxBody)) * headerLength('2013', DATA_TYPE.AUDIO) : 0),
    0,
  );
  const wantVideoPayloadBps = ((mbps * 1e6) / 8 - audioWire / seconds) * (maxBody / (maxBody + 30));
  const padFactor = Math.max(1, wantVideoPayloadBps / (videoBytes / seconds));

  const packer = new Jt1078Packer({ layout: '2013', sim: '0', channel: 1, maxBodySize: maxBody });
  const out: FrameTemplate[] = [];
  let wireBytes = 0;
  let packetCount = 0;
  for (const f of frames) {
    let payload = f.payload;
    if (f.dataType !== DATA_TYPE.AUDIO && padFactor > 1) {
      const extra = Math.round(payload.length * (padFactor - 1));
      if (extra >= 6) payload = Buffer.concat([payload, fillerNal(extra)]);
    }
    const pkts = packer.packFrame({ dataType: f.dataType, pt: f.pt, timestamp: 0, payload });
    const offsets = new Uint32Array(pkts.length);
    let at = 0;
    for (let i = 0; i < pkts.length; i++) {
      offsets[i] = at;
      at += pkts[i].length;
    }
    out.push({ buf: Buffer.concat(pkts, at), packets: offsets, t: f.t, video: f.dataType !== DATA_TYPE.AUDIO, key: f.dataType === DATA_TYPE.VIDEO_I });
    wireBytes += at;
    packetCount += pkts.length;
  }
  return {
    frames: out,
    loopMs,
    padFactor,
    bytesPerSecond: wireBytes / seconds,
    captureBytesPerSecond: capturePayloadBps,
    packetsPerSecond: packetCount / seconds,
    framesPerSecond: out.length / seconds,
    keyframes: out.flatMap((f, i) => (f.key ? [i] : [])),
    audio: addAudio ? 'synthetic' : hasAudio ? 'capture' : 'none',
    audioFramesPerSecond: frames.filter((f) => f.dataType === DATA_TYPE.AUDIO).length / seconds,
    audioPayloadBytesPerSecond: audioBytes / seconds,
  };
}

/**
 * An audio-only stream: `audio.pcm` as G.711A frames of frameMs, one packet each, once through (terminals start at
 * different frames, so they do not all say the same thing at once). What a terminal sends for a listen request.
 */
export function synthAudioStream(audio: SynthAudio, maxBody = 950): SynthStream {
  const samples = checkAudio(audio);
  const n = Math.floor(audio.pcm.length / samples);
  const enc = new G711Encoder('alaw');
  const packer = new Jt1078Packer({ layout: '2013', sim: '0', channel: 1, maxBodySize: maxBody });
  const frames: FrameTemplate[] = [];
  let wire = 0;
  let packets = 0;
  for (let k = 0; k < n; k++) {
    const pkts = packer.packFrame({ dataType: DATA_TYPE.AUDIO, pt: PT.G711A, timestamp: 0, payload: alawChunk(enc, audio.pcm, k * samples, samples) });
    const offsets = new Uint32Array(pkts.length);
    let at = 0;
    for (let i = 0; i < pkts.length; i++) {
      offsets[i] = at;
      at += pkts[i].length;
    }
    frames.push({ buf: Buffer.concat(pkts, at), packets: offsets, t: k * audio.frameMs, video: false, key: false });
    wire += at;
    packets += pkts.length;
  }
  const seconds = (n * audio.frameMs) / 1000;
  return {
    frames,
    loopMs: n * audio.frameMs,
    padFactor: 1,
    bytesPerSecond: wire / seconds,
    captureBytesPerSecond: (n * samples) / seconds,
    packetsPerSecond: packets / seconds,
    framesPerSecond: n / seconds,
    keyframes: frames.map((_f, i) => i),
    audio: 'synthetic',
    audioFramesPerSecond: n / seconds,
    audioPayloadBytesPerSecond: (n * samples) / seconds,
  };
}

/**
 * Where every terminal lays out the frame it sends, as flv-out does for its players: a write the kernel takes whole
 * leaves nothing referring to it. A new Buffer per frame (~5 KB, 10,000 a second at 450 terminals) was external
 * memory that drove this process into frequent mark-compacts, stopping its loop (see connectTcp's SHARED_READ).
 */
const scratch = new WireScratch();

/** How many recent video frames a terminal remembers for matching players' tags to send times. */
export const SENT_RING = 512;

/** where a terminal's packets go: a TCP socket (a frame in one write), or a UDP link (a datagram per packet) */
export interface TerminalLink {
  readonly destroyed: boolean;
  readonly writableLength: number;
  write(buf: Uint8Array): unknown;
  destroy(): unknown;
  /** each packet of `buf` (starting at `packets[i]`) on its own; `buf` is the link's until sent */
  writePackets?(buf: Buffer, packets: Uint32Array): void;
}

/**
 * A terminal pushing over UDP: one connected datagram socket, a datagram per JT/T 1078 packet, as a terminal told to
 * use UDP does. Its backlog is libuv's send queue.
 */
export class UdpTerminalLink implements TerminalLink {
  destroyed = false;
  constructor(private readonly sock: UdpSocket) {
    sock.on('error', () => undefined);
  }

  get writableLength(): number {
    return this.destroyed ? 0 : this.sock.getSendQueueSize();
  }

  write(buf: Uint8Array): boolean {
    if (!this.destroyed) this.sock.send(buf);
    return true;
  }

  writePackets(buf: Buffer, packets: Uint32Array): void {
    if (this.destroyed) return;
    for (let i = 0; i < packets.length; i++) {
      const end = i + 1 < packets.length ? packets[i + 1] : buf.length;
      this.sock.send(buf, packets[i], end - packets[i]);
    }
  }

  destroy(): void {
    if (!this.destroyed) {
      this.destroyed = true;
      this.sock.close();
    }
  }
}

/** One simulated terminal: its socket, its position in the stream and what it sent. */
export class SynthTerminal {
  readonly simBcd: Buffer;
  private seq = 0;
  private index = 0;
  private pass = 0;
  /** performance.now() of media time 0 */
  private origin = 0;
  /** media time of the first frame sent: the gateway's timeline starts there */
  private tStart = 0;
  /** device clock at media time 0 (ms since 2000-01-01, as many terminals send) */
  private readonly deviceBase: number;
  started = false;
  bytes = 0;
  frames = 0;
  /** frames not sent because the socket still held too much unsent data (the gateway is not reading) */
  dropped = 0;
  /** video frames sent: media time (ms from the first frame sent, as the gateway's timeline) and performance.now(), in a ring */
  readonly sentT = new Float64Array(SENT_RING);
  readonly sentAt = new Float64Array(SENT_RING);
  sentCount = 0;
  /** audio frames sent, the same way: media time of the frame's first sample and performance.now() of its write */
  readonly audioT = new Float64Array(SENT_RING);
  readonly audioAt = new Float64Array(SENT_RING);
  audioCount = 0;

  constructor(
    readonly sim: string,
    readonly socket: TerminalLink,
    private readonly stream: SynthStream,
    private readonly maxBacklog: number,
  ) {
    this.simBcd = encodeSim(sim, '2013');
    this.deviceBase = Date.now() - Date.UTC(2000, 0, 1);
  }

  /**
   * Starts the stream at frame `first` (an I frame, so players see a picture at once), due at `at`
   * (performance.now() time). Terminals started at different frames keep the sum of their rates steady.
   */
  start(at: number, first = 0): void {
    if (!(first >= 0 && first < this.stream.frames.length)) throw new RangeError(`no frame ${first}`);
    this.index = first;
    this.tStart = this.stream.frames[first].t;
    this.origin = at - this.tStart;
    this.started = true;
  }

  /** performance.now() time the next frame is due */
  get nextDue(): number {
    return this.origin + this.pass * this.stream.loopMs + this.stream.frames[this.index].t;
  }

  /** Sends every frame due by `now`, at most `limit`; returns how many were due. */
  sendDue(now: number, limit: number): number {
    if (!this.started || this.socket.destroyed) return 0;
    let n = 0;
    while (n < limit && this.nextDue <= now) {
      this.sendNext();
      n++;
    }
    return n;
  }

  private sendNext(): void {
    const s = this.stream;
    const tpl = s.frames[this.index];
    const t = this.pass * s.loopMs + tpl.t;
    if (++this.index === s.frames.length) {
      this.index = 0;
      this.pass++;
    }
    if (this.socket.writableLength > this.maxBacklog) {
      this.dropped++;
      return;
    }
    const n = tpl.buf.length;
    // datagrams hold their bytes until sent: a UDP link gets memory of its own
    const udp = this.socket.writePackets !== undefined;
    const buf = n <= WireScratch.MAX && !udp ? scratch.take(n) : Buffer.allocUnsafe(n);
    tpl.buf.copy(buf);
    const device = this.deviceBase + t;
    const hi = Math.floor(device / 0x100000000);
    const lo = device - hi * 0x100000000;
    const offs = tpl.packets;
    for (let i = 0; i < offs.length; i++) {
      const o = offs[i];
      buf.writeUInt16BE(this.seq, o + SEQ_AT);
      this.seq = (this.seq + 1) & 0xffff;
      this.simBcd.copy(buf, o + SIM_AT);
      buf.writeUInt32BE(hi, o + TS_AT);
      buf.writeUInt32BE(lo, o + TS_AT + 4);
    }
    if (udp) this.socket.writePackets!(buf, offs);
    else {
      this.socket.write(buf);
      // the kernel did not take it all: node holds the view until it does
      if (this.socket.writableLength > 0) scratch.escape();
    }
    this.bytes += buf.length;
    this.frames++;
    if (tpl.video) {
      const k = this.sentCount++ % SENT_RING;
      this.sentT[k] = t - this.tStart;
      this.sentAt[k] = performance.now();
    } else {
      const k = this.audioCount++ % SENT_RING;
      this.audioT[k] = t - this.tStart;
      this.audioAt[k] = performance.now();
    }
  }
}
