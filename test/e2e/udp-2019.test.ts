/**
 * The 2019 packet layout (10-byte SIM) over UDP, end to end: a real capture re-packed as 2019, sent as datagrams
 * reordered within small windows (and, in the loss cases, with ~1 % dropped, both from a seeded PRNG) to the live
 * 2019 port and to the live 2013 port: the layout is detected from the packets, not from the port. The player's
 * HTTP-FLV is checked frame by frame against an independent model of what can be decoded, and by ffprobe.
 */
import assert from 'node:assert/strict';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { parseFlv } from '../support/flv-reader';
import {
  CAPTURES,
  HttpFlvPlayer,
  capture,
  closeReq,
  codedVideo,
  encodeCapture,
  ffprobe,
  firstNonMonotonic,
  framesFromFirstI,
  framesSettled,
  lossyOrder,
  metric,
  openLive,
  sendUdp,
  useE2eGateway,
} from './helpers';

/**
 * Independent of the gateway's code: the frames a player can decode when only `delivered` (indexes into the
 * capture's packets) arrive. Frames end at the M bit; a frame is complete when all its packets arrived; decoding
 * starts at the first complete I frame, and a P/B frame decodes only while every frame since the last I frame did.
 * Returns the device timestamps of those frames.
 */
function decodableFrames(packets: Jt1078Packet[], delivered: Set<number>): number[] {
  let frame: number[] = [];
  let dataType = -1;
  let chainOk = false;
  const ts: number[] = [];
  for (let i = 0; i < packets.length; i++) {
    const p = packets[i];
    if (p.dataType > 2) continue;
    if (frame.length === 0) dataType = p.dataType;
    frame.push(i);
    if (!p.marker) continue;
    const complete = frame.every((k) => delivered.has(k));
    chainOk = dataType === 0 ? complete : chainOk && complete;
    if (chainOk) ts.push(p.timestamp);
    frame = [];
  }
  return ts;
}

