/**
 * RTSP/TCP readers for the rtsp benchmark: what an NVR or ffmpeg `-rtsp_transport tcp` does, without decoding. Each
 * reader holds one TCP connection to rtsp-out: OPTIONS, DESCRIBE (the SDP's tracks and their absolute controls),
 * SETUP of every track with `RTP/AVP/TCP;unicast;interleaved=2k-(2k+1)`, PLAY of the aggregate URL (Content-Base),
 * then reads `$`-framed RTP and RTCP off the same connection for the rest of the run.
 *
 * Every packet is checked and counted: RTP version 2, the channel's payload type, one SSRC per channel, sequence
 * numbers consecutive (a gap counts the packets lost: over TCP only the gateway's skip of a slow reader makes one),
 * the first packet of each track equal to PLAY's RTP-Info seq. Per reader: RTP packets and bytes, video frames (the
 * marker bit ends an access unit), RTCP sender reports, and stalls (no RTP for RTSP_STALL_MS in the window).
 *
 * End to end: a video frame's RTP timestamp is its presentation time at 90 kHz plus the stream's random offset. The
 * offset is found once per reader by matching the timestamps of its first frames against the media times its
 * terminal sent (their spacing is the capture's irregular one, so the match is unique or refused), after which each
 * frame's latency is terminal write -> last packet of the frame read, as the FLV players measure it.
 */
import * as net from 'node:net';
import { Reservoir, f1, f2 } from './gateway-harness';
import { quantile } from './process-probe';
import { SENT_RING, type SynthStream, type SynthTerminal } from './synth-terminals';
import type { ReaderFleet, ReaderFigures } from '../ingest-flv';

/** a reader that gets no RTP for this long in the window counts a stall (a frame comes every ~42 ms) */
export const RTSP_STALL_MS = 1000;
const REQUEST_TIMEOUT_MS = 30_000;
const MAX_HEAD = 16 * 1024;
const MAX_BODY = 64 * 1024;
/** frames of timestamps collected before matching against the terminal's sends (more if none matched) */
const ALIGN_FRAMES = [48, 96, 144];
/**
 * frames used for the match are those read this long after the first RTP: PLAY's burst (the GOP cache, up to a GOP
 * of old frames read at once) is over, so the frames are live and the latest causal run is the true one
 */
const ALIGN_AFTER_MS = 3000;

// ------------------------------------------------------------------------------------------------------------
// the connection's bytes: RTSP responses and $-framed packets, however TCP cuts them

export interface RtspResponse {
  status: number;
  reason: string;
  /** header names lower-cased */
  headers: Map<string, string>;
  body: string;
}

export interface InterleavedSink {
  onResponse(r: RtspResponse): void;
  /**
   * One interleaved frame: its channel and length; `buf` holds its first min(length, FRAME_HEAD) bytes contiguous at `off`
   * (a view of the socket chunk, or a scratch copy when the header was split; valid only during the call).
   */
  onFrame(channel: number, length: number, buf: Buffer, off: number): void;
  /** a server request (e.g. a server-sent OPTIONS or ANNOUNCE) is not expected here: reported, then skipped */
  onRequest?(line: string): void;
}

/** bytes of each interleaved frame handed over: a 12-byte RTP header and the payload's first two (NAL and FU headers) */
export const FRAME_HEAD = 14;

const enum Ds {
  Start,
  FrameHeader,
  FrameBody,
  Head,
  Body,
}

/**
 * Splits what an RTSP server sends on an interleaved connection: responses (status line, headers, a Content-Length
 * body) and `$` channel length(16) frames. The frame's first FRAME_HEAD bytes (an RTP header and the first two
 * payload bytes, or an RTCP header) are handed over without copying when they sit in one chunk. After an error (a byte that starts neither, a header block over 16 KiB)
 * further input is ignored.
 */
export class InterleavedReader {
  error: string | undefined;
  private state = Ds.Start;
  private hdr = Buffer.alloc(4);
  private hdrFill = 0;
  private channel = 0;
  private length = 0;
  private left = 0;
  /** the frame's first bytes when they came split */
  private readonly scratch = Buffer.alloc(FRAME_HEAD);
  private scratchFill = 0;
  private headBuf: Buffer | undefined;
  private pendingHead: { status: number; reason: string; headers: Map<string, string>; request?: string } | undefined;
  private bodyParts: Buffer[] = [];

  constructor(private readonly sink: InterleavedSink) {}

