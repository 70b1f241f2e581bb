/**
 * wsUrl (STOMP 1.2 on /talk-stomp) end to end on loopback, and the frame reader on its own.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { negotiateHeartBeat, serializeFrame, StompReader, StompSyntaxError, type StompFrame } from '../src/stomp';
import { bootGateway, Client, dominantHz, openTalk, pcmBytes, sleep, Terminal, terminalPackets, tone } from './helpers';
import { waitFor } from '../../../test/support/until';

/** a client frame as bytes (headers as given, body with content-length unless told otherwise) */
function frame(command: string, headers: Record<string, string>, body?: Buffer, contentLength = true): Buffer {
  let head = `${command}\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}:${v}\n`;
  if (body && contentLength) head += `content-length:${body.length}\n`;
  return Buffer.concat([Buffer.from(head + '\n'), body ?? Buffer.alloc(0), Buffer.from([0])]);
}

/** the server frames a client got (binary or text messages), heart-beats left out */
function serverFrames(c: Client): Array<{ command: string; headers: Record<string, string>; body: string }> {
  const out: Array<{ command: string; headers: Record<string, string>; body: string }> = [];
  for (const m of [...c.messages.map((b) => b.toString('latin1')), ...c.texts]) {
    if (/^\r?\n$/.test(m)) continue;
    const [head, ...rest] = m.split('\n\n');
    const lines = head.split('\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':'))] = l.slice(l.indexOf(':') + 1);
    out.push({ command: lines[0], headers, body: rest.join('\n\n').replace(/\0$/, '') });
  }
  return out;
}

describe('intercom: wsUrl (STOMP 1.2)', function () {
  this.timeout(60000);
  let gw: TestGateway;
  const clients: Client[] = [];
  const terminals: Terminal[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.ws.terminate();
    for (const t of terminals.splice(0)) t.close();
    await gw?.stop();
  });
  async function stomp(url: string): Promise<Client> {
    const c = await Client.open(url, ['v12.stomp']);
    clients.push(c);
    return c;
  }

  it('CONNECT → CONNECTED with heart-beats, SEND a tone to /talk/{reqId} → the terminal hears it, RECEIPT, DISCONNECT', async () => {
    ({ gw } = await bootGateway({ stompHeartBeatMs: 200, maxBufferMs: 2000 }));
    const talk = await openTalk(gw, { simNo: '13800008888', chanId: 1 });
    const t = await Terminal.connect(gw.ports['jt1078-ingest.livePort2013'], { layout: '2013' });
    terminals.push(t);
    t.write(terminalPackets({ sim: '13800008888', channel: 1, layout: '2013' }).packets);
    await gw.waitReady(talk.reqId);
    const c = await stomp(talk.wsUrl!);
    assert.equal(c.ws.protocol, 'v12.stomp');
    c.send(frame('CONNECT', { 'accept-version': '1.0,1.1,1.2', host: '127.0.0.1', 'heart-beat': '0,300' }));
    const connected = await waitFor('CONNECTED', () => serverFrames(c).find((f) => f.command === 'CONNECTED'));
    assert.equal(connected.headers.version, '1.2');
    // we send every max(200, 300) ms and expect nothing (the client offered 0)
    assert.equal(connected.headers['heart-beat'], '200,200');
    await waitFor('a heart-beat', () => c.messages.some((m) => m.toString() === '\n') || c.texts.includes('\n'), 3000);

    const dest = `/talk/${talk.reqId}`;
    for (let at = 0; at < 8000; at += 160) {
      const last = at + 160 >= 8000;
      c.send(
        frame(
          'SEND',
          { destination: dest, 'content-type': 'application/octet-stream', ...(last ? { receipt: 'tone-sent' } : {}) },
          pcmBytes(tone(1000, 160, at)),
        ),
      );
    }
    const receipt = await waitFor('RECEIPT', () => serverFrames(c).find((f) => f.command === 'RECEIPT'));
    assert.equal(receipt.headers['receipt-id'], 'tone-sent');
    await waitFor('the whole second', () => t.receiver.report().frames >= 50, 10000);
    const r = t.receiver.report();
    assert.equal(r.codec, 'g711a');
    assert.equal(r.layout, '2013');
    const { hz, loudSamples } = dominantHz(t.receiver.pcm);
    assert.equal(hz, 1000);
    assert.ok(loudSamples > 7600);

    c.send(frame('DISCONNECT', { receipt: 'bye' }));
    const closed = await c.closedP;
    assert.equal(closed.code, 1000);
    assert.ok(serverFrames(c).some((f) => f.command === 'RECEIPT' && f.headers['receipt-id'] === 'bye'));
    assert.ok(!serverFrames(c).some((f) => f.command === 'ERROR'));
  });

  it("SUBSCRIBE to /talk/{reqId}: the terminal's audio as MESSAGE frames", async () => {
    ({ gw } = await bootGateway());
    const talk = await openTalk(gw, { simNo: '13800009999', chanId: 1 });
    const t = await Terminal.connect(gw.ports['jt1078-ingest.livePort2013'], { layout: '2013' });
    terminals.push(t);
    t.write(terminalPackets({ sim: '13800009999', channel: 1, layout: '2013' }).packets);
    await gw.waitReady(talk.reqId);
    const c = await stomp(talk.wsUrl!);
    c.send(frame('STOMP', { 'accept-version': '1.2', host: 'x' }));
    c.send(frame('SUBSCRIBE', { id: 'sub-0', destination: `/talk/${talk.reqId}`, receipt: 'subscribed' }));
    await waitFor('RECEIPT', () => serverFrames(c).find((f) => f.command === 'RECEIPT'));
    t.write(terminalPackets({ sim: '13800009999', channel: 1, layout: '2013' }).packets);
    const msgs = await waitFor('MESSAGE frames', () => {
      const m = serverFrames(c).filter((f) => f.command === 'MESSAGE');
      return m.length >= 5 && m;
    });
    assert.equal(msgs[0].headers.subscription, 'sub-0');
    assert.equal(msgs[0].headers.destination, `/talk/${talk.reqId}`);
    assert.equal(msgs[0].headers['content-length'], '320', '160 samples of PCM16');
  });

  it('ERROR frames say what was wrong, then the connection closes', async () => {
    ({ gw } = await bootGateway());
    const talk = await openTalk(gw, { simNo: '13800001234', chanId: 1 });
    const connect = frame('CONNECT', { 'accept-version': '1.2', host: 'x' });
    const cases: Array<{ name: string; frames: Buffer[]; message: RegExp; body?: RegExp; receipt?: string }> = [
      {
        name: 'wrong destination',
        frames: [connect, frame('SEND', { destination: '/talk/someone-else', receipt: 'r1' }, Buffer.alloc(320))],
        message: /wrong destination/,
        body: /someone-else/,
        receipt: 'r1',
      },
      { name: 'SEND before CONNECT', frames: [frame('SEND', { destination: `/talk/${talk.reqId}` }, Buffer.alloc(320))], message: /not connected/ },
      { name: 'unknown command', frames: [connect, Buffer.from('HELLO\n\n\0')], message: /malformed/, body: /unknown command 'HELLO'/ },
      {
        name: 'content-length lies',
        frames: [connect, Buffer.concat([Buffer.from(`SEND\ndestination:/talk/${talk.reqId}\ncontent-length:10\n\n`), Buffer.alloc(20, 1), Buffer.from([0])])],
        message: /malformed/,
        body: /no NUL/,
      },
      {
        name: 'binary body without content-length',
        frames: [connect, frame('SEND', { destination: `/talk/${talk.reqId}` }, Buffer.alloc(4, 1), false)],
        message: /content-length/,
      },
      { name: 'odd PCM body', frames: [connect, frame('SEND', { destination: `/talk/${talk.reqId}` }, Buffer.alloc(3))], message: /malformed audio/ },
      { name: 'STOMP 1.0 only', frames: [frame('CONNECT', { 'accept-version': '1.0' })], message: /unsupported version/ },
      { name: 'bad header line', frames: [Buffer.from('CONNECT\nno-colon-here\n\n\0')], message: /malformed/ },
      { name: 'transactions', frames: [connect, frame('BEGIN', { transaction: 't1' })], message: /not supported/ },
    ];
    for (const k of cases) {
      const c = await stomp(talk.wsUrl!);
      for (const f of k.frames) c.send(f);
      const closed = await c.closedP;
      assert.equal(closed.code, 4400, k.name);
      const err = serverFrames(c).find((f) => f.command === 'ERROR');
      assert.ok(err, `${k.name}: an ERROR frame`);
      assert.match(err.headers.message, k.message, k.name);
      if (k.body) assert.match(err.body, k.body, k.name);
      if (k.receipt) assert.equal(err.headers['receipt-id'], k.receipt);
    }
    // the channel is free after each
    const ok = await stomp(talk.wsUrl!);
    ok.send(connect);
    await waitFor('CONNECTED', () => serverFrames(ok).find((f) => f.command === 'CONNECTED'));
  });

  it('a frame split over messages, several frames in one, and heart-beats between are read', () => {
    const r = new StompReader({ maxHeaderBytes: 1024, maxBodyBytes: 1000 });
    const body = Buffer.from([0, 1, 0, 2, 10, 0]);
    const send = frame('SEND', { destination: '/talk/x', 'a\\cb': 'c\\nd' }, body);
    const got: StompFrame[] = [];
    const beats = { n: 0 };
    const feed = (b: Buffer): void => {
      for (const e of r.push(b)) {
        if (e.type === 'frame') got.push(e.frame);
        else beats.n++;
      }
    };
    feed(Buffer.from('\n\r\n'));
    feed(send.subarray(0, 7));
    feed(send.subarray(7, 30));
    assert.equal(got.length, 0);
    feed(Buffer.concat([send.subarray(30), Buffer.from('\n'), frame('DISCONNECT', { receipt: '7' })]));
    assert.equal(got.length, 2);
    assert.equal(beats.n, 3);
    assert.equal(got[0].command, 'SEND');
    assert.ok(got[0].body.equals(body), 'NULs inside a body with content-length');
    assert.equal(got[0].headers.get('a:b'), 'c\nd', 'escapes decoded');
    assert.equal(got[1].headers.get('receipt'), '7');
    assert.equal(r.pending, 0);
    // bounded: headers that never end, a body over the limit
    assert.throws(() => new StompReader({ maxHeaderBytes: 64, maxBodyBytes: 10 }).push(Buffer.from('SEND\n' + 'x:y\n'.repeat(40))), StompSyntaxError);
    assert.throws(() => new StompReader({ maxHeaderBytes: 64, maxBodyBytes: 10 }).push(Buffer.from('SEND\ncontent-length:11\n\n')), /over the limit/);
    assert.throws(() => new StompReader({ maxHeaderBytes: 64, maxBodyBytes: 10 }).push(Buffer.from('SEND\nx:\\t\n\n\0')), /escape/);
    // server frames: escaped headers (not in CONNECTED), content-length with a body
    assert.equal(serializeFrame('ERROR', { message: 'a:b' }, 'hi').toString(), 'ERROR\nmessage:a\\cb\ncontent-length:2\n\nhi\0');
    assert.equal(serializeFrame('CONNECTED', { version: '1.2', 'heart-beat': '0,0' }).toString(), 'CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0');
  });

  it('heart-beat negotiation follows STOMP 1.2', () => {
    assert.deepEqual(negotiateHeartBeat(undefined, 10000), { header: '10000,10000', sendEveryMs: 0, expectEveryMs: 0 });
    assert.deepEqual(negotiateHeartBeat('0,0', 10000), { header: '10000,10000', sendEveryMs: 0, expectEveryMs: 0 });
    assert.deepEqual(negotiateHeartBeat('4000,20000', 10000), { header: '10000,10000', sendEveryMs: 20000, expectEveryMs: 10000 });
    assert.deepEqual(negotiateHeartBeat('30000,5000', 10000), { header: '10000,10000', sendEveryMs: 10000, expectEveryMs: 30000 });
    assert.deepEqual(negotiateHeartBeat('1000,1000', 0), { header: '0,0', sendEveryMs: 0, expectEveryMs: 0 });
    assert.equal(typeof negotiateHeartBeat('x,1', 10), 'string');
  });

  it('a client that stops its heart-beats is closed 4408', async () => {
    ({ gw } = await bootGateway({ stompHeartBeatMs: 100 }));
    const talk = await openTalk(gw, { simNo: '13800001235', chanId: 1 });
    const c = await stomp(talk.wsUrl!);
    c.send(frame('CONNECT', { 'accept-version': '1.2', host: 'x', 'heart-beat': '100,0' }));
    await waitFor('CONNECTED', () => serverFrames(c).find((f) => f.command === 'CONNECTED'));
    for (let i = 0; i < 5; i++) {
      await sleep(80);
      c.send('\n');
    }
    assert.equal(c.closed, undefined, 'alive while it beats');
    const closed = await c.closedP;
    assert.equal(closed.code, 4408);
    assert.match(serverFrames(c).find((f) => f.command === 'ERROR')!.headers.message, /heart-beat/);
  });
});
