import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { chainVia, playQuery, playVia, wsPlayerSocket, type RouteRequest } from '../index';
import { h264TestPattern } from '../formats';
import { parseH264Sps } from '../formats/h264';
import { probeVideo } from '../testkit';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('plays: via, WebSocket player sockets, the H.264 test pattern', function () {
  this.timeout(30_000);

  it("playVia: none, a registered stage, or a refusal saying why; chainVia puts the play's stage first", () => {
    const bus = { stages: () => ['aac', 'video-thinner'] };
    const q = (s: string) => new URLSearchParams(s);
    assert.deepEqual(playVia(q('reqId=r&token=t'), bus), { ok: true, via: undefined });
    assert.deepEqual(playVia(q('via='), bus), { ok: true, via: undefined });
    assert.deepEqual(playVia(q('via=video-thinner'), bus), { ok: true, via: 'video-thinner' });
    assert.deepEqual(playVia(q('via=nope'), bus), { ok: false, reason: "via: no stage 'nope' on this gateway (stages: aac, video-thinner)" });
    assert.deepEqual(playVia(q('via=a&via=b'), bus), { ok: false, reason: 'via: give one stage' });
    assert.deepEqual(playVia(q('via=%3Cscript%3E'), bus), { ok: false, reason: 'via: not a stage name (lower-case letters, digits and dashes)' });
    const aac = { stage: 'aac', params: { sampleRate: 8000 } };
    assert.equal(chainVia(undefined, aac), aac);
    assert.equal(chainVia('video-thinner', undefined), 'video-thinner');
    assert.deepEqual(chainVia('video-thinner', aac), ['video-thinner', aac]);
    assert.deepEqual(chainVia('a', ['b', 'c']), ['a', 'b', 'c']);
    assert.equal(playQuery('r 1', 't&', 'video-thinner'), 'reqId=r%201&token=t%26&via=video-thinner');
  });

  it('wsPlayerSocket: not writable past its mark while the peer does not read, drains when it does, holds nothing once sent', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    await new Promise((r) => wss.once('listening', r));
    const accepted = new Promise<WebSocket>((r) => wss.once('connection', r));
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, { perMessageDeflate: false });
    await new Promise((r) => client.once('open', r));
    client.pause();
    let received = 0;
    client.on('message', (m: Buffer) => {
      received += m.length;
    });
    const ws = await accepted;
    const socket = wsPlayerSocket(ws, { remote: '127.0.0.1:1' } as RouteRequest, { highWaterBytes: 256 * 1024 });
    let drained = 0;
    socket.onDrain(() => drained++);
    const chunk = Buffer.alloc(64 * 1024, 7);
    let sent = 0;
    // the kernel's buffers fill first; then the socket holds what is sent and says so
    while (socket.writable() && sent < 256 * 1024 * 1024) {
      socket.send(chunk);
      sent += chunk.length;
      if (sent % (4 * 1024 * 1024) === 0) await turn();
    }
    assert.equal(socket.writable(), false, `not writable after ${sent} bytes`);
    assert.equal(socket.holdsPayloads(), true);
    assert.ok(ws.bufferedAmount >= 256 * 1024);
    assert.equal(drained, 0);
    const drain = new Promise<void>((r) =>
      socket.onDrain(() => {
        drained++;
        r();
      }),
    );
    client.resume();
    await drain;
    assert.equal(drained, 1, 'one drain');
    assert.equal(socket.writable(), true);
    while (received < sent) await turn();
    assert.equal(socket.holdsPayloads(), false, 'everything sent was taken: nothing held');
    const closed = new Promise<number>((r) => client.once('close', (c) => r(c)));
    socket.end('stream closed');
    assert.equal(await closed, 1000);
    wss.close();
  });

  it('wsPlayerSocket refuses with 4000 + the HTTP status, and its reason', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((r) => wss.once('listening', r));
    wss.once('connection', (ws) => wsPlayerSocket(ws, { remote: 'x:1' } as RouteRequest).refuse(401, 'unauthorized'));
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
    const [code, reason] = await new Promise<[number, string]>((r) => client.once('close', (c, why) => r([c, why.toString()])));
    assert.deepEqual([code, reason], [4401, 'unauthorized']);
    wss.close();
  });

  it('h264TestPattern: Constrained Baseline H.264 of its size that ffprobe decodes, a key frame per GOP, made without an encoder', async () => {
    const p = h264TestPattern({ width: 176, height: 144 });
    const sps = parseH264Sps(p.sps);
    assert.deepEqual([sps.width, sps.height, sps.profile], [176, 144, 'Constrained Baseline']);
    const frames = Array.from({ length: 30 }, (_, n) => p.frame(n, 10));
    assert.deepEqual(
      frames.map((f) => f.keyframe).flatMap((k, i) => (k ? [i] : [])),
      [0, 10, 20],
    );
    assert.equal(p.frame(10, 10).payload, frames[10].payload, 'frames are made once');
    assert.notDeepEqual(frames[0].payload, frames[10].payload, 'each key frame of a cycle differs (the bars move)');
    const probe = await probeVideo(Buffer.concat(frames.map((f) => f.payload)), { format: 'h264' });
    assert.equal(`${probe.codec} ${probe.width}x${probe.height}`, 'h264 176x144');
    assert.deepEqual(probe.frames.map((f) => f.pictType).join(''), `I${'P'.repeat(9)}`.repeat(3));
    assert.equal(probe.errors, '');
    assert.throws(() => h264TestPattern({ width: 100 }), /multiples of 16/);
  });
});
