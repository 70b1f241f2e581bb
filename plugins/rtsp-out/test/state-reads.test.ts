/**
 * An RTSP session over TCP reads none of its socket's Writable state from its PLAY on: the connection, the socket's
 * only writer, keeps its own account of what it has in node's Writable (plugin-sdk WritableAccount says why: node
 * 20.20's Writable state takes a class by which lazily added fields a socket has used, so a unit's path that reads it
 * learns classes that no socket has by the first memory-reducing collection, which then throws that code away).
 */
import assert from 'node:assert/strict';
import { kernelOf } from '../../../test/support/kernel-of';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { waitFor } from '../../../test/support/until';
import { countFromFirstWrite, type FirstWriteWatch } from '../../../test/support/state-reads';
import { filledFrame as frame } from '../../flv-out/test/helpers';
import { RtspSession } from '../src/session';
import { RawRtsp, depacketizeH264, startRtspGateway, type RtspGateway } from './helpers';

describe("rtsp-out: a TCP session in step reads none of node's stream state", function () {
  this.timeout(60_000);
  let g: RtspGateway | undefined;
  let watch: FirstWriteWatch | undefined;
  afterEach(async () => {
    watch?.restore();
    await g?.stop();
    g = undefined;
  });

  it("answers PLAY, sends the GOP and 30 live units, and its sender reports, without one read of the Writable's state", async () => {
    g = await startRtspGateway();
    const open = await g.open('13900001201', { dataTyp: 1 });
    const pub = kernelOf(g.gw).bus.get(open.stream)!.attachPublisher();
    pub.setTrack(fixtureClip().video);
    let i = 0;
    for (; i < 3; i++) pub.push(frame(i, 4096));
    await g.gw.waitReady(open.reqId);

    // from the bus's first unit for the session on: it comes while PLAY is answered, before the answer is written
    const w = (watch = countFromFirstWrite(RtspSession.prototype, (s) => s.socket));
    const c = await RawRtsp.connect(g.port);
    assert.equal((await c.request('DESCRIBE', open.url)).status, 200);
    const s = await c.request('SETUP', `${open.url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    assert.equal(s.status, 200);
    assert.equal((await c.request('PLAY', open.url, { Session: s.headers.get('session')!.split(';')[0] })).status, 200);
    const frames = (): number => depacketizeH264(c.frames.get(0) ?? []).size;
    await waitFor('the GOP', () => frames() === i, 10_000);
    for (const end = i + 30; i < end; i++) {
      pub.push(frame(i, 4096));
      const want = i + 1;
      await waitFor(`unit ${i}`, () => frames() === want, 10_000);
    }
    const reads = w.reads;
    assert.ok(reads, 'the session got units');
    w.restore();
    // a sender report goes with the first unit (RTCP on channel 1): its writes are counted too
    assert.ok((c.frames.get(1)?.length ?? 0) >= 1, 'no sender report came');
    assert.equal(reads.count, 0, `node's Writable state was read ${reads.count} times from the session's first unit on`);
    c.close();
  });
});
