/**
 * A gateway with rtsp-out and a stand-in ingest (the test publishes into the request's bus stream itself), real
 * clients (ffmpeg/ffprobe as independent RTSP players; a raw socket for the request sequence), and test media:
 * the test kit's H.264 clip with G.711A, and an H.265 clip made by ffmpeg (libx265).
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import * as path from 'node:path';
import { videoUnit, type AccessUnit, type VideoTrackInfo } from '../../../plugin-sdk';
import { splitAnnexB, h265NalType } from '../../../plugin-sdk/formats';
import { extractH265ParameterSets, parseH265Sps } from '../../../plugin-sdk/formats';
import {
  encodeH265TestPattern,
  startTestGateway,
  stubMediaPlugin,
  testClip,
  type ClipPublisher,
  type TestClip,
  type TestGateway,
} from '../../../plugin-sdk/testkit';
import { requireTool } from '../../../test/support/tools';
import { runProcess } from '../../../test/support/run-process';
import rtspOut from '../index';
import { scratchDir } from '../../../test/support/paths';

export interface RtspGateway {
  gw: TestGateway;
  port: number;
  /** opens a request with fmt 4: its play URL, reqId and bus stream */
  open(
    sim: string,
    o?: { chan?: number; dataTyp?: number; token?: string; extra?: Record<string, unknown> },
  ): Promise<{ url: string; reqId: string; stream: string }>;
  /** opens a request as `open` does and publishes `clip` on it in a loop; resolves once the stream is ready */
  looping(sim: string, clip: TestClip, o?: Parameters<RtspGateway['open']>[1]): Promise<LoopingStream>;
  stop(): Promise<void>;
}

export interface LoopingStream {
  url: string;
  reqId: string;
  stream: string;
  pub: ClipPublisher;
  /** closes the readers given, stops the clip and closes the request */
  end(...readers: Array<{ close(): void }>): Promise<void>;
}

export async function startRtspGateway(
  config: Record<string, unknown> = {},
  extra: Array<{ name: string; config?: Record<string, unknown> }> = [],
  captureLogs = false,
): Promise<RtspGateway> {
  const stub = stubMediaPlugin();
  const gw = await startTestGateway({
    plugins: [{ name: stub.name, def: stub.def }, ...extra, { name: 'rtsp-out', def: rtspOut, config }],
    captureLogs,
  });
  const open: RtspGateway['open'] = async (sim, o = {}) => {
    const r = await gw.openStream({ simNo: sim, chanId: o.chan ?? 1, fmt: 4, dataTyp: o.dataTyp ?? 0, token: o.token, extra: o.extra });
    return { url: r.playUrl, reqId: r.reqId, stream: r.streamName };
  };
  return {
    gw,
    port: gw.ports['rtsp-out.port'],
    open,
    async looping(sim, clip, o) {
      const opened = await open(sim, o);
      const pub = gw.publish(opened.stream, clip, { loop: true });
      await gw.waitReady(opened.reqId);
      return {
        ...opened,
        pub,
        async end(...readers) {
          for (const r of readers) r.close();
          pub.stop();
          await gw.api('POST', '/strm/close', { reqIds: [opened.reqId] });
        },
      };
    },
    stop: () => gw.stop(),
  };
}

// --- media --------------------------------------------------------------------------------------------------------

/** The test kit's H.264 clip (320x240, 25 fps, a keyframe a second) with G.711A at 8 kHz. */
export function h264Clip(): TestClip {
  return testClip({ seconds: 2, audio: true });
}

let hevc: TestClip | undefined;
/** 320x240 H.265 from ffmpeg's libx265 (25 fps, an IDR a second), with the H.264 clip's G.711A audio. */
export function h265Clip(): TestClip {
  if (hevc) return hevc;
  const es = encodeH265TestPattern({
    seconds: 2,
    fps: 25,
    size: '320x240',
    gopFrames: 25,
    fixedGop: true,
    bframes: 0,
    ffmpeg: requireTool('ffmpeg', 'ffmpeg'),
  });
  const aus = hevcAccessUnits(es);
  const first = extractH265ParameterSets(aus[0].payload);
  assert.ok(first.vps && first.sps && first.pps, 'parameter sets on the first access unit');
  const sps = parseH265Sps(first.sps);
  const video: VideoTrackInfo = {
    kind: 'video',
    codec: 'h265',
    width: sps.width,
    height: sps.height,
    vps: Buffer.from(first.vps),
    sps: Buffer.from(first.sps),
    pps: Buffer.from(first.pps),
    frameRate: 25,
  };
  const units: AccessUnit[] = aus.map((a, i) => Object.freeze(videoUnit({ codec: 'h265', dts: i * 40, keyframe: a.irap, payload: a.payload })));
  const g711 = h264Clip();
  units.push(...g711.units.filter((u) => u.kind === 'audio'));
  units.sort((a, b) => a.dts - b.dts || (a.kind === b.kind ? 0 : a.kind === 'video' ? -1 : 1));
  hevc = Object.freeze({
    video,
    audio: g711.audio,
    tracks: [video, g711.audio!],
    units,
    fps: 25,
    frameCount: aus.length,
    durationMs: aus.length * 40,
  });
  return hevc;
}

