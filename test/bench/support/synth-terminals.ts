/**
 * Many simulated JT/T 1078 terminals from one process, cheaply: a capture's frames are re-packed once into
 * packet templates (padded with H.264 filler data to reach a target bitrate), and each send copies one
 * frame's template and patches SIM, sequence numbers and timestamps in place, then writes it with a single
 * socket write. One timer paces every terminal.
 */
import type { Socket } from 'node:net';
import { loadCapture } from '../../../plugins/jt1078-ingest/tools/simulator';
import { DATA_TYPE, SUB_MARK } from '../../../plugins/jt1078-ingest/src/packet';
import { Jt1078Packer, encodeSim } from '../../../plugins/jt1078-ingest/src/packer';

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
  /** indexes of the I frames: where a terminal may start */
  keyframes: number[];
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
 * (I frames stay larger than P frames); a capture already above the target is used as it is.
 */
export function synthesise(file: string, mbps: number, maxBody = 950): SynthStream {
  const raw = captureFrames(file);
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
  const loopMs = Math.max(last.video, last.audio) + step;
  const seconds = loopMs / 1000;

  const videoBytes = frames.reduce((s, f) => s + (f.dataType === DATA_TYPE.AUDIO ? 0 : f.payload.length), 0);
  const audioBytes = frames.reduce((s, f) => s + (f.dataType === DATA_TYPE.AUDIO ? f.payload.length : 0), 0);
  const capturePayloadBps = (videoBytes + audioBytes) / seconds;
  // headers are about 30 bytes per 950-byte packet: aim the payload a little lower so the wire rate hits the target
  const wantPayloadBps = ((mbps * 1e6) / 8) * (maxBody / (maxBody + 30));
  const padFactor = Math.max(1, (wantPayloadBps - audioBytes / seconds) / (videoBytes / seconds));

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
    frames: out, loopMs, padFactor,
    bytesPerSecond: wireBytes / seconds, captureBytesPerSecond: capturePayloadBps,
    packetsPerSecond: packetCount / seconds, framesPerSecond: out.length / seconds,
    keyframes: out.flatMap((f, i) => (f.key ? [i] : [])),
  };
}

/** How many recent video frames a terminal remembers for matching players' tags to send times. */
export const SENT_RING = 512;

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

  constructor(readonly sim: string, readonly socket: Socket, private readonly stream: SynthStream, private readonly maxBacklog: number) {
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
    const buf = Buffer.allocUnsafe(tpl.buf.length);
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
    this.socket.write(buf);
    this.bytes += buf.length;
    this.frames++;
    if (tpl.video) {
      const k = this.sentCount++ % SENT_RING;
      this.sentT[k] = t - this.tStart;
      this.sentAt[k] = performance.now();
    }
  }
}