// once as configured, once with every datagram past a slice's first set aside for the loop turn's end (1 µs slices)
for (const sliceMs of [undefined, 0.001])
  describe(`e2e: 2019 layout over UDP, reordered and lossy, to the 2019 and the 2013 port${sliceMs ? `, in slices of ${sliceMs * 1000} µs` : ''}`, function () {
    this.timeout(60_000);
    const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [], sliceMs === undefined ? {} : { readSliceMs: sliceMs });
    const cap = CAPTURES.find((c) => c.file.includes('xunilcyl'))!;
    const packets = capture(cap.file).packets;
    const all = framesFromFirstI(packets);
    let datagrams: Buffer[];

    before(() => {
      datagrams = encodeCapture(packets, { layout: '2019' });
      // the re-packing really is the 2019 layout: 4 more SIM bytes than the capture's 2013 headers, BCD, zero-padded
      const as2013 = encodeCapture(packets.slice(0, 50));
      for (let i = 0; i < 50; i++) {
        assert.equal(datagrams[i].length, as2013[i].length + 4);
        assert.equal(datagrams[i].subarray(8, 18).toString('hex'), cap.sim.padStart(20, '0'));
      }
    });

    async function playOver(listener: 'live2019' | 'live2013', order: number[]): Promise<{ buf: Buffer; frames: number; detected: Record<string, number> }> {
      const port = listener === 'live2019' ? e.live2019 : e.live2013;
      const detected = (layout: string) => metric(e.gw, 'gw_jt1078_ingest_layouts_detected_total', { listener, layout });
      const before2019 = await detected('2019');
      const before2013 = await detected('2013');
      const open = await openLive(e.gw, cap.sim, cap.channel);
      const player = await HttpFlvPlayer.connect(open.playUrl);
      assert.equal(player.status, 200);
      await sendUdp(
        port,
        order.map((i) => datagrams[i]),
        { perTick: 8, tickMs: 4 },
      );
      // the reorder buffer gives up holes within 200 ms, so frames stop well within a poll
      const frames = await framesSettled(player, 15_000, 500);
      const after2019 = await detected('2019');
      const after2013 = await detected('2013');
      await closeReq(e.gw, open.reqId);
      await player.ended;
      return { buf: player.data(), frames, detected: { '2019': after2019 - before2019, '2013': after2013 - before2013 } };
    }

    /** `want`: device timestamps of the frames the player must get (the model's, or every frame's) */
    function checkPlayback(buf: Buffer, wantTs: number[], what: string): void {
      const want = wantTs.length;
      const flv = parseFlv(buf);
      const video = codedVideo(flv.tags);
      assert.equal(video.length, want, `${what}: frames the player got`);
      assert.equal(video[0].keyframe, true, `${what}: the player starts at a keyframe`);
      assert.equal(firstNonMonotonic(video, true), -1, `${what}: video timestamps strictly increase`);
      // the capture's clock runs straight (no jumps): each frame keeps its distance from the first on the timeline
      assert.deepEqual(
        video.map((t) => t.timestamp - video[0].timestamp),
        wantTs.map((t) => t - wantTs[0]),
        `${what}: each frame keeps its place on the timeline`,
      );
      const p = ffprobe(buf, 'flv');
      assert.equal(`${p.codec} ${p.width}x${p.height}`, `h264 ${cap.width}x${cap.height}`, `${what}: codec and resolution`);
      assert.equal(p.frames, want, `${what}: ffprobe decodes every frame`);
      assert.equal(p.errors, '', `${what}: without a decoder complaint`);
    }

    for (const listener of ['live2019', 'live2013'] as const) {
      it(`reordered within 8 datagrams, nothing lost, to the ${listener} port: every frame, in order, decoded`, async () => {
        const plan = lossyOrder(packets.length, { window: 8, loss: 0, seed: 2019 });
        assert.equal(plan.dropped, 0);
        const moved = plan.order.filter((k, i) => k !== i).length;
        assert.ok(moved > packets.length / 2, `the datagrams really are reordered (${moved} of ${packets.length} out of place)`);
        const got = await playOver(listener, plan.order);
        // the layout is detected from the datagrams, whatever the port (and counted for a UDP source too)
        assert.equal(got.detected['2013'], 0, `the ${listener} listener did not take the 2019 datagrams for 2013`);
        assert.ok(
          got.detected['2019'] >= 1,
          `gw_jt1078_ingest_layouts_detected_total{listener="${listener}",layout="2019"} rose (by ${got.detected['2019']}) for the UDP source`,
        );
        const allTs = decodableFrames(packets, new Set(plan.order));
        assert.equal(allTs.length, all, 'model: every frame decodable when nothing is lost');
        checkPlayback(got.buf, allTs, `2019 over UDP to ${listener}`);
      });

      it(`reordered and ~1 % lost (seeded) to the ${listener} port: the decodable frames arrive, decode cleanly`, async () => {
        const plan = lossyOrder(packets.length, { window: 8, loss: 0.01, seed: listener === 'live2019' ? 1 : 4 });
        assert.ok(plan.dropped >= 8, `the plan drops packets (${plan.dropped})`);
        const decodableTs = decodableFrames(packets, new Set(plan.order));
        const decodable = decodableTs.length;
        // a lost packet costs its frame and the P frames after it up to the next I frame (they would not decode):
        // with ~1 % loss and 1 s GOPs that is a good part of the stream, so the bound is on the decodable frames
        assert.ok(decodable > all / 2 && decodable < all, `model: ${decodable} of ${all} frames decodable`);
        const got = await playOver(listener, plan.order);
        assert.equal(got.detected['2013'], 0, `the ${listener} listener did not take the 2019 datagrams for 2013`);
        assert.ok(
          got.detected['2019'] >= 1,
          `gw_jt1078_ingest_layouts_detected_total{listener="${listener}",layout="2019"} rose (by ${got.detected['2019']}) for the UDP source`,
        );
        const video = codedVideo(parseFlv(got.buf).tags);
        assert.ok(video.length >= 0.8 * decodable, `at least 80 % of the decodable frames reach the player (${video.length} of ${decodable})`);
        // and exactly those: nothing the model says decodes is lost, nothing that cannot decode is passed on
        checkPlayback(got.buf, decodableTs, `2019 over UDP to ${listener}, lossy`);
      });
    }

    it('the gateway is healthy afterwards', async () => {
      const health = await e.gw.api('GET', '/healthz', undefined, null);
      assert.equal(health.status, 200);
      assert.equal(health.json.status, 'ok');
      if (sliceMs !== undefined) {
        const aside = await metric(e.gw, 'gw_core_read_slice_reads', { how: 'set_aside' });
        assert.ok(aside > 50, `datagrams set aside: ${aside} (the test must reach that path)`);
      }
    });
  });
