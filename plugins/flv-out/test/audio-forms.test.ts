/**
 * flv-out's FLV forms of audio units refer to the unit's own payload for the frame (FlvMuxer.pushWire): no copy of
 * it is made until a player lays the unit out. So a form must never be read after the bus reused its unit's payload
 * memory (Publisher.alloc). Here, on a bare bus with poisoned reuse (test/setup.ts), one reader copies each form at
 * once and another stops taking units for a while, so the bus queues its forms while the first one's memory is
 * reused for new frames; then it takes them all. Every frame each reader copies out must be the frame pushed.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { audioUnit, type AccessUnit } from '../../../plugin-sdk';
import { CoreMediaBus } from '../../../test/support/core-parts';
import { createFlvFormats, type FlvFrame } from '../src/flv-format';

const noCount = { inc: () => undefined };
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Frame n's bytes: its number in the first two, then its low byte (so a byte from another frame shows). */
function bytesOf(n: number, into: Buffer): Buffer {
  into.fill(n & 0xff);
  into.writeUInt16BE(n, 0);
  return into;
}

/** The frame number and body of each audio tag in FLV media bytes, checked against the frame its timestamp names. */
function checkTags(flv: Buffer[], who: string): number[] {
  const seen: number[] = [];
  for (const b of flv) {
    assert.equal(b[0], 8, `${who}: an audio tag`);
    const size = b.readUIntBE(1, 3);
    const n = (b.readUIntBE(4, 3) | (b[7] << 24)) / 20;
    // SoundFormat 7 (A-law), then the 160 bytes of frame n
    assert.equal(b[11] >> 4, 7);
    const frame = b.subarray(12, 11 + size);
    assert.ok(frame.equals(bytesOf(n, Buffer.alloc(160))), `${who}: frame ${n}'s bytes were written over before they were read`);
    seen.push(n);
  }
  return seen;
}

describe('flv-out FLV form: audio frames by reference', () => {
  it('a reader that falls behind reads every G.711 frame right from its form while the payload memory is reused', async () => {
    const bus = new CoreMediaBus(
      { maxGopBytes: 4 << 20, maxQueueBytes: 8 << 20, maxStreamBytes: 16 << 20, readerDropAfterMs: 60_000 },
      pino({ level: 'silent' }),
      () => 0,
    );
    const formats = createFlvFormats({
      audioCodecs: ['aac', 'g711a'],
      tags: { video: noCount, audio: noCount, script: noCount },
      audioSkipped: noCount,
      audioSkipStarted: () => undefined,
      encoders: () => undefined,
    });
    const stream = bus.create('s1', 'test', { expectVideo: false });
    const pub = stream.attachPublisher();
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    /** the unit's media tags as a player in step lays them out: copied out of the form now */
    const copy = (u: AccessUnit, f: FlvFrame, into: Buffer[]): void => {
      const b = Buffer.alloc(f.mediaBytes);
      f.copyMedia(b, 0);
      into.push(b);
      assert.ok(f.payload === u.payload, 'the form refers to the payload, not a copy of it');
    };
    const fast: Buffer[] = [];
    const slow: Buffer[] = [];
    let stalled = false;
    stream.subscribe({ write: (u, f) => copy(u, f, fast), holdsPayloads: () => false }, { format: formats.av });
    const slowReader = stream.subscribe({ write: (u, f) => copy(u, f, slow), writable: () => !stalled, holdsPayloads: () => false }, { format: formats.av });
    await turn();
    const reusedBefore = bus.chunks.counts.reused;
    let n = 0;
    // 32 KiB payload chunks: 200 frames each, ~16 held by the stalled reader's queue
    for (let pass = 0; pass < 200; pass++) {
      if (pass === 20) stalled = true;
      if (pass === 150) {
        stalled = false;
        slowReader.resume();
      }
      for (let k = 0; k < 25; k++, n++) {
        const mem = bytesOf(n, pub.alloc(160));
        pub.push(audioUnit({ codec: 'g711a', dts: n * 20, timescale: 8000, duration: 160, payload: mem }));
      }
      await turn();
    }
    await turn();
    assert.ok(bus.chunks.counts.reused - reusedBefore > 5, `payload chunks reused meanwhile: ${bus.chunks.counts.reused - reusedBefore}`);
    const all = Array.from({ length: n }, (_, i) => i);
    assert.deepEqual(checkTags(fast, 'reader in step'), all);
    assert.deepEqual(checkTags(slow, 'reader that fell behind'), all);
    stream.close('test over');
  });
});
