/**
 * Talk over WebRTC end to end: headless Chromium with a fake microphone playing a 1 kHz tone POSTs a sendrecv audio
 * offer to the WHEP URL of an intercom request (live, dataTyp 2); the simulated terminal (the G.711A capture re-packed
 * in its layout, its audio re-encoded to its own codec, pushed in real time over TCP) hears the tone in its own codec
 * and in the layout talkSendProtoVer asks for, within 300 ms of the first RTP packet the gateway took from the browser
 * (the webrtc plugin's debug line "first talk packet"); the terminal's own audio comes back on the same audio track
 * (G.711 as it came, G.726 through the PCMA stage).
 * Also: a second talker on the channel is refused (409 and a reason), and a sendrecv offer for a listen request
 * (dataTyp 3) only plays.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { loadCapture } from '../../jt1078-ingest/tools/simulator';
import { wavHeader } from '../../jt1078-ingest/tools/talk-receiver';
import { dominantHz, G711A, GOJT, powerAt, Terminal, terminalPackets, type TerminalAudio } from '../../intercom/test/helpers';
import { closeReq, metricSum, openLive, useE2eGateway, waitFor } from '../../../test/e2e/helpers';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { launchWebrtcBrowser, whepPlay, whepStats, freeUdpPort } from './whep-page';

declare const window: any;

const TONE_HZ = 1000;

/** a 20 ms frame that carries the tone: loud enough, and 1 kHz well above its neighbours */
function carriesTone(pcm: Int16Array): boolean {
  let sq = 0;
  for (const x of pcm) sq += x * x;
  if (Math.sqrt(sq / pcm.length) < 300) return false;
  const at = powerAt(pcm, TONE_HZ);
  return [500, 700, 1300, 1700].every((hz) => at > 10 * powerAt(pcm, hz));
}

/**
 * A terminal pushing the capture in real time on its own connection (the stream stays live while the browser plays)
 * and hearing intercom audio on it; `toneAt` is the wall time of the first frame down that carries the tone.
 */
class PacedTerminal {
  toneAt = 0;
  firstAt = 0;
  private stopped = false;
  private readonly done: Promise<void>;

  constructor(
    readonly t: Terminal,
    packets: Buffer[],
    offsets: Float64Array,
  ) {
    const prev = t.receiver.onFrame;
    t.receiver.onFrame = (pcm, p) => {
      const now = Date.now();
      this.firstAt ||= now;
      if (!this.toneAt && carriesTone(pcm)) this.toneAt = now;
      prev?.(pcm, p);
    };
    this.done = (async () => {
      const t0 = Date.now();
      for (let i = 0; i < packets.length && !this.stopped;) {
        const now = Date.now() - t0;
        const from = i;
        while (i < packets.length && offsets[i] <= now) i++;
        t.write(packets.slice(from, i));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
    this.t.close();
  }
}

describe('webrtc: talk from Chromium to a terminal (WHEP, sendrecv audio)', function () {
  this.timeout(120_000);
  const webrtcConfig: Record<string, unknown> = { host: '127.0.0.1', publicHost: '127.0.0.1' };
  before(async () => {
    // read when the gateway below starts (its before hook runs after this one)
    webrtcConfig.udpPort = await freeUdpPort();
  });
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'intercom' }, { name: 'webrtc', config: webrtcConfig }], {}, { captureLogs: true });
  const offsets = loadCapture(fixturePath(GOJT)).offsets;
  let browser: Browser;
  let dir = '';
  const pages: Page[] = [];
  const running: PacedTerminal[] = [];

  before(async () => {
    dir = scratchDir('webrtc-talk');
    // the microphone: 5 s of a 1 kHz tone at 48 kHz (Chromium loops the file)
    const mic = path.join(dir, 'mic.wav');
    const pcm = new Int16Array(48000 * 5);
    for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(10000 * Math.sin((2 * Math.PI * TONE_HZ * i) / 48000));
    fs.writeFileSync(mic, Buffer.concat([wavHeader(pcm.byteLength, 48000), Buffer.from(pcm.buffer)]));
    browser = await launchWebrtcBrowser(mic);
  });
  after(async () => {
    await browser?.close().catch(() => undefined);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const p of pages.splice(0)) await p.close().catch(() => undefined);
    for (const t of running.splice(0)) await t.stop();
  });

  async function terminal(o: { sim: string; layout: '2013' | '2019'; audio: TerminalAudio; hear: '2013' | '2019'; g726Bits?: number }): Promise<PacedTerminal> {
    const port = o.layout === '2013' ? e.live2013 : e.live2019;
    const t = await Terminal.connect(port, { layout: o.hear, g726Bits: o.g726Bits });
    const { packets } = terminalPackets({ sim: o.sim, channel: 1, layout: o.layout, audio: o.audio });
    assert.equal(packets.length, offsets.length);
    const pt = new PacedTerminal(t, packets, offsets);
    running.push(pt);
    return pt;
  }

  async function play(url: string, talk: boolean): Promise<{ page: Page; status: number; body: string; session: string }> {
    const r = await whepPlay(browser, url, { talk, video: false });
    pages.push(r.page);
    const location: string | null = await r.page.evaluate(() => window.location_);
    return { ...r, session: location?.split('/').pop() ?? '' };
  }

  async function talkPackets(): Promise<number> {
    return metricSum(await (await fetch(`${e.gw.baseUrl}/metrics`)).text(), 'gw_webrtc_talk_packets_total');
  }