  push(chunk: Buffer): void {
    let off = 0;
    const end = chunk.length;
    while (off < end && this.error === undefined) {
      switch (this.state) {
        case Ds.Start: {
          const c = chunk[off];
          if (c === 0x24) {
            this.state = Ds.FrameHeader;
            this.hdrFill = 0;
          } else if (c === 0x52 /* R */ || (c >= 0x41 && c <= 0x5a)) {
            this.state = Ds.Head;
          } else {
            this.error = `unexpected byte 0x${c.toString(16)} where a response or an interleaved frame should start`;
          }
          break;
        }
        case Ds.FrameHeader: {
          // fast path: the whole 4-byte header in this chunk
          if (this.hdrFill === 0 && off + 4 <= end) {
            this.channel = chunk[off + 1];
            this.length = chunk.readUInt16BE(off + 2);
            off += 4;
          } else {
            while (this.hdrFill < 4 && off < end) this.hdr[this.hdrFill++] = chunk[off++];
            if (this.hdrFill < 4) break;
            this.channel = this.hdr[1];
            this.length = this.hdr.readUInt16BE(2);
          }
          this.left = this.length;
          this.scratchFill = 0;
          if (this.length === 0) {
            this.sink.onFrame(this.channel, 0, this.scratch, 0);
            this.state = Ds.Start;
            break;
          }
          const want = Math.min(FRAME_HEAD, this.length);
          if (off + want <= end) {
            this.sink.onFrame(this.channel, this.length, chunk, off);
            this.scratchFill = want; // handed over
          }
          this.state = Ds.FrameBody;
          break;
        }
        case Ds.FrameBody: {
          const want = Math.min(FRAME_HEAD, this.length);
          if (this.scratchFill < want) {
            const n = Math.min(want - this.scratchFill, end - off);
            chunk.copy(this.scratch, this.scratchFill, off, off + n);
            this.scratchFill += n;
            if (this.scratchFill === want) this.sink.onFrame(this.channel, this.length, this.scratch, 0);
          }
          const n = Math.min(this.left, end - off);
          off += n;
          this.left -= n;
          if (this.left === 0) this.state = Ds.Start;
          break;
        }
        case Ds.Head: {
          const part = chunk.subarray(off);
          const had = this.headBuf?.length ?? 0;
          const joined = this.headBuf ? Buffer.concat([this.headBuf, part]) : part;
          const e = joined.indexOf('\r\n\r\n');
          if (e < 0) {
            if (joined.length > MAX_HEAD) this.error = 'RTSP header block too long';
            this.headBuf = joined;
            off = end;
            break;
          }
          off += e + 4 - had;
          this.headBuf = undefined;
          const lines = joined.toString('latin1', 0, e).split('\r\n');
          const headers = new Map<string, string>();
          for (let i = 1; i < lines.length; i++) {
            const c = lines[i].indexOf(':');
            if (c > 0) headers.set(lines[i].slice(0, c).trim().toLowerCase(), lines[i].slice(c + 1).trim());
          }
          const m = /^RTSP\/1\.0 (\d{3}) ?(.*)$/.exec(lines[0]);
          this.pendingHead = m ? { status: Number(m[1]), reason: m[2], headers } : { status: 0, reason: '', headers, request: lines[0] };
          const len = Number(headers.get('content-length') ?? 0);
          if (!Number.isInteger(len) || len < 0 || len > MAX_BODY) {
            this.error = `bad Content-Length '${headers.get('content-length')}'`;
            break;
          }
          this.left = len;
          this.bodyParts = [];
          if (len === 0) this.finishMessage();
          else this.state = Ds.Body;
          break;
        }
        case Ds.Body: {
          const n = Math.min(this.left, end - off);
          this.bodyParts.push(chunk.subarray(off, off + n));
          off += n;
          this.left -= n;
          if (this.left === 0) this.finishMessage();
          break;
        }
      }
    }
  }

  private finishMessage(): void {
    const h = this.pendingHead!;
    this.pendingHead = undefined;
    this.state = Ds.Start;
    const body = Buffer.concat(this.bodyParts).toString('utf8');
    this.bodyParts = [];
    if (h.request !== undefined) this.sink.onRequest?.(h.request);
    else this.sink.onResponse({ status: h.status, reason: h.reason, headers: h.headers, body });
  }
}

// ------------------------------------------------------------------------------------------------------------
// SDP, RTP-Info, RTP headers

