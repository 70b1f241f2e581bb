/**
 * Frame payloads live in chunks each stream reuses once nothing can read them (core/bus/payload-arena.ts). Through
 * the real gateway: a terminal sends a capture twice over, while one player reads at once, one stops reading for a
 * while (its socket's buffer fills: the bus must not reuse what it still has to send, and may skip it ahead) and one
 * joins half-way (it starts from the GOP cache). Every video frame each player gets must be the frame the ingest
 * made of the terminal's packets, byte for byte, and chunks must have been reused meanwhile.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { FlvMuxer } from '../../plugin-sdk/formats/flv';
import { Jt1078StreamAssembler } from '../../plugins/jt1078-ingest/src/stream-assembler';
import type { Jt1078Packet } from '../../plugins/jt1078-ingest/src/packet';
import { parseFlv } from '../support/flv-reader';
import { CAPTURES, HttpFlvPlayer, TcpTerminal, capture, codedVideo, encodeLazily, loopedPackets, metric, openLive, useE2eGateway } from './helpers';

/** FLV video bodies by timestamp, as the ingest and the FLV muxer make them without the bus in between */
function referenceBodies(packets: Iterable<Jt1078Packet>): Map<number, Buffer> {
  const muxer = new FlvMuxer();
  const out = new Map<number, Buffer>();
  const asm = new Jt1078StreamAssembler(
    {
      onTrack: (t) => muxer.setTrack(t),
      onAccessUnit: (au) => {
        for (const t of muxer.push(au)) if (t.type === 9 && t.body[1] === 1) out.set(t.timestamp, Buffer.from(t.body));
      },
    },
    { now: () => 0 },
  );
  for (const p of packets) asm.push(p);
  return out;
}

describe('e2e: payload memory reused by the bus', function () {
  this.timeout(120_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 });

  it('players fast, stalled and late get every frame byte for byte while chunks are reused', async () => {
    const cap = capture(CAPTURES[0].file);
    const ref = referenceBodies(loopedPackets(cap, 2));
    const open = await openLive(e.gw, CAPTURES[0].sim, 1);
    const fast = await HttpFlvPlayer.connect(open.playUrl);
    const stalled = await HttpFlvPlayer.connect(open.playUrl);
    const reusedBefore = await metric(e.gw, 'gw_core_bus_payload_chunks', { event: 'reused' });
    const terminal = await TcpTerminal.connect(e.live2013);
    const sending = terminal.send(encodeLazily(loopedPackets(cap, 2), { sim: CAPTURES[0].sim, channel: 1 }), 16, 2);
    await sleep(300);
    stalled.pause();
    await sleep(700);
    const late = await HttpFlvPlayer.connect(open.playUrl);
    await sleep(1000);
    stalled.resume();
    await sending;
    await terminal.end();
    await Promise.all([fast.ended, stalled.ended, late.ended]);

    const reused = (await metric(e.gw, 'gw_core_bus_payload_chunks', { event: 'reused' })) - reusedBefore;
    assert.ok(reused > 10, `chunks reused while the players played: ${reused}`);
    for (const [name, p] of [
      ['fast', fast],
      ['stalled', stalled],
      ['late', late],
    ] as const) {
      const frames = codedVideo(parseFlv(p.data(), { allowTruncated: true }).tags);
      assert.ok(frames.length > 200, `${name}: ${frames.length} frames`);
      let checked = 0;
      for (const f of frames) {
        const want = ref.get(f.timestamp);
        assert.ok(want, `${name}: a frame at ${f.timestamp} ms the ingest never made`);
        if (!f.body.equals(want)) assert.fail(`${name}: the frame at ${f.timestamp} ms differs from what the terminal sent`);
        checked++;
      }
      assert.equal(checked, frames.length);
    }
    assert.equal(codedVideo(parseFlv(fast.data()).tags).length, ref.size, 'the fast player got every frame');
  });
});
