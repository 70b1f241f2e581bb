/**
 * Shared pieces of the intercom tests (not a test file itself): a gateway with jt1078-ingest and intercom, a terminal
 * on a real TCP connection that pushes the G.711A fixture (re-packed in its layout, its audio re-encoded to the codec
 * under test) and hears what the gateway sends down with jt1078-ingest's own parser, and a talk client.
 */
import * as net from 'node:net';
import { once } from 'node:events';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import type { PluginDefinition } from '../../../plugin-sdk';
import type { Notice } from '../../../plugin-sdk';
import { ALAW_TO_PCM, createEncoder, type EncoderSpec } from '../../../plugin-sdk/codecs';
import { addHisiliconHeader } from '../../jt1078-ingest/src/audio';
import { encodePacket } from '../../jt1078-ingest/src/packer';
import { bodyOf, type Jt1078Layout, type Jt1078Packet } from '../../jt1078-ingest/src/packet';
import { capturePackets, fieldsOf } from '../../jt1078-ingest/test/helpers';
import { TalkReceiver, type TalkReceiverOptions } from '../../jt1078-ingest/tools/talk-receiver';
import intercom from '../index';

export const GOJT = 'jt1078/gojt808-d1-h264-g711a-2013.bin';

/** a fmt 0 output (so opens succeed without flv-out) that also keeps every notice */
export function probePlugin(): { def: PluginDefinition<object>; notices: Notice[] } {
  const notices: Notice[] = [];
  const def: PluginDefinition<object> = {
    name: 'talk-probe',
    setup(ctx) {
      ctx.sessions.registerOutput({ name: 'talk-probe', fmt: 0, schemes: ['http', 'ws'], playUrl: (a) => `http://127.0.0.1:1/${a.streamName}` });
      ctx.notices.on((n) => notices.push(n));
    },
  };
  return { def, notices };
}

export async function bootGateway(config: Record<string, unknown> = {}): Promise<{ gw: TestGateway; notices: Notice[] }> {
  const probe = probePlugin();
  const gw = await startTestGateway({
    plugins: [
      { name: 'jt1078-ingest' },
      { name: 'talk-probe', def: probe.def },
      { name: 'intercom', def: intercom as unknown as PluginDefinition<object>, config },
    ],
  });
  return { gw, notices: probe.notices };
}

export interface Opened {
  reqId: string;
  taUrl?: string;
  wsUrl?: string;
  result: Record<string, unknown>;
}

export async function openTalk(
  gw: TestGateway,
  o: { simNo: string; chanId: number; dataTyp?: number; talkSendProtoVer?: number; token?: string },
): Promise<Opened> {
  const r = await gw.api('POST', '/strm/open', {
    user: { token: o.token ?? 'talk-token' },
    typ: 'live',
    simNo: o.simNo,
    chanId: o.chanId,
    dataTyp: o.dataTyp ?? 2,
    ...(o.talkSendProtoVer !== undefined ? { talkSendProtoVer: o.talkSendProtoVer } : {}),
  });
  if (r.json.errCode !== 0) throw new Error(`open failed: ${JSON.stringify(r.json)}`);
  const d = r.json.data[0] as Record<string, unknown>;
  return { reqId: d.reqId as string, taUrl: d.taUrl as string | undefined, wsUrl: d.wsUrl as string | undefined, result: d };
}

/** The codec a simulated terminal sends its audio in (the fixture's G.711A re-encoded), and its payload type. */
export interface TerminalAudio {
  spec: EncoderSpec;
  pt: number;
  hisilicon?: boolean;
}
export const G711A: TerminalAudio = { spec: { codec: 'g711a' }, pt: 6 };

/**
 * The fixture as one terminal: video packets re-packed (SIM, channel, layout), each audio frame decoded from A-law
 * and encoded to `audio`.
 */
export function terminalPackets(o: { sim: string; channel: number; layout: Jt1078Layout; audio?: TerminalAudio }): { packets: Buffer[]; audio: Buffer[] } {
  const a = o.audio ?? G711A;
  const enc = createEncoder(a.spec)!;
  const packets: Buffer[] = [];
  const audio: Buffer[] = [];
  for (const p of capturePackets(GOJT)) {
    const f = fieldsOf(p, { sim: o.sim, channel: o.channel, layout: o.layout });
    if (p.dataType !== 3) {
      packets.push(encodePacket(f, p.body));
      continue;
    }
    const pcm = new Int16Array(p.body.length);
    for (let i = 0; i < pcm.length; i++) pcm[i] = ALAW_TO_PCM[p.body[i]];
    const coded = a.spec.codec === 'g711a' ? p.body : enc.encode(pcm);
    const pkt = encodePacket({ ...f, pt: a.pt }, a.hisilicon ? addHisiliconHeader(coded) : coded);
    packets.push(pkt);
    audio.push(pkt);
  }
  return { packets, audio };
}