export interface SdpTrack {
  media: string;
  payloadType: number;
  /** the track's control URL, resolved against the base */
  control: string;
  /** e.g. 'H264/90000' */
  rtpmap: string | undefined;
}

/** The SDP's media sections with their controls resolved against `base` (Content-Base, else the request URL). */
export function parseSdp(sdp: string, base: string): SdpTrack[] {
  const out: SdpTrack[] = [];
  let cur: SdpTrack | undefined;
  for (const raw of sdp.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.startsWith('m=')) {
      const [media, , , pt] = line.slice(2).split(/\s+/);
      cur = { media, payloadType: Number(pt), control: base, rtpmap: undefined };
      out.push(cur);
    } else if (cur && line.startsWith('a=control:')) {
      cur.control = resolveControl(base, line.slice('a=control:'.length));
    } else if (cur && line.startsWith('a=rtpmap:')) {
      const m = /^a=rtpmap:(\d+)\s+(\S+)/.exec(line);
      if (m && Number(m[1]) === cur.payloadType) cur.rtpmap = m[2];
    }
  }
  return out;
}

/** RFC 2326 C.1.1: an absolute control as is, `*` the base, else relative to the base (appended after a slash) */
export function resolveControl(base: string, control: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(control)) return control;
  if (control === '*') return base;
  return base.endsWith('/') ? base + control : `${base}/${control}`;
}

/** RTP-Info: `url=...;seq=N;rtptime=T` per track, comma separated (URLs may hold commas only percent-encoded) */
export function parseRtpInfo(value: string): Array<{ url: string; seq?: number; rtptime?: number }> {
  return value.split(',').map((entry) => {
    const o: { url: string; seq?: number; rtptime?: number } = { url: '' };
    for (const kv of entry.split(';')) {
      const eq = kv.indexOf('=');
      if (eq < 0) continue;
      const k = kv.slice(0, eq).trim().toLowerCase();
      const v = kv.slice(eq + 1).trim();
      if (k === 'url') o.url = v;
      else if (k === 'seq') o.seq = Number(v);
      else if (k === 'rtptime') o.rtptime = Number(v);
    }
    return o;
  });
}

/** Per-channel RTP sequence check: packets, lost (by gaps), out of order, SSRC changes. */
export class RtpSequence {
  packets = 0;
  lost = 0;
  /** packets whose sequence number went back (duplicates or reordering: TCP should have none) */
  backwards = 0;
  ssrcChanges = 0;
  private lastSeq = -1;
  private ssrc = -1;

  /** feeds one packet; returns the number of packets missing just before it */
  add(seq: number, ssrc: number): number {
    this.packets++;
    if (this.ssrc !== -1 && ssrc !== this.ssrc) {
      this.ssrcChanges++;
      this.lastSeq = -1;
    }
    this.ssrc = ssrc;
    if (this.lastSeq < 0) {
      this.lastSeq = seq;
      return 0;
    }
    const d = (seq - this.lastSeq) & 0xffff;
    if (d === 0 || d > 0x8000) {
      this.backwards++;
      return 0;
    }
    this.lastSeq = seq;
    this.lost += d - 1;
    return d - 1;
  }
}

/** a video frame as read: its RTP timestamp, whether it held an IDR slice, when its last packet was read */
export interface ReadFrame {
  ts: number;
  key: boolean;
  at: number;
}

/** the frames a terminal sent, oldest first: media time (ms), I frame or not, when written (same clock as ReadFrame.at) */
export interface SentFrames {
  t: ArrayLike<number>;
  key: ArrayLike<boolean>;
  at: ArrayLike<number>;
}

/**
 * The RTP timestamp offset of a video stream: rtp = offset + 90 * media time (mod 2^32). `frames` are consecutive
 * video frames as read (each once, in order). A run of consecutive sends matches when every spacing agrees (within
 * half a millisecond), the I frames fall on the same frames, and no frame was read before it was written. The
 * capture's spacing has long regular stretches (40 ms), so spacing alone matches many runs; the I frames (every ~2 s)
 * rule out all shifts but whole GOPs, and of what is left the latest run wins: an earlier one means a GOP more of
 * latency. Returns undefined when no run matches or the frames hold no I frame.
 */
