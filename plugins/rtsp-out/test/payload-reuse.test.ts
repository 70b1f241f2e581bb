/**
 * An RTSP session over TCP answers MediaReader.holdsPayloads (its socket's unsent bytes), so a stream it reads reuses
 * payload memory (core/bus/payload-arena.ts) as one read by FLV players does. Here a publisher takes every frame's
 * memory from Publisher.alloc and marks each frame with a filler NAL unit carrying its number; one reader reads at
 * once, another stops reading for a while (its socket fills: the bus must not reuse what it still has to send) and
 * then goes on. Every frame each reader rebuilds from its RTP packets must be the frame of that number, byte for
 * byte, while chunks were reused.
 */
import assert from 'node:assert/strict';
import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises';
import { kernelOf } from '../../../test/support/kernel-of';
import { splitAnnexB } from '../../../plugin-sdk/formats';
import { videoUnit, type AccessUnit } from '../../../plugin-sdk';
import { RawRtsp, depacketizeH264, startRtspGateway, type RtspGateway } from './helpers';
import { fixtureClip } from '../../../test/support/fixture-clip';
import { waitFor } from '../../../test/support/until';

const FILLER = 12;
/** NAL types the packetizer or a player may add or drop around a frame (parameter sets, delimiters) */
const AROUND = new Set([7, 8, 9]);

/** The frame with a filler NAL unit saying `n` (no byte under 0x04, so no emulation prevention) and `pad` bytes more. */
function marked(frame: Buffer, n: number, pad: number): Buffer {
  const filler = Buffer.alloc(1 + 8 + pad + 1, 0xff);
  filler[0] = FILLER;
  for (let i = 0; i < 8; i++) filler[1 + i] = 0x40 | ((n >>> (4 * i)) & 0xf);
  filler[filler.length - 1] = 0x80;
  return Buffer.concat([frame, Buffer.from([0, 0, 0, 1]), filler]);
}

function numberOf(nals: Buffer[]): number | undefined {
  const f = nals.find((x) => (x[0] & 0x1f) === FILLER);
  if (!f) return undefined;
  let n = 0;
  for (let i = 0; i < 8; i++) n |= (f[1 + i] & 0xf) << (4 * i);
  return n >>> 0;
}

const kept = (nals: Buffer[]): Buffer[] => nals.filter((x) => !AROUND.has(x[0] & 0x1f));

describe('rtsp-out: payload memory reused under RTSP/TCP readers', function () {
  this.timeout(60_000);
  let g: RtspGateway;
  before(async () => {
    g = await startRtspGateway();
  });
  after(() => g.stop());

  async function play(url: string, on = g): Promise<RawRtsp> {
    const c = await RawRtsp.connect(on.port);
    assert.equal((await c.request('DESCRIBE', url)).status, 200);
    const s = await c.request('SETUP', `${url}/trackID=0`, { Transport: 'RTP/AVP/TCP;unicast;interleaved=0-1' });
    assert.equal(s.status, 200);
    assert.equal((await c.request('PLAY', url, { Session: s.headers.get('session')!.split(';')[0] })).status, 200);
    return c;
  }

  /**
   * Frames numbered from 0, each padded by `padOf(n)` bytes, pushed `batch` at a time in 30 batches while two readers
   * play: one reads at once, the other stops reading from the 4th batch to the one numbered `resumeAt` (30: after the
   * last). Both must then get the last frame, and every frame each rebuilds (at least `least`) must be the one of its
   * number, byte for byte. Returns the chunks reused meanwhile.
   */
  async function fastAndStalled(padOf: (n: number) => number, batch: number, resumeAt: number, least: number, on = g): Promise<number> {
    const clip = fixtureClip({ seconds: 2, audio: true });
    const frames = clip.units.filter((u) => u.kind === 'video');
    const open = await on.open('13900001090', { dataTyp: 1 });
    const bus = kernelOf(on.gw).bus;
    const pub = bus.get(open.stream)!.attachPublisher();
    pub.setTrack(clip.video);
    const sent = new Map<number, Buffer[]>();
    let n = 0;
    const push = (count: number): void => {
      for (const end = n + count; n < end; n++) {
        const u: AccessUnit = frames[n % frames.length];
        const body = marked(u.payload, n, padOf(n));
        const mem = pub.alloc(body.length);
        body.copy(mem);
        sent.set(n, kept(splitAnnexB(body)));
        pub.push(videoUnit({ codec: 'h264', dts: n * 40, keyframe: u.keyframe, payload: mem }));
      }
    };
    push(frames.length);
    await on.gw.waitReady(open.reqId);
    const fast = await play(open.url, on);
    const stalled = await play(open.url, on);
    const reusedBefore = bus.chunks.counts.reused;
    for (let k = 0; k < 30; k++) {
      push(batch);
      if (k === 3) stalled.socket.pause();
      if (k === resumeAt) stalled.socket.resume();
      await (k % 2 ? sleep(20) : turn());
    }
    if (resumeAt >= 30) stalled.socket.resume();
    const last = n - 1;
    for (const [name, c] of [
      ['fast', fast],
      ['stalled', stalled],
    ] as const) {
      await waitFor(`the ${name} reader to get the last frame`, () => {
        const got = depacketizeH264(c.frames.get(0) ?? []);
        return [...got.values()].some((nals) => numberOf(nals) === last);
      });
    }
    await sleep(300);
    const reused = bus.chunks.counts.reused - reusedBefore;
    for (const [name, c] of [
      ['fast', fast],
      ['stalled', stalled],
    ] as const) {
      const got = [...depacketizeH264(c.frames.get(0) ?? []).values()];
      assert.ok(got.length >= least, `${name}: ${got.length} frames`);
      for (const nals of got) {
        const num = numberOf(nals);
        assert.ok(num !== undefined && sent.has(num), `${name}: a frame with no number the publisher gave (${num})`);
        const want = sent.get(num)!;
        const have = kept(nals);
        assert.ok(have.length === want.length && have.every((x, i) => x.equals(want[i])), `${name}: frame ${num} differs from what was pushed`);
      }
      c.close();
    }
    return reused;
  }

  it('readers fast and stalled rebuild every frame they get byte for byte while chunks are reused', async () => {
    const reused = await fastAndStalled((n) => (n * 997) % 40_000, 25, 25, 300);
    assert.ok(reused > 10, `chunks reused while the readers read: ${reused}`);
  });

  it('a stalled reader whose only backlog is a unit the kernel took in part goes on when the kernel takes the rest', async () => {
    // ~100 KiB units, over the 64 KiB past which a session is not writable: each goes whole to the socket's handle
    // (past node's Writable, so no 'drain' comes), and once the stalled reader's kernel buffers are full one is left
    // to libuv; its end must resume the reader, as nothing is pushed after it reads again. The queue's cap out of
    // reach, so the bus never skips the reader to a key frame that will not come
    const big = await startRtspGateway({ maxPlayerBacklogBytes: 256 * 1024 * 1024 });
    try {
      await fastAndStalled(() => 100_000, 4, 30, 100, big);
    } finally {
      await big.stop();
    }
  });
});
