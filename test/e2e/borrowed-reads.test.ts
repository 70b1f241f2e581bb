/**
 * The ingest reads every terminal socket into one shared buffer and copies out only what outlives a read
 * (core/net/borrowed-reads.ts, Jt1078Reassembler.detach). Through the real gateway: two channels of one terminal
 * on one connection, in small writes cut anywhere (every frame straddles reads, the channels' frames interleave in
 * them), must reach their players byte for byte as a third channel sent in whole packets does. The same again with
 * every read past a slice's first set aside for the end of the loop's turn (core/net/read-slices.ts, a slice of
 * 1 µs), the terminals closing right after their last bytes: the set-aside reads are handled before the link ends.
 */
import assert from 'node:assert/strict';
import { parseFlv } from '../support/flv-reader';
import {
  CAPTURES,
  HttpFlvPlayer,
  TcpTerminal,
  capture,
  codedVideo,
  encodeOne,
  expectedFrom,
  ffprobe,
  metric,
  openLive,
  randomChunks,
  useE2eGateway,
  type E2eGateway,
} from './helpers';

for (const sliceMs of [undefined, 0.001]) {
  describe(`e2e: terminal bytes read into a shared buffer${sliceMs ? `, in slices of ${sliceMs * 1000} µs` : ''}`, function () {
    this.timeout(90_000);
    const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [], sliceMs === undefined ? {} : { readSliceMs: sliceMs });
    it('two channels on one connection in writes of 1-1500 bytes play exactly like one sent in whole packets', async () => {
      await twoChannelsCut(e);
      if (sliceMs !== undefined) {
        const aside = await metric(e.gw, 'gw_core_read_slice_reads', { how: 'set_aside' });
        assert.ok(aside > 50, `reads set aside: ${aside} (the test must reach that path)`);
      }
    });
  });
}

async function twoChannelsCut(e: E2eGateway): Promise<void> {
  {
    const cap = CAPTURES[0];
    const packets = capture(cap.file).packets;
    const players = new Map<number, HttpFlvPlayer>();
    for (const ch of [1, 2, 3]) {
      const open = await openLive(e.gw, cap.sim, ch);
      const p = await HttpFlvPlayer.connect(open.playUrl);
      assert.equal(p.status, 200);
      players.set(ch, p);
    }
    // channel 3, the reference: whole packets, 64 to a write
    const whole = await TcpTerminal.connect(e.live2013);
    // channels 1 and 2 interleaved packet by packet, then cut into pieces of 1-1500 bytes, one write each
    const both = Buffer.concat(packets.flatMap((p) => [encodeOne(p, { sim: cap.sim, channel: 1 }), encodeOne(p, { sim: cap.sim, channel: 2 })]));
    const pieces = randomChunks(both, 7, 1500);
    const cut = await TcpTerminal.connect(e.live2013);
    // both at once: reads of the two connections share the loop's turns (and, sliced, some are set aside)
    await Promise.all([
      whole.send(
        packets.map((p) => encodeOne(p, { sim: cap.sim, channel: 3 })),
        64,
      ),
      cut.send(pieces, 1),
    ]);
    await Promise.all([whole.end(), cut.end()]);
    await Promise.all([...players.values()].map((p) => p.ended));

    const want = expectedFrom(packets);
    const video = (ch: number) => codedVideo(parseFlv(players.get(ch)!.data()).tags);
    const reference = video(3);
    assert.equal(reference.length, want.video, 'the reference player got every frame');
    for (const ch of [1, 2]) {
      const got = video(ch);
      assert.equal(got.length, reference.length, `channel ${ch}: frames`);
      for (let i = 0; i < got.length; i++) {
        if (!got[i].body.equals(reference[i].body) || got[i].timestamp !== reference[i].timestamp) {
          assert.fail(`channel ${ch}: frame ${i} (at ${got[i].timestamp} ms) differs from the one sent in whole packets`);
        }
      }
      const probe = ffprobe(players.get(ch)!.data(), 'flv');
      assert.equal(probe.frames, want.video, `channel ${ch}: ffprobe decodes every frame`);
      assert.equal(probe.errors, '', `channel ${ch}: without a decoder complaint`);
    }
    assert.ok(pieces.length > 5000, `${pieces.length} writes`);
  }
}
