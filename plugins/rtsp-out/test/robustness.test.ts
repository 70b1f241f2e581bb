/**
 * What clients that misbehave get: malformed requests answered with a clear status and a (rate-limited) log line,
 * never a crash; a UDP reader that vanishes is timed out (one that keeps sending receiver reports is not); a TCP
 * reader that stops reading is dropped by the bus's slow-reader policy.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { rtcpPacketTypes } from '../src/rtcp';
import { prng } from '../../../test/support/prng';
import { RawRtsp, h264Clip, startRtspGateway, udpSocket, type RtspGateway } from './helpers';
import { waitFor } from '../../../test/support/until';

/** Writes bytes on a fresh connection; resolves with everything the server sent back until it closed (or `ms`). */
function exchange(port: number, data: Buffer | string, ms = 2000): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(data));
    let text = '';
    let closed = false;
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    s.on('error', () => undefined);
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ text, closed });
    }, ms);
    s.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ text, closed });
    });
  });
}

describe('rtsp-out: malformed requests', function () {
  this.timeout(30_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway({}, [], true);
  });
  after(() => g.stop());

  const cases: Array<{ what: string; data: string | Buffer; status: RegExp; closed: boolean }> = [
    { what: 'a request line that is not RTSP', data: 'HELLO\r\n\r\n', status: /^RTSP\/1\.0 400 Bad Request\r\n/, closed: true },
    { what: 'HTTP on the RTSP port', data: 'GET / HTTP/1.1\r\nHost: x\r\n\r\n', status: /^RTSP\/1\.0 505 RTSP Version Not Supported\r\n/, closed: true },
    {
      what: 'a header block over 8 KiB',
      data: `OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Pad: ${'a'.repeat(9000)}`,
      status: /^RTSP\/1\.0 400 Bad Request\r\n/,
      closed: true,
    },
    {
      what: 'a header line without a colon',
      data: 'OPTIONS * RTSP/1.0\r\nCSeq: 7\r\nnot a header\r\n\r\n',
      status: /^RTSP\/1\.0 400 Bad Request\r\nCSeq: 7\r\n/,
      closed: true,
    },
    {
      what: 'a body over the limit',
      data: 'SET_PARAMETER * RTSP/1.0\r\nCSeq: 2\r\nContent-Length: 1000000\r\n\r\n',
      status: /^RTSP\/1\.0 413 Request Entity Too Large\r\nCSeq: 2\r\n/,
      closed: true,
    },
    { what: 'a bad Content-Length', data: 'OPTIONS * RTSP/1.0\r\nCSeq: 3\r\nContent-Length: -5\r\n\r\n', status: /^RTSP\/1\.0 400 /, closed: true },
    {
      what: 'a CSeq that is not a number (not echoed)',
      data: 'OPTIONS * RTSP/1.0\r\nCSeq: 1\rX: y\r\n\r\n',
      status: /^RTSP\/1\.0 400 Bad Request\r\nServer: /,
      closed: false,
    },
  ];
  for (const c of cases) {
    it(`${c.what}: ${/\d{3}/.exec(c.status.source)![0]}${c.closed ? ', connection closed' : ''}`, async () => {
      const r = await exchange(g.port, c.data, 1500);
      assert.match(r.text, c.status);
      assert.equal(r.closed, c.closed, c.closed ? 'the connection is closed' : 'the connection stays open');
    });
  }

  it('a missing CSeq gets 400 and the connection goes on; 40 pipelined requests close it', async () => {
    const c = await RawRtsp.connect(g.port);
    const r = await c.sendRaw('OPTIONS * RTSP/1.0\r\n\r\n');
    assert.equal(r.status, 400);
    assert.equal((await c.request('OPTIONS', '*')).status, 200);
    c.socket.write('OPTIONS * RTSP/1.0\r\nCSeq: 9\r\n\r\n'.repeat(40));
    await c.ended;
    assert.ok(c.responses.length < 40);
  });

  it('random bytes: answered or closed, never a crash; the server serves the next client; one log line per address', async () => {
    const rnd = prng(1078);
    for (let i = 0; i < 20; i++) {
      const junk = Buffer.alloc(1 + Math.floor(rnd() * 4096));
      for (let k = 0; k < junk.length; k++) junk[k] = Math.floor(rnd() * 256);
      if (i % 2 === 0) junk.write('OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n', 0, 'latin1');
      const r = await exchange(g.port, junk, 150);
      assert.ok(r.text === '' || /^RTSP\/1\.0 \d{3} /.test(r.text), `answered as RTSP: ${JSON.stringify(r.text.slice(0, 40))}`);
    }
    const c = await RawRtsp.connect(g.port);
    assert.equal((await c.request('OPTIONS', '*')).status, 200);
    c.close();
    const lines = g.gw.logs.filter((l) => l.msg === 'malformed RTSP request');
    assert.ok(lines.length >= 1, 'logged');
    assert.ok(lines.length <= 3, `rate-limited per address (${lines.length} lines)`);
    const metrics = await (await fetch(`${g.gw.baseUrl}/metrics`)).text();
    const bad = Number(/gw_rtsp_out_bad_requests_total (\d+)/.exec(metrics)?.[1]);
    assert.ok(bad >= cases.length, `counted: ${bad}`);
  });
});