export function alignRtp(frames: ReadFrame[], sent: SentFrames, clock = 90): number | undefined {
  const n = frames.length;
  if (n < 2 || !frames.some((f) => f.key)) return undefined;
  const tol = clock / 2;
  let found: number | undefined;
  for (let j = 0; j + n <= sent.t.length; j++) {
    let ok = true;
    for (let i = 0; i < n && ok; i++) {
      if (sent.key[j + i] !== frames[i].key || sent.at[j + i] > frames[i].at) ok = false;
      else if (i > 0 && Math.abs(((frames[i].ts - frames[0].ts) >>> 0) - (sent.t[j + i] - sent.t[j]) * clock) > tol) ok = false;
    }
    if (ok) found = (frames[0].ts - Math.round(sent.t[j] * clock)) >>> 0; // (the latest run so far)
  }
  return found;
}

/** H.264 RTP payload (RFC 6184): an IDR slice as a single NAL unit (type 5) or the first fragment of one (FU-A) */
export function isIdr(b0: number, b1: number): boolean {
  const type = b0 & 0x1f;
  return type === 5 || (type === 28 && (b1 & 0x80) !== 0 && (b1 & 0x1f) === 5);
}

// ------------------------------------------------------------------------------------------------------------
// the reader

interface Track {
  sdp: SdpTrack;
  rtpChannel: number;
  seq: RtpSequence;
  /** PLAY's RTP-Info seq for the track, and the first packet's seq (either may come first off the socket) */
  infoSeq?: number;
  firstSeq?: number;
}