/** Access units of an H.265 Annex-B stream (decode order); a new one starts at a parameter set, AUD, prefix SEI or first slice. */
function hevcAccessUnits(annexB: Buffer): Array<{ payload: Buffer; irap: boolean }> {
  const aus: Array<{ nals: Buffer[]; irap: boolean; vcl: boolean }> = [];
  let cur: { nals: Buffer[]; irap: boolean; vcl: boolean } | undefined;
  for (const nal of splitAnnexB(annexB)) {
    const t = h265NalType(nal);
    const isVcl = t < 32;
    const startsAu = isVcl ? (nal[2] & 0x80) !== 0 : (t >= 32 && t <= 35) || t === 39;
    if (!cur || (cur.vcl && startsAu)) aus.push((cur = { nals: [], irap: false, vcl: false }));
    cur.nals.push(nal);
    if (isVcl) {
      cur.vcl = true;
      if (t >= 16 && t <= 21) cur.irap = true;
    }
  }
  const sc = Buffer.from([0, 0, 0, 1]);
  return aus.map((a) => ({ payload: Buffer.concat(a.nals.flatMap((n) => [sc, n])), irap: a.irap }));
}

// --- ffmpeg as the player -------------------------------------------------------------------------------------------

export interface Recorded {
  code: number | null;
  stderr: string;
  file: string;
}

/**
 * ffmpeg plays the URL over `transport` and copies `seconds` of it into a NUT file (async: the gateway runs in this
 * process and must go on serving).
 */
export function recordRtsp(url: string, transport: 'tcp' | 'udp', seconds: number, extra: string[] = []): Promise<Recorded> {
  const dir = scratchDir('rtsp-out');
  const file = path.join(dir, 'out.nut');
  const args = ['-v', 'error', '-rtsp_transport', transport, ...extra, '-i', url, '-t', String(seconds), '-c', 'copy', '-f', 'nut', file];
  return runProcess(requireTool('ffmpeg', 'ffmpeg'), args, 30_000).then((r) => ({ ...r, file }));
}

/** a UDP socket on a free loopback port: a reader's RTP or RTCP port */
export async function udpSocket(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', () => resolve()));
  return s;
}

// --- a raw RTSP client -----------------------------------------------------------------------------------------------

export interface RawResponse {
  status: number;
  reason: string;
  headers: Map<string, string>;
  body: string;
}

/** RTSP over a bare socket: requests as written, responses parsed, interleaved frames collected. */
export class RawRtsp {
  private buf = Buffer.alloc(0);
  private waiting: Array<(r: RawResponse) => void> = [];
  readonly responses: RawResponse[] = [];
  /** interleaved frames by channel */
  readonly frames = new Map<number, Buffer[]>();
  closed = false;
  readonly ended: Promise<void>;
  private cseq = 0;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => this.onData(d));
    this.ended = new Promise((resolve) =>
      socket.on('close', () => {
        this.closed = true;
        resolve();
      }),
    );
    socket.on('error', () => undefined);
  }

  static connect(port: number): Promise<RawRtsp> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(new RawRtsp(s)));
      s.once('error', reject);
    });
  }

  /** Sends bytes as they are and waits for the next response. */
  sendRaw(text: string | Buffer): Promise<RawResponse> {
    const p = this.next();
    this.socket.write(text);
    return p;
  }

  request(method: string, uri: string, headers: Record<string, string> = {}): Promise<RawResponse> {
    const lines = [`${method} ${uri} RTSP/1.0`, `CSeq: ${++this.cseq}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    return this.sendRaw(lines.join('\r\n') + '\r\n\r\n');
  }

  next(): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('connection closed'));
      this.waiting.push(resolve);
      void this.ended.then(() => reject(new Error('connection closed before a response')));
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      if (this.buf.length === 0) return;
      if (this.buf[0] === 0x24) {
        if (this.buf.length < 4) return;
        const len = this.buf.readUInt16BE(2);
        if (this.buf.length < 4 + len) return;
        const ch = this.buf[1];
        const list = this.frames.get(ch) ?? [];
        list.push(Buffer.from(this.buf.subarray(4, 4 + len)));
        this.frames.set(ch, list);
        this.buf = this.buf.subarray(4 + len);
        continue;
      }
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buf.toString('latin1', 0, end).split('\r\n');
      const m = /^RTSP\/1\.0 (\d{3}) (.*)$/.exec(head[0]);
      assert.ok(m, `a status line: ${head[0]}`);
      const headers = new Map<string, string>();
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
      }
      const len = Number(headers.get('content-length') ?? 0);
      if (this.buf.length < end + 4 + len) return;
      const body = this.buf.toString('utf8', end + 4, end + 4 + len);
      this.buf = this.buf.subarray(end + 4 + len);
      const r: RawResponse = { status: Number(m[1]), reason: m[2], headers, body };
      this.responses.push(r);
      this.waiting.shift()?.(r);
    }
  }
}

/** NAL units of an H.264 RTP stream (single, STAP-A, FU-A), by RTP timestamp, in order. */
export function depacketizeH264(packets: Buffer[]): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let fu: Buffer[] = [];
  for (const p of packets) {
    const { ts } = rtpHeader(p);
    const payload = p.subarray(12);
    const list = out.get(ts) ?? [];
    out.set(ts, list);
    const type = payload[0] & 0x1f;
    if (type === 24) {
      for (let at = 1; at < payload.length;) {
        const n = payload.readUInt16BE(at);
        list.push(payload.subarray(at + 2, at + 2 + n));
        at += 2 + n;
      }
    } else if (type === 28) {
      if (payload[1] & 0x80) fu = [Buffer.from([(payload[0] & 0xe0) | (payload[1] & 0x1f)])];
      fu.push(payload.subarray(2));
      if (payload[1] & 0x40) list.push(Buffer.concat(fu));
    } else {
      list.push(payload);
    }
  }
  return out;
}

/** The fields of an RTP packet the tests look at. */
export function rtpHeader(p: Buffer): { pt: number; marker: boolean; seq: number; ts: number; ssrc: number } {
  return { pt: p[1] & 0x7f, marker: (p[1] & 0x80) !== 0, seq: p.readUInt16BE(2), ts: p.readUInt32BE(4), ssrc: p.readUInt32BE(8) };
}
