/**
 * taUrl end to end on loopback: a gateway (jt1078-ingest + intercom), a terminal on a real TCP connection pushing the
 * G.711A fixture (re-packed to its layout, its audio re-encoded to the codec under test), a talk client on a real
 * WebSocket. The terminal's side parses what comes down with jt1078-ingest's parser and decodes it.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import { once } from 'node:events';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import type { Notice } from '../../../plugin-sdk';
import { createDecoder } from '../../../plugin-sdk/codecs';
import { TalkReceiver } from '../../jt1078-ingest/tools/talk-receiver';
import { bootGateway, Client, dominantHz, G711A, metric, openTalk, pcmBytes, sleep, Terminal, terminalPackets, tone, type TerminalAudio } from './helpers';
import { waitFor } from '../../../test/support/until';

/** sends `seconds` of a 1 kHz tone in 20 ms messages, all at once */
function sendTone(c: Client, seconds: number): number {
  const total = Math.round(8000 * seconds);
  for (let at = 0; at < total; at += 160) c.send(pcmBytes(tone(1000, Math.min(160, total - at), at)));
  return total;
}

describe('intercom: taUrl', function () {
  this.timeout(60000);
  let gw: TestGateway;
  let notices: Notice[];
  const terminals: Terminal[] = [];
  const clients: Client[] = [];

  async function boot(config: Record<string, unknown> = {}): Promise<void> {
    ({ gw, notices } = await bootGateway(config));
  }
  async function terminal(o: {
    sim: string;
    channel: number;
    layout: '2013' | '2019';
    audio?: TerminalAudio;
    hearLayout?: '2013' | '2019';
    g726Bits?: number;
  }): Promise<Terminal> {
    const port = gw.ports[o.layout === '2013' ? 'jt1078-ingest.livePort2013' : 'jt1078-ingest.livePort2019'];
    const t = await Terminal.connect(port, { layout: o.hearLayout ?? o.layout, g726Bits: o.g726Bits });
    terminals.push(t);
    t.write(terminalPackets(o).packets);
    return t;
  }
  async function client(url: string, protocols?: string[]): Promise<Client> {
    const c = await Client.open(url, protocols);
    clients.push(c);
    return c;
  }
  afterEach(async () => {
    for (const c of clients.splice(0)) c.ws.terminate();
    for (const t of terminals.splice(0)) t.close();
    await gw?.stop();
  });

  it('puts taUrl and wsUrl into the open result and the ready notice of live dataTyp 2 only', async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '013800001111', chanId: 1 });
    const port = gw.ports['gateway.httpPort'];
    assert.equal(talk.taUrl, `ws://127.0.0.1:${port}/talk/13800001111_1_1?reqId=${talk.reqId}&token=talk-token`);
    assert.equal(talk.wsUrl, `ws://127.0.0.1:${port}/talk-stomp?reqId=${talk.reqId}&token=talk-token`);
    const av = await openTalk(gw, { simNo: '013800001111', chanId: 2, dataTyp: 0 });
    const listen = await openTalk(gw, { simNo: '013800001111', chanId: 3, dataTyp: 3 });
    for (const o of [av, listen]) assert.ok(!('taUrl' in o.result) && !('wsUrl' in o.result), JSON.stringify(o.result));
    const status = await gw.api('GET', `/strm/status?reqId=${talk.reqId}`);
    assert.equal(status.json.data.find((e: { reqId: string }) => e.reqId === talk.reqId).taUrl, talk.taUrl);

    // the terminal pushes channels 1 and 2: each request gets its ready notice, only the intercom one with the URLs
    await terminal({ sim: '13800001111', channel: 1, layout: '2013' });
    await terminal({ sim: '13800001111', channel: 2, layout: '2013' });
    const ready = await waitFor('two ready notices', () => {
      const r = notices.filter((n) => n.payload.act === 'ready');
      return r.length >= 2 && r;
    });
    const byReq = new Map(ready.map((n) => [n.payload.reqId, n.payload]));
    assert.equal(byReq.get(talk.reqId)?.taUrl, talk.taUrl);
    assert.equal(byReq.get(talk.reqId)?.wsUrl, talk.wsUrl);
    assert.equal(byReq.get(av.reqId)?.taUrl, undefined);
    assert.equal(byReq.get(av.reqId)?.wsUrl, undefined);
  });

  const cases: Array<{
    name: string;
    layout: '2013' | '2019';
    audio: TerminalAudio;
    codec: string;
    pt: number;
    proto?: number;
    hear?: '2013' | '2019';
    g726Bits?: number;
  }> = [
    { name: '2013 terminal, G.711A', layout: '2013', audio: G711A, codec: 'g711a', pt: 6 },
    { name: '2019 terminal, G.711U', layout: '2019', audio: { spec: { codec: 'g711u' }, pt: 7 }, codec: 'g711u', pt: 7 },
    {
      name: '2013 terminal forced to 2019 by talkSendProtoVer, G.726-32',
      layout: '2013',
      proto: 1,
      hear: '2019',
      g726Bits: 4,
      audio: { spec: { codec: 'g726', bitsPerSample: 4 }, pt: 8 },
      codec: 'g726',
      pt: 8,
    },
    { name: '2019 terminal, HiSilicon IMA ADPCM', layout: '2019', audio: { spec: { codec: 'adpcm' }, pt: 26, hisilicon: true }, codec: 'adpcm', pt: 26 },
  ];
  for (const k of cases) {
    it(`a 1 kHz tone over taUrl reaches the terminal in its own codec and layout, paced: ${k.name}`, async () => {
      await boot({ maxBufferMs: 2000 });
      const sim = k.layout === '2019' ? '19912345678901' : '13800002222';
      const talk = await openTalk(gw, { simNo: sim, chanId: 2, talkSendProtoVer: k.proto });
      const t = await terminal({ sim, channel: 2, layout: k.layout, audio: k.audio, hearLayout: k.hear, g726Bits: k.g726Bits });
      await gw.waitReady(talk.reqId);
      const c = await client(talk.taUrl!);
      // one second at once: the gateway must spread it over a second, not relay the burst
      const sent = sendTone(c, 1);
      const first = await waitFor('the first packet down', () => t.receiver.report().packets > 0 && Date.now());
      await waitFor('300 ms after it', () => Date.now() - first >= 300 && true);
      const early = t.receiver.report().frames;
      assert.ok(early < 35, `${early} of 50 frames within 300 ms of the first: not paced`);
      const r = await waitFor('the whole second', () => t.receiver.report().frames >= 50 && t.receiver.report(), 10000);
      await sleep(100);
      assert.equal(t.receiver.report().frames, 50, 'exactly the audio sent, in 20 ms frames');
      assert.equal(r.codec, k.codec);
      assert.equal(r.pt, k.pt);
      assert.equal(r.layout, k.hear ?? k.layout);
      assert.equal(r.sim, sim);
      assert.equal(r.channel, 2);
      assert.equal(r.hisilicon, !!k.audio.hisilicon);
      assert.equal(r.seqGaps, 0);
      // our own sequence numbers and timestamps: consecutive, 20 ms apart
      const pk = t.audioPackets;
      for (let i = 1; i < pk.length; i++) {
        assert.equal(pk[i].seq, (pk[i - 1].seq + 1) & 0xffff);
        assert.equal(pk[i].timestamp - pk[i - 1].timestamp, 20, `timestamps ${pk[i - 1].timestamp} -> ${pk[i].timestamp}`);
      }
      const pcm = t.receiver.pcm;
      assert.equal(pcm.length, sent);
      const { hz, loudSamples } = dominantHz(pcm);
      assert.equal(hz, 1000);
      assert.ok(loudSamples > sent * 0.95, `tone lasts ${loudSamples} of ${sent} samples`);
      assert.equal(await metric(gw, 'gw_intercom_uplink_frames_total'), 50);
    });
  }

  it("a UDP terminal (2019) hears the tone through the listener's socket, at its own address", async () => {
    await boot({ maxBufferMs: 2000 });
    const sim = '19912340000';
    const talk = await openTalk(gw, { simNo: sim, chanId: 3 });
    const sock = dgram.createSocket('udp4');
    sock.bind(0, '127.0.0.1');
    await once(sock, 'listening');
    const receiver = new TalkReceiver({ layout: '2019', keepSamples: 8000 * 5 });
    sock.on('message', (m) => receiver.pushDatagram(m));
    try {
      const port = gw.ports['jt1078-ingest.livePort2019:udp'];
      const { packets } = terminalPackets({ sim, channel: 3, layout: '2019' });
      for (let i = 0; i < packets.length; i++) {
        sock.send(packets[i], port, '127.0.0.1');
        if (i % 16 === 15) await sleep(2); // loopback buffers are small: a capture at once would lose datagrams
      }
      await gw.waitReady(talk.reqId);
      const c = await client(talk.taUrl!);
      sendTone(c, 0.4);
      const r = await waitFor('20 frames', () => receiver.report().frames >= 20 && receiver.report());
      assert.deepEqual([r.layout, r.sim, r.channel, r.codec], ['2019', sim, 3, 'g711a']);
      assert.equal(dominantHz(receiver.pcm).hz, 1000);
    } finally {
      sock.close();
    }
  });

  it("a terminal that has sent no audio yet gets the site's defaultCodec", async () => {
    await boot({ defaultCodec: 'g711u' });
    const sim = '13800002323';
    const talk = await openTalk(gw, { simNo: sim, chanId: 1 });
    const port = gw.ports['jt1078-ingest.livePort2013'];
    const t = await Terminal.connect(port, { layout: '2013' });
    terminals.push(t);
    // the capture's video only
    const { packets, audio } = terminalPackets({ sim, channel: 1, layout: '2013' });
    const isAudio = new Set(audio);
    t.write(packets.filter((p) => !isAudio.has(p)));
    for (let i = 0; i < 100; i++) {
      const st = await gw.api('GET', `/strm/status?reqId=${talk.reqId}`);
      if (st.json.data[0].bytesIn > 0) break;
      await sleep(20);
    }
    const c = await client(talk.taUrl!);
    sendTone(c, 0.2);
    const r = await waitFor('10 frames', () => t.receiver.report().frames >= 10 && t.receiver.report());
    assert.equal(r.codec, 'g711u');
    assert.equal(r.pt, 7);
    assert.equal(dominantHz(t.receiver.pcm).hz, 1000);
  });

  it("downlink: the terminal's audio comes back on the taUrl socket as PCM16, or as the fmt asked", async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '13800003333', chanId: 1 });
    const t = await terminal({ sim: '13800003333', channel: 1, layout: '2013' });
    await gw.waitReady(talk.reqId);
    const c = await client(talk.taUrl!);
    await sleep(50);
    const { audio } = terminalPackets({ sim: '13800003333', channel: 1, layout: '2013' });
    // later timestamps than the first push: the same audio again, continuing the terminal's timeline
    const again = terminalPackets({ sim: '13800003333', channel: 1, layout: '2013' }).packets;
    t.write(again);
    await waitFor('downlink audio', () => c.messages.length >= 20);
    const dec = createDecoder({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 })!;
    const hex = (x: Int16Array): string => Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('hex');
    const frames = new Set(audio.map((p) => hex(dec.decode(p.subarray(p.length - 160)))));
    for (const m of c.messages.slice(0, 20)) {
      assert.equal(m.length % 2, 0);
      const pcm = new Int16Array(m.length / 2);
      for (let i = 0; i < pcm.length; i++) pcm[i] = m.readInt16LE(2 * i);
      assert.ok(frames.has(hex(pcm)), "a decoded frame of the terminal's audio");
    }
    c.ws.close();
    await c.closedP;

    // fmt=g711a: A-law decoded and encoded again is the terminal's own bytes
    const a = await client(`${talk.taUrl!}&fmt=g711a`);
    await sleep(50);
    t.write(terminalPackets({ sim: '13800003333', channel: 1, layout: '2013' }).packets);
    await waitFor('downlink A-law', () => a.messages.length >= 10);
    const raw = new Set(audio.map((p) => p.subarray(p.length - 160).toString('hex')));
    for (const m of a.messages.slice(0, 10)) assert.ok(raw.has(m.toString('hex')));
    assert.ok((await metric(gw, 'gw_intercom_downlink_frames_total')) >= 30);
  });

  it('refuses: bad token 4401, not an intercom request 4403, bad fmt 4400, a second talker 4409', async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '13800004444', chanId: 1 });
    const av = await openTalk(gw, { simNo: '13800004444', chanId: 2, dataTyp: 0 });
    const base = talk.taUrl!.slice(0, talk.taUrl!.indexOf('/talk/'));
    const cases: Array<[string, number, RegExp]> = [
      [talk.taUrl!.replace('token=talk-token', 'token=wrong'), 4401, /token/],
      [`${base}/talk/13800004444_1_1?reqId=nope12345&token=talk-token`, 4401, /reqId/],
      [talk.taUrl!.replace('/talk/13800004444_1_1', '/talk/13800004444_2_1'), 4401, /token|reqId/],
      [`${base}/talk/13800004444_2_1?reqId=${av.reqId}&token=talk-token`, 4403, /intercom/],
      [`${talk.taUrl!}&fmt=mp3`, 4400, /fmt/],
      [`${base}/talk/%E0%A4%A?reqId=${talk.reqId}&token=talk-token`, 4401, /token/],
      [`${base}/talk-stomp?reqId=${talk.reqId}&token=bad`, 4401, /token/],
      [`${base}/talk-stomp?reqId=${av.reqId}&token=talk-token`, 4403, /intercom/],
    ];
    for (const [url, code, reason] of cases) {
      const c = await client(url);
      const closed = await c.closedP;
      assert.equal(closed.code, code, url);
      assert.match(closed.reason, reason);
    }
    const first = await client(talk.taUrl!);
    const second = await client(talk.taUrl!);
    const closed = await second.closedP;
    assert.equal(closed.code, 4409);
    assert.match(closed.reason, /another client is talking/);
    assert.equal(first.closed, undefined, 'the first talker stays');
    const stomp = await client(talk.wsUrl!, ['v12.stomp']);
    assert.equal((await stomp.closedP).code, 4409);
    first.ws.close();
    await first.closedP;
    // the channel is free again
    const third = await client(talk.taUrl!);
    await sleep(100);
    assert.equal(third.closed, undefined);
    assert.equal(await metric(gw, 'gw_intercom_talks_refused_total{reason="busy"}'), 2);
    assert.equal(await metric(gw, 'gw_intercom_talks_refused_total{reason="token"}'), 5);
  });

  it('closes with a code, never crashes: text 1003, odd PCM 1007, oversized 1009', async () => {
    await boot({ maxMessageBytes: 4096 });
    const talk = await openTalk(gw, { simNo: '13800005555', chanId: 1 });
    const expect = async (send: (c: Client) => void, code: number, reason?: RegExp): Promise<void> => {
      const c = await client(talk.taUrl!);
      send(c);
      const closed = await c.closedP;
      assert.equal(closed.code, code);
      if (reason) assert.match(closed.reason, reason);
    };
    await expect((c) => c.send('hello'), 1003, /binary/);
    await expect((c) => c.send(Buffer.alloc(321)), 1007, /odd length/);
    await expect((c) => c.send(Buffer.alloc(5000)), 1009);
    // and the gateway still serves
    const ok = await client(talk.taUrl!);
    ok.send(Buffer.alloc(320));
    await sleep(100);
    assert.equal(ok.closed, undefined);
    assert.equal((await gw.api('GET', '/strm/status')).json.errCode, 0);
    assert.equal(await metric(gw, 'gw_intercom_malformed_messages_total{proto="talk"}'), 2);
  });

  it('the request closing, or the terminal leaving, closes the talk socket with a reason', async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '13800006666', chanId: 1 });
    const t = await terminal({ sim: '13800006666', channel: 1, layout: '2013' });
    await gw.waitReady(talk.reqId);
    const c = await client(talk.taUrl!);
    await sleep(50);
    t.close();
    const left = await c.closedP;
    assert.equal(left.code, 4410);
    assert.match(left.reason, /terminal left/);

    const c2 = await client(talk.taUrl!);
    await sleep(50);
    assert.equal(c2.closed, undefined, 'a talker may wait for the terminal to come back');
    const r = await gw.api('POST', '/strm/close', { reqIds: [talk.reqId] });
    assert.equal(r.json.data[0].closed, true);
    const closed = await c2.closedP;
    assert.equal(closed.code, 4410);
    assert.match(closed.reason, /request closed: clientReq/);
  });

  it('a pause leaves a gap, not a backlog: the packets after it carry the later time, nothing is owed', async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '13800007878', chanId: 1 });
    const t = await terminal({ sim: '13800007878', channel: 1, layout: '2013' });
    await gw.waitReady(talk.reqId);
    const c = await client(talk.taUrl!);
    sendTone(c, 0.2);
    await waitFor('the first spurt', () => t.receiver.report().frames >= 10);
    await sleep(500);
    sendTone(c, 0.2);
    await waitFor('the second spurt', () => t.receiver.report().frames >= 20);
    await sleep(200);
    assert.equal(t.receiver.report().frames, 20, 'no silence was made up for the pause');
    const ts = t.audioPackets.map((p) => p.timestamp);
    assert.ok(ts[10] - ts[9] >= 400, `timestamps ${ts[9]} -> ${ts[10]} across a 500 ms pause`);
    assert.deepEqual(
      ts.slice(11).map((x, i) => x - ts[10 + i]),
      new Array(9).fill(20),
    );
  });

  it('a client that closes right after speaking still has its last words sent, in real time', async () => {
    await boot();
    const talk = await openTalk(gw, { simNo: '13800007979', chanId: 1 });
    const t = await terminal({ sim: '13800007979', channel: 1, layout: '2013' });
    await gw.waitReady(talk.reqId);
    const c = await client(talk.taUrl!);
    sendTone(c, 0.3);
    c.ws.close(1000, 'over');
    await c.closedP;
    await waitFor('the 300 ms said', () => t.receiver.report().frames >= 15);
    await sleep(100);
    assert.equal(t.receiver.report().frames, 15);
    assert.equal(dominantHz(t.receiver.pcm).hz, 1000);
    const again = await client(talk.taUrl!);
    await sleep(100);
    assert.equal(again.closed, undefined, 'the channel is free once the last words went out');
  });

  it('a client sending faster than real time is cut at the buffer, not relayed in a burst nor queued', async () => {
    await boot({ maxBufferMs: 400 });
    const talk = await openTalk(gw, { simNo: '13800007777', chanId: 1 });
    const t = await terminal({ sim: '13800007777', channel: 1, layout: '2013' });
    await gw.waitReady(talk.reqId);
    const c = await client(talk.taUrl!);
    // 3 s of audio as fast as the socket takes it
    const sent = sendTone(c, 3);
    await waitFor('packets down', () => t.receiver.report().frames > 0);
    // until nothing more comes for 300 ms
    let last = -1;
    for (;;) {
      await sleep(300);
      const n = t.receiver.report().frames;
      if (n === last) break;
      last = n;
    }
    const frames = t.receiver.report().frames;
    const dropped = await metric(gw, 'gw_intercom_uplink_dropped_samples_total{reason="overflow"}');
    const accepted = sent - dropped;
    // what was taken in is what went out (the last frame padded), and it is at most the buffer plus what left meanwhile
    assert.ok(frames * 160 >= accepted && frames * 160 < accepted + 160, `${frames} frames for ${accepted} samples taken`);
    assert.ok(frames <= 30, `${frames} frames: the buffer holds 400 ms (20 frames) plus the few sent while the burst arrived`);
    assert.ok(dropped >= sent - 30 * 160, `${dropped} samples dropped of ${sent}`);
  });
});