export class RtspReader implements InterleavedSink {
  private sock: net.Socket | undefined;
  private readonly reader: InterleavedReader;
  private cseq = 0;
  private waiting = new Map<number, { resolve(r: RtspResponse): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  private tracks: Track[] = [];
  private byChannel = new Map<number, Track>();
  private closed = false;
  playing = false;
  bytes = 0;
  measuring = false;
  // in the window
  rtpPackets = 0;
  rtpBytes = 0;
  frames = 0;
  senderReports = 0;
  stalls = 0;
  lastRtpAt = NaN;
  // whole run
  errors: string[] = [];
  errorCount = 0;
  lost = 0;
  backwards = 0;
  hadRtp = false;
  /** tracks whose first packet was checked against PLAY's RTP-Info */
  rtpInfoChecked = 0;
  /** frames whose media time was not found among the terminal's recent sends (after alignment) */
  unmatched = 0;
  /** the terminal's video frames sent before the window, and in it (set at its end) */
  sentBefore = 0;
  sentInWindow = 0;
  /** could not align this reader's RTP timestamps with its terminal's sends: no latency figures from it */
  unaligned = false;
  private align: ReadFrame[] = [];
  /** the frame being read holds an IDR slice */
  private frameKey = false;
  private firstRtpAt = NaN;
  private offset: number | undefined;
  private vPos = 0;
  private lastFrameTs = -1;
  private videoChannel = -1;

  constructor(
    private readonly term: SynthTerminal,
    private readonly url: URL,
    private readonly e2e: Reservoir,
    /** whether the terminal's video frame at this media time is an I frame */
    private readonly isKey: (t: number) => boolean,
  ) {
    this.reader = new InterleavedReader(this);
  }

  /** video frames the terminal has sent */
  get sentCount(): number {
    return this.term.sentCount;
  }

  get trackCount(): number {
    return this.tracks.length;
  }

  start(): void {
    void this.run().catch((err) => this.error(`setup: ${(err as Error).message}`));
  }

  close(): void {
    this.closed = true;
    this.sock?.destroy();
    for (const [k, w] of this.waiting) {
      clearTimeout(w.timer);
      w.reject(new Error('reader closed'));
      this.waiting.delete(k);
    }
  }

  private error(what: string): void {
    if (this.closed) return;
    this.errorCount++;
    if (this.errors.length < 5) this.errors.push(what);
  }

  private async run(): Promise<void> {
    const sock = net.connect({ host: '127.0.0.1', port: Number(this.url.port || 554) });
    sock.setNoDelay(true);
    this.sock = sock;
    sock.on('data', (chunk: Buffer) => {
      this.bytes += chunk.length;
      this.reader.push(chunk);
      if (this.reader.error !== undefined) {
        this.error(`stream: ${this.reader.error}`);
        sock.destroy();
      }
    });
    sock.on('error', (err) => this.error(`socket: ${err.message}`));
    sock.on('close', () => {
      if (!this.closed) this.error('connection closed by the gateway');
      for (const [k, w] of this.waiting) {
        clearTimeout(w.timer);
        w.reject(new Error('connection closed'));
        this.waiting.delete(k);
      }
    });
    const playUrl = this.url.href;
    await this.request('OPTIONS', playUrl);
    const d = await this.request('DESCRIBE', playUrl, ['Accept: application/sdp']);
    const base = d.headers.get('content-base') ?? playUrl;
    const sdpTracks = parseSdp(d.body, base);
    if (!sdpTracks.some((t) => t.media === 'video')) throw new Error('the SDP has no video track');
    let session: string | undefined;
    for (const [k, t] of sdpTracks.entries()) {
      const ch = 2 * k;
      const r = await this.request('SETUP', t.control, [
        `Transport: RTP/AVP/TCP;unicast;interleaved=${ch}-${ch + 1}`,
        ...(session ? [`Session: ${session}`] : []),
      ]);
      const tr = r.headers.get('transport') ?? '';
      const m = /interleaved=(\d+)-(\d+)/.exec(tr);
      if (!m) throw new Error(`SETUP answered without interleaved channels: '${tr}'`);
      session ??= (r.headers.get('session') ?? '').split(';')[0];
      if (!session) throw new Error('SETUP answered without a Session');
      const track: Track = { sdp: t, rtpChannel: Number(m[1]), seq: new RtpSequence() };
      this.tracks.push(track);
      this.byChannel.set(track.rtpChannel, track);
      if (t.media === 'video' && this.videoChannel < 0) this.videoChannel = track.rtpChannel;
    }
    const p = await this.request('PLAY', base, [`Session: ${session}`, 'Range: npt=0.000-']);
    for (const info of parseRtpInfo(p.headers.get('rtp-info') ?? '')) {
      const t = this.tracks.find((x) => x.sdp.control === info.url);
      if (!t || info.seq === undefined) continue;
      t.infoSeq = info.seq;
      this.checkFirst(t);
    }
    this.playing = true;
  }

  private request(method: string, uri: string, headers: string[] = []): Promise<RtspResponse> {
    const cseq = ++this.cseq;
    const sock = this.sock!;
    return new Promise<RtspResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(cseq);
        reject(new Error(`${method}: no answer within ${REQUEST_TIMEOUT_MS / 1000} s`));
      }, REQUEST_TIMEOUT_MS);
      this.waiting.set(cseq, {
        resolve: (r) => (r.status === 200 ? resolve(r) : reject(new Error(`${method}: RTSP ${r.status} ${r.reason}`))),
        reject,
        timer,
      });
      sock.write(`${method} ${uri} RTSP/1.0\r\nCSeq: ${cseq}\r\nUser-Agent: jt1078-bench\r\n${headers.map((h) => h + '\r\n').join('')}\r\n`);
    });
  }

  onResponse(r: RtspResponse): void {
    const cseq = Number(r.headers.get('cseq'));
    const w = this.waiting.get(cseq);
    if (!w) {
      this.error(`response to no request (CSeq ${r.headers.get('cseq')}, ${r.status})`);
      return;
    }
    this.waiting.delete(cseq);
    clearTimeout(w.timer);
    w.resolve(r);
  }

  onRequest(line: string): void {
    this.error(`unexpected request from the server: ${line.slice(0, 60)}`);
  }

  onFrame(channel: number, length: number, buf: Buffer, off: number): void {
    const track = this.byChannel.get(channel);
    if (!track) {
      // RTCP on the odd channel: count sender reports (PT 200)
      if (this.byChannel.has(channel - 1) && length >= 8) {
        if (buf[off + 1] === 200 && this.measuring) this.senderReports++;
        return;
      }
      this.error(`data on channel ${channel}, which no SETUP asked for`);
      return;
    }
    if (length < 12 || buf[off] >> 6 !== 2) {
      this.error(`channel ${channel}: not an RTP packet (length ${length})`);
      return;
    }
    const pt = buf[off + 1] & 0x7f;
    if (pt !== track.sdp.payloadType) {
      this.error(`channel ${channel}: payload type ${pt}, SDP said ${track.sdp.payloadType}`);
      return;
    }
    const seq = buf.readUInt16BE(off + 2);
    const ts = buf.readUInt32BE(off + 4);
    if (track.firstSeq === undefined) {
      track.firstSeq = seq;
      this.checkFirst(track);
    }
    const ssrcChanges = track.seq.ssrcChanges;
    const missing = track.seq.add(seq, buf.readUInt32BE(off + 8));
    if (track.seq.ssrcChanges !== ssrcChanges) this.error(`channel ${channel}: SSRC changed`);
    this.lost += missing;
    this.backwards = this.tracks.reduce((n, t) => n + t.seq.backwards, 0);
    const now = performance.now();
    if (!this.hadRtp) this.firstRtpAt = now;
    this.hadRtp = true;
    if (this.measuring) {
      this.rtpPackets++;
      this.rtpBytes += length;
      if (now - this.lastRtpAt > RTSP_STALL_MS) this.stalls++;
    }
    this.lastRtpAt = now;
    if (channel !== this.videoChannel) return;
    if (length >= 14 && (buf[off] & 0x3f) === 0x00 /* no padding, extension or CSRC */ && isIdr(buf[off + 12], buf[off + 13])) this.frameKey = true;
    if ((buf[off + 1] & 0x80) === 0) return;
    // the last packet of a video frame
    const key = this.frameKey;
    this.frameKey = false;
    if (ts === this.lastFrameTs) return;
    this.lastFrameTs = ts;
    if (this.measuring) this.frames++;
    this.latency(ts, key, now);
  }

  /** the first packet against PLAY's RTP-Info, once both are known */
  private checkFirst(t: Track): void {
    if (t.firstSeq === undefined || t.infoSeq === undefined) return;
    this.rtpInfoChecked++;
    if (t.firstSeq !== t.infoSeq) this.error(`first packet seq ${t.firstSeq}, RTP-Info said ${t.infoSeq}`);
  }

  private latency(ts: number, key: boolean, now: number): void {
    const t = this.term;
    if (this.offset === undefined) {
      if (this.unaligned || now - this.firstRtpAt < ALIGN_AFTER_MS) return;
      this.align.push({ ts, key, at: now });
      if (!ALIGN_FRAMES.includes(this.align.length)) return;
      const from = Math.max(0, t.sentCount - SENT_RING);
      const sent: SentFrames & { t: number[]; key: boolean[]; at: number[] } = { t: [], key: [], at: [] };
      for (let k = from; k < t.sentCount; k++) {
        sent.t.push(t.sentT[k % SENT_RING]);
        sent.key.push(this.isKey(t.sentT[k % SENT_RING]));
        sent.at.push(t.sentAt[k % SENT_RING]);
      }
      this.offset = alignRtp(this.align, sent);
      if (this.offset === undefined && this.align.length >= ALIGN_FRAMES[ALIGN_FRAMES.length - 1]) this.unaligned = true;
      if (this.offset !== undefined) this.align = [];
      return;
    }
    if (!this.measuring) return;
    const ms = ((ts - this.offset) >>> 0) / 90;
    if (t.sentCount - this.vPos > SENT_RING) this.vPos = t.sentCount - SENT_RING;
    while (this.vPos < t.sentCount && t.sentT[this.vPos % SENT_RING] < ms - 0.5) this.vPos++;
    if (this.vPos < t.sentCount && Math.abs(t.sentT[this.vPos % SENT_RING] - ms) <= 0.5) this.e2e.add(now - t.sentAt[this.vPos % SENT_RING]);
    else this.unmatched++;
  }
}