  const cases: Array<{
    name: string;
    sim: string;
    layout: '2013' | '2019';
    proto: number;
    hear: '2013' | '2019';
    audio: TerminalAudio;
    codec: string;
    pt: number;
    /** what the browser negotiates and hears back (a terminal's G.726 comes back as PCMA through the PCMA stage) */
    back: string;
    g726Bits?: number;
  }> = [
    {
      name: '2013 terminal, talkSendProtoVer 0, G.711A',
      sim: '13800003001',
      layout: '2013',
      proto: 0,
      hear: '2013',
      audio: G711A,
      codec: 'g711a',
      pt: 6,
      back: 'audio/PCMA',
    },
    {
      name: '2019 terminal, talkSendProtoVer 1, G.711U',
      sim: '19912345673002',
      layout: '2019',
      proto: 1,
      hear: '2019',
      audio: { spec: { codec: 'g711u' }, pt: 7 },
      codec: 'g711u',
      pt: 7,
      back: 'audio/PCMU',
    },
    {
      name: '2013 terminal forced to the 2019 layout by talkSendProtoVer 1, G.726-32',
      sim: '13800003003',
      layout: '2013',
      proto: 1,
      hear: '2019',
      audio: { spec: { codec: 'g726', bitsPerSample: 4 }, pt: 8 },
      codec: 'g726',
      pt: 8,
      g726Bits: 4,
      back: 'audio/PCMA',
    },
  ];

  for (const k of cases) {
    it(`the microphone's tone reaches the terminal in its codec and layout within 300 ms: ${k.name}`, async () => {
      const open = await openLive(e.gw, k.sim, 1, { dataTyp: 2, scheme: 'webrtc', talkSendProtoVer: k.proto });
      const term = await terminal(k);
      await e.gw.waitReady(open.reqId);
      const { page, status, body, session } = await play(open.playUrl, true);
      assert.equal(status, 201, body);
      assert.match(body, /a=sendrecv/, 'the answer takes the browser audio');

      await waitFor('the tone at the terminal', () => term.toneAt, 15_000);
      const first = e.gw.logs.find((l) => l.msg === 'first talk packet' && l.session === session);
      assert.ok(first, 'the gateway logged its first talk packet from the browser');
      const delay = term.toneAt - (first.at as number);
      console.log(`      first RTP packet -> tone at the terminal: ${delay} ms (first frame down after ${term.firstAt - (first.at as number)} ms)`);
      assert.ok(delay >= 0 && delay <= 300, `the tone reached the terminal ${delay} ms after the first RTP packet`);

      if (k === cases[0]) {
        // one talker per channel: a second browser is refused before any peer connection, with the reason
        const second = await play(open.playUrl, true);
        assert.equal(second.status, 409, second.body);
        assert.match(second.body, /another client is talking on this channel/);
      }

      // a second of talk: in the terminal's codec and the asked layout, the tone throughout
      const r = await waitFor('1 s of talk at the terminal', () => (term.t.receiver.report().frames >= 50 ? term.t.receiver.report() : undefined), 10_000);
      assert.deepEqual([r.codec, r.pt, r.layout, r.sim, r.channel, r.seqGaps], [k.codec, k.pt, k.hear, k.sim, 1, 0]);
      const pcm = term.t.receiver.pcm;
      const from = pcm.length - 8000; // the last second heard
      assert.equal(dominantHz(pcm.subarray(from)).hz, TONE_HZ);
      assert.ok(carriesTone(pcm.subarray(from, from + 4000)) && carriesTone(pcm.subarray(from + 4000)), 'the tone holds over the whole last second');

      // the terminal's own audio comes back on the same track
      const s = await waitFor('the terminal heard back', async () => {
        const x = await whepStats(page);
        return x.audioPackets >= 25 ? x : undefined;
      });
      assert.equal(s.audioCodec, k.back);

      // the client ends the session: the talk ends with it and the channel is free again
      const del = await page.evaluate(async (base: string) => {
        const r = await fetch(base + window.location_, { method: 'DELETE' });
        window.pc.close();
        return r.status;
      }, e.gw.baseUrl);
      assert.equal(del, 200);
      const ended = await waitFor('the talk ended', () => e.gw.logs.find((l) => l.msg === 'talk ended' && l.reqId === open.reqId));
      assert.deepEqual([ended.protocol, ended.reason], ['webrtc', 'client ended the session (DELETE)']);
      if (k === cases[0]) {
        const again = await play(open.playUrl, true);
        assert.equal(again.status, 201, `a new talker once the first left: ${again.body}`);
      }
      await closeReq(e.gw, open.reqId);
    });
  }

  it('a sendrecv offer for a listen request (live, dataTyp 3) only plays: no talk, the answer sends only', async () => {
    const sim = '13800003004';
    const open = await openLive(e.gw, sim, 1, { dataTyp: 3, scheme: 'webrtc' });
    const term = await terminal({ sim, layout: '2013', audio: G711A, hear: '2013' });
    await e.gw.waitReady(open.reqId);
    const before = await talkPackets();
    const { page, status, body, session } = await play(open.playUrl, true);
    assert.equal(status, 201, body);
    assert.match(body, /a=sendonly/);
    assert.doesNotMatch(body, /a=sendrecv/);
    const s = await waitFor('the terminal heard by the browser', async () => {
      const x = await whepStats(page);
      return x.audioPackets >= 50 ? x : undefined;
    });
    assert.equal(s.audioCodec, 'audio/PCMA');
    // the browser's transceiver settled to receive only: its microphone is not sent
    assert.equal(await page.evaluate(() => window.pc.getTransceivers()[0].currentDirection), 'recvonly');
    assert.equal(await talkPackets(), before);
    assert.equal(term.t.receiver.report().packets, 0, 'nothing goes down to the terminal');
    assert.equal(
      e.gw.logs.some((l) => l.session === session && l.msg === 'first talk packet'),
      false,
    );
    await closeReq(e.gw, open.reqId);
  });
});