/** A terminal on a real TCP connection: pushes, and hears intercom audio through a TalkReceiver. */
export class Terminal {
  readonly receiver: TalkReceiver;
  readonly sock: net.Socket;
  readonly audioPackets: Jt1078Packet[] = [];
  /** bytes the gateway sent down */
  received = 0;

  private constructor(sock: net.Socket, receiver: TalkReceiver) {
    this.sock = sock;
    this.receiver = receiver;
    const prev = receiver.onFrame;
    receiver.onFrame = (pcm, p) => {
      this.audioPackets.push({ ...p, body: Buffer.from(bodyOf(p)) });
      prev?.(pcm, p);
    };
    sock.on('data', (d: Buffer) => {
      this.received += d.length;
      receiver.push(d);
    });
    sock.on('error', () => undefined);
  }

  static async connect(port: number, opts: TalkReceiverOptions): Promise<Terminal> {
    const sock = net.connect(port, '127.0.0.1');
    await once(sock, 'connect');
    return new Terminal(sock, new TalkReceiver({ keepSamples: 8000 * 30, ...opts }));
  }

  write(packets: Buffer[]): void {
    for (const b of packets) this.sock.write(b);
  }

  close(): void {
    this.sock.destroy();
  }
}

/** A client socket that records what comes back (binary messages, the close code and reason). */
export class Client {
  readonly messages: Buffer[] = [];
  readonly texts: string[] = [];
  closed: { code: number; reason: string } | undefined;
  readonly closedP: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (d, isBinary) => {
      const b = Buffer.isBuffer(d) ? d : Array.isArray(d) ? Buffer.concat(d) : Buffer.from(d);
      if (isBinary) this.messages.push(b);
      else this.texts.push(b.toString('utf8'));
    });
    ws.on('error', () => undefined);
    this.closedP = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closed = { code, reason: reason.toString('utf8') };
        resolve(this.closed);
      }),
    );
  }

  static async open(url: string, protocols?: string[]): Promise<Client> {
    const ws = new WebSocket(url, protocols);
    const c = new Client(ws);
    await Promise.race([once(ws, 'open'), c.closedP]);
    return c;
  }

  send(b: Buffer | string): void {
    this.ws.send(b, { binary: typeof b !== 'string' });
  }
}

/** PCM16 of a tone (continuous phase from sample `from`) */
export function tone(hz: number, samples: number, from = 0, amplitude = 8000): Int16Array {
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * (from + i)) / 8000));
  return out;
}

export function pcmBytes(pcm: Int16Array): Buffer {
  const b = Buffer.alloc(pcm.length * 2);
  for (let i = 0; i < pcm.length; i++) b.writeInt16LE(pcm[i], 2 * i);
  return b;
}

/** Power at one frequency in a block of samples (Goertzel). */
export function powerAt(pcm: Int16Array, hz: number, rate = 8000): number {
  const k = 2 * Math.cos((2 * Math.PI * hz) / rate);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < pcm.length; i++) {
    const s = pcm[i] + k * s1 - s2;
    s2 = s1;
    s1 = s;
  }
  return s1 * s1 + s2 * s2 - k * s1 * s2;
}

/** The strongest frequency in 100..3900 Hz (50 Hz steps) of the PCM's loud part, and how many samples are loud. */
export function dominantHz(pcm: Int16Array, rate = 8000): { hz: number; loudSamples: number } {
  // the loud span: from the first to the last sample over a tenth of the peak
  let peak = 0;
  for (const v of pcm) peak = Math.max(peak, Math.abs(v));
  let a = 0;
  let b = pcm.length;
  while (a < b && Math.abs(pcm[a]) < peak / 10) a++;
  while (b > a && Math.abs(pcm[b - 1]) < peak / 10) b--;
  const seg = pcm.subarray(a, b);
  let best = 0;
  let bestHz = 0;
  for (let hz = 100; hz < 3950; hz += 50) {
    const p = powerAt(seg, hz, rate);
    if (p > best) {
      best = p;
      bestHz = hz;
    }
  }
  return { hz: bestHz, loudSamples: seg.length };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** a metric's value from /metrics (0 when absent) */
export async function metric(gw: TestGateway, name: string): Promise<number> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => !l.startsWith('#') && l.slice(0, l.lastIndexOf(' ')) === name);
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