/**
 * Whether a terminal's video frame at media time t (ms from its first frame, the gateway's timeline) is an I frame:
 * the terminal started at frame `first` of the stream and loops over it every loopMs.
 */
export function keyframeTest(stream: SynthStream, first: number): (t: number) => boolean {
  const keys = new Set(stream.frames.filter((f) => f.video && f.key).map((f) => f.t));
  const t0 = stream.frames[first].t;
  return (t) => keys.has((((t + t0) % stream.loopMs) + stream.loopMs) % stream.loopMs);
}

/** the rtsp bench's readers: one RTSP/TCP reader per terminal (fmt 4 requests, rtsp-out on the site on free ports) */
export class RtspReaderFleet implements ReaderFleet {
  readonly what = 'RTSP/TCP reader';
  // free ports: other people's gateways on this machine may hold 7554/7556/7557
  readonly plugin = { name: 'rtsp-out', config: { port: 0, rtpPort: 0, rtcpPort: 0 } };
  readonly openFields = { fmt: 4 };
  readonly bytesOutMetric = 'gw_rtsp_out_bytes_out';
  readonly readers: RtspReader[] = [];
  private readonly e2e = new Reservoir();

  add(term: SynthTerminal, url: URL, stream: SynthStream, first: number): void {
    if (url.protocol !== 'rtsp:') throw new Error(`not an RTSP play URL: ${url.href}`);
    const r = new RtspReader(term, url, this.e2e, keyframeTest(stream, first));
    this.readers.push(r);
    r.start();
  }