describe('rtsp-out: readers that vanish or stop reading', function () {
  this.timeout(40_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway({ sessionTimeoutSec: 1, maxPlayerBacklogBytes: 65536 }, [], true);
  });
  after(() => g.stop());

  it('a UDP reader lives on its receiver reports without its connection, and is timed out when they stop', async () => {
    const open = await g.looping('13900002001', h264Clip());
    const rtp = await udpSocket();
    const rtcp = await udpSocket();
    let packets = 0;
    const rtcpTypes: number[] = [];
    rtp.on('message', () => {
      packets++;
    });
    rtcp.on('message', (m) => rtcpTypes.push(...rtcpPacketTypes(m)));
    const c = await RawRtsp.connect(g.port);
    const base = open.url.split('?')[0];
    const query = open.url.split('?')[1];
    assert.equal((await c.request('DESCRIBE', open.url)).status, 200);
    const s = await c.request('SETUP', `${base}/trackID=0?${query}`, { Transport: `RTP/AVP;unicast;client_port=${rtp.address().port}-${rtcp.address().port}` });
    assert.equal(s.status, 200);
    const transport = s.headers.get('transport')!;
    assert.match(transport, new RegExp(`^RTP/AVP;unicast;client_port=${rtp.address().port}-${rtcp.address().port};server_port=\\d+-\\d+$`));
    const serverRtcp = Number(/server_port=\d+-(\d+)/.exec(transport)![1]);
    assert.equal(serverRtcp, g.gw.ports['rtsp-out.rtcpPort:udp']);
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await c.request('PLAY', open.url, { Session: session })).status, 200);
    await waitFor('RTP over UDP', () => packets > 20);
    // the client's control connection goes; its receiver reports keep the session (RFC 2326: sessions outlive connections)
    c.close();
    const rr = Buffer.from([0x80, 201, 0, 1, 0, 0, 0, 1]);
    const keepAlive = setInterval(() => rtcp.send(rr, serverRtcp, '127.0.0.1'), 200);
    await new Promise((r) => setTimeout(r, 3000));
    const before = packets;
    await waitFor('more RTP while reports come', () => packets > before + 20);
    assert.equal((await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players, 1, 'still a player after 3x the timeout');
    // the reader vanishes
    clearInterval(keepAlive);
    await waitFor('the session timed out', async () => (await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players === 0);
    assert.ok(g.gw.logs.some((l) => l.msg === 'RTSP session timed out' && l.session === session));
    await waitFor('an RTCP BYE', () => rtcpTypes.includes(203));
    assert.ok(rtcpTypes.includes(200), 'sender reports came over UDP too');
    const stopped = packets;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(packets, stopped, 'no RTP after the timeout');
    await open.end(rtp, rtcp);
  });

  it('a session set up but never played times out too', async () => {
    const open = await g.looping('13900002002', h264Clip());
    const c = await RawRtsp.connect(g.port);
    const s = await c.request('SETUP', `${open.url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast' });
    const session = s.headers.get('session')!.split(';')[0];
    // requests that do not name the session keep the connection busy, not the session alive
    const chatter = setInterval(() => void c.request('OPTIONS', '*').catch(() => undefined), 250);
    await waitFor('timed out', () => g.gw.logs.some((l) => l.msg === 'RTSP session timed out' && l.session === session));
    clearInterval(chatter);
    assert.equal((await c.request('PLAY', open.url, { Session: session })).status, 454);
    await open.end(c);
  });

  it('a TCP reader that stops reading is dropped by the bus (queue capped, never grown)', async () => {
    const open = await g.open('13900002003');
    const pub0 = g.gw.publish(open.stream, h264Clip(), { realtime: false });
    await pub0.done;
    await g.gw.waitReady(open.reqId);
    const c = await RawRtsp.connect(g.port);
    const s = await c.request('SETUP', `${open.url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast' });
    const session = s.headers.get('session')!.split(';')[0];
    assert.equal((await c.request('PLAY', open.url, { Session: session })).status, 200);
    c.socket.pause();
    // 300 passes of the clip at once: far more than the socket buffers and the 64 KiB queue cap hold
    const pub = g.gw.publish(open.stream, h264Clip(), { realtime: false, loop: 300 });
    await pub.done;
    await waitFor('the reader dropped', () => g.gw.logs.some((l) => l.msg === 'dropping an RTSP reader that stopped reading' && l.session === session));
    const stream = g.gw.bus.get(open.stream)!;
    assert.equal(stream.stats().queuedBytes, 0, 'nothing queued for it any more');
    c.socket.resume();
    await c.ended;
    assert.equal((await g.gw.api('GET', `/strm/status?reqId=${open.reqId}`)).json.data[0].players, 0);
    await g.gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});