  async ready(signal: AbortSignal, timeoutMs: number): Promise<void> {
    const by = performance.now() + timeoutMs;
    while (this.readers.some((r) => !r.hadRtp)) {
      if (signal.aborted || performance.now() > by) {
        const waiting = this.readers.filter((r) => !r.hadRtp);
        const errs = [...new Set(waiting.flatMap((r) => r.errors))].slice(0, 3);
        throw new Error(`${waiting.length} RTSP readers got no RTP within ${timeoutMs / 1000} s${errs.length ? `: ${errs.join('; ')}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  startWindow(): void {
    this.e2e.reset();
    const now = performance.now();
    for (const r of this.readers) {
      r.rtpPackets = 0;
      r.rtpBytes = 0;
      r.frames = 0;
      r.senderReports = 0;
      r.stalls = 0;
      r.unmatched = 0;
      r.sentBefore = r.sentCount;
      r.lastRtpAt = now;
      r.measuring = true;
    }
  }

  endWindow(): void {
    const now = performance.now();
    for (const r of this.readers) {
      r.measuring = false;
      r.sentInWindow = r.sentCount - r.sentBefore;
      if (now - r.lastRtpAt > RTSP_STALL_MS) r.stalls++;
    }
  }

  bytesRead(): number {
    return this.readers.reduce((n, r) => n + r.bytes, 0);
  }

  figures(seconds: number): ReaderFigures {
    const e = this.e2e.values();
    return {
      connected: this.readers.filter((r) => r.playing && r.errorCount === 0).length,
      stalled: this.readers.filter((r) => r.rtpPackets === 0 || r.stalls > 0).length,
      errors: this.readers.reduce((n, r) => n + r.errorCount + r.lost + r.backwards, 0),
      lagMs: { p50: quantile(e, 0.5), p99: quantile(e, 0.99), max: e.reduce((m, x) => Math.max(m, x), 0), count: this.e2e.seen },
      perReaderPerSecond: this.readers.reduce((n, r) => n + r.frames, 0) / Math.max(1, this.readers.length) / seconds,
    };
  }

  report(seconds: number): string[] {
    const f = this.figures(seconds);
    const n = Math.max(1, this.readers.length);
    const sum = (k: (r: RtspReader) => number) => this.readers.reduce((s, r) => s + k(r), 0);
    const errs = [...new Set(this.readers.flatMap((r) => r.errors))];
    return [
      `  RTSP readers: ${this.readers.length} (${f.connected} playing without error), per reader-second ${f1(sum((r) => r.rtpPackets) / n / seconds)} RTP packets, ` +
        `${f1((sum((r) => r.rtpBytes) * 8) / n / seconds / 1000)} kbit/s of RTP, ${f2(f.perReaderPerSecond)} video frames ` +
        `(${f1(
          (100 * sum((r) => r.frames)) /
            Math.max(
              1,
              sum((r) => r.sentInWindow),
            ),
        )} % of those their terminals sent in the window), ${f2(sum((r) => r.senderReports) / n / seconds)} sender reports; ` +
        `${f.stalled} readers stalled (no RTP for ${RTSP_STALL_MS / 1000} s, or none in the window)`,
      `  end to end, terminal write -> last RTP packet of the frame read (${f.lagMs!.count} frames, ${sum((r) => r.unmatched)} unmatched, ` +
        `${this.readers.filter((r) => r.unaligned).length} readers not aligned): p50 ${f2(f.lagMs!.p50)} ms, p99 ${f2(f.lagMs!.p99)} ms, max ${f1(f.lagMs!.max)} ms`,
      `  reader errors (whole run): ${f.errors} (${sum((r) => r.errorCount)} protocol or connection errors, ${sum((r) => r.lost)} RTP packets lost by sequence number, ` +
        `${sum((r) => r.backwards)} out of order; first packets equal to RTP-Info on ${sum((r) => r.rtpInfoChecked)} of ${sum((r) => r.trackCount)} tracks)${errs.length ? `: ${errs.slice(0, 3).join('; ')}` : ''}`,
    ];
  }

  close(): void {
    for (const r of this.readers) r.close();
  }
}
