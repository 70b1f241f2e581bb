import assert from 'node:assert/strict';
import { NAL_SCAN } from '../../../plugin-sdk/formats';
import { Jt1078Packet, SUB_MARK, WIRE_BODY } from '../src/packet';
import { Jt1078Reorderer } from '../src/reorder';
import { Jt1078Frame, Jt1078Reassembler, ReassemblerOptions } from '../src/reassembler';
import { addHisiliconHeader, stripHisiliconHeader } from '../src/audio';
import { CAPTURES, capturePackets, checksum, prng } from './helpers';
import { collector } from '../../../test/support/gc';

/** packets -> in-order loss accounting (as on TCP) -> reassembler */
function frames(packets: Jt1078Packet[], opts?: ReassemblerOptions): { out: Jt1078Frame[]; asm: Jt1078Reassembler } {
  const out: Jt1078Frame[] = [];
  const asm = new Jt1078Reassembler({ onFrame: (f) => out.push(f) }, opts);
  const order = new Jt1078Reorderer(asm, { maxPackets: 0 });
  for (const p of packets) order.push(p);
  return { out, asm };
}

function frameKey(f: Jt1078Frame): string {
  return `${f.kind}/${f.codec}/${f.timestamp}/${f.keyframe}/${f.payload.length}/${checksum(f.payload)}`;
}

/** Frames of the packets as cut by their own marks (the reference). */
function referenceFrames(packets: Jt1078Packet[]): Array<{ packets: Jt1078Packet[]; key: string }> {
  const res: Array<{ packets: Jt1078Packet[]; key: string }> = [];
  const open: Record<string, Jt1078Packet[]> = {};
  for (const p of packets) {
    const k = p.dataType === 3 ? 'a' : 'v';
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.FIRST) open[k] = [];
    open[k].push(p);
    if (p.subMark === SUB_MARK.ATOMIC || p.subMark === SUB_MARK.LAST) res.push({ packets: open[k], key: '' });
  }
  return res;
}

describe('jt1078 frame reassembly', () => {
  it("reads a reused packet's payload from its wire, and any other body as the payload, stale wire or not", () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 300);
    const want = frames(packets).out.map(frameKey);
    // as the TCP parser hands them: no body of their own, the payload a range of a larger read
    const onWire = packets.map((p) => {
      const wire = Buffer.concat([Buffer.alloc(30, 0xee), p.body, Buffer.alloc(7, 0xee)]);
      return { ...p, body: WIRE_BODY, wire, bodyAt: 30, bodyEnd: 30 + p.body.length };
    });
    assert.deepEqual(frames(onWire).out.map(frameKey), want);
    // a copy given another body keeps the old wire and range: the body is what counts
    const zeroed = onWire.map((p) => ({ ...p, body: Buffer.alloc(p.bodyEnd - p.bodyAt) }));
    const got = frames(zeroed).out;
    assert.equal(got.length, want.length);
    assert.ok(
      got.every((f) => f.payload.every((b) => b === 0)),
      'every frame made of the zeroed bodies',
    );
  });

  for (const c of CAPTURES) {
    it(`rebuilds every frame of ${c.file}`, () => {
      const packets = capturePackets(c.file);
      const { out, asm } = frames(packets);
      const ref = referenceFrames(packets);
      assert.equal(out.filter((f) => f.kind === 'video').length, c.videoFrames);
      assert.equal(out.filter((f) => f.kind === 'audio').length, c.audioFrames);
      assert.equal(out.length, ref.length);
      for (let i = 0; i < ref.length; i++) {
        const want = Buffer.concat(ref[i].packets.map((p) => p.body));
        assert.ok(out[i].payload.equals(want), `frame ${i}`);
        assert.equal(out[i].timestamp, ref[i].packets[0].timestamp);
        assert.equal(out[i].packets, ref[i].packets.length);
      }
      const first = out.find((f) => f.kind === 'video') as Jt1078Frame;
      assert.equal(first.keyframe, true);
      assert.equal(first.codec, 'h264');
      assert.equal(first.nalFlags & (NAL_SCAN.KEY | NAL_SCAN.SPS | NAL_SCAN.PPS), NAL_SCAN.KEY | NAL_SCAN.SPS | NAL_SCAN.PPS);
      // keyframe exactly when the data type says I (all these captures agree with their NAL units)
      for (const f of out) if (f.kind === 'video') assert.equal(f.keyframe, f.dataType === 0);
      assert.equal(asm.stats.droppedFrames, 0);
      assert.equal(asm.stats.lostPackets, 0);
    });
  }

  describe('wrong subpackage marks', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin');
    const clean = frames(packets).out.map(frameKey);

    it('uses the M bit when every packet is marked atomic', () => {
      const { out, asm } = frames(packets.map((p) => ({ ...p, subMark: SUB_MARK.ATOMIC })));
      assert.deepEqual(out.map(frameKey), clean);
      assert.ok(asm.stats.markDisagreements > 1000);
      assert.equal(asm.boundaryMode('video'), 'm');
    });

    it('uses the M bit when marks are random', () => {
      const rand = prng(42);
      const { out } = frames(packets.map((p) => ({ ...p, subMark: Math.floor(rand() * 4) })));
      assert.deepEqual(out.map(frameKey), clean);
    });

    it('uses the marks when the M bit is never set, or always set', () => {
      for (const marker of [false, true]) {
        const { out, asm } = frames(packets.map((p) => ({ ...p, marker })));
        assert.deepEqual(out.map(frameKey), clean);
        assert.equal(asm.boundaryMode('video'), 'marks');
      }
    });

    it('follows marks and M bit without deciding anything while they agree', () => {
      assert.equal(frames(packets).asm.boundaryMode('video'), 'unproven');
    });
  });

  describe('lost packets', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin');
    const clean = frames(packets).out;
    const ref = referenceFrames(packets);
    const keyIdx = clean.map((f, i) => (f.keyframe ? i : -1)).filter((i) => i >= 0);

    /** clean frames without frame `lostFrame` and everything up to the next keyframe after it */
    function expectedWithout(lostFrame: number): string[] {
      const nextKey = keyIdx.find((i) => i > lostFrame) as number;
      return clean.filter((_, i) => i < lostFrame || i >= nextKey).map(frameKey);
    }

    function check(lostFrame: number, which: (ps: Jt1078Packet[]) => Jt1078Packet, marks: 'right' | 'atomic'): void {
      const victim = which(ref[lostFrame].packets);
      let input = packets.filter((p) => p !== victim);
      if (marks === 'atomic') input = input.map((p) => ({ ...p, subMark: SUB_MARK.ATOMIC }));
      const { out, asm } = frames(input);
      assert.deepEqual(out.map(frameKey), expectedWithout(lostFrame));
      assert.equal(asm.stats.lostPackets, 1);
      if (marks === 'right') {
        // every frame from the broken one to the next keyframe accounted for exactly once
        assert.equal(asm.stats.droppedFrames, 1);
        const nextKey = keyIdx.find((i) => i > lostFrame) as number;
        assert.equal(asm.stats.skippedFrames, nextKey - lostFrame - 1);
      } else {
        // with only the M bit, a frame after a lost last packet cannot be told from a broken tail
        assert.ok(asm.stats.droppedFrames >= 1);
        assert.equal(asm.boundaryMode('video'), 'm');
      }
    }

    // a P frame of three or more packets in the middle of a GOP
    const pFrame = ref.findIndex((f, i) => i > keyIdx[3] && f.packets.length >= 3 && f.packets[0].dataType === 1);
    const iFrame = keyIdx[5];

    it('drops a frame that lost a middle packet and waits for the next I frame', () => {
      assert.ok(pFrame > 0 && ref[pFrame].packets.length >= 3);
      check(pFrame, (ps) => ps[1], 'right');
    });

    it('does the same when it has only the M bit to go by', () => {
      check(pFrame, (ps) => ps[1], 'atomic');
    });

    it('drops a frame that lost its first or its last packet', () => {
      check(pFrame, (ps) => ps[0], 'right');
      check(pFrame, (ps) => ps[ps.length - 1], 'right');
      check(iFrame, (ps) => ps[0], 'right');
      check(iFrame, (ps) => ps[0], 'atomic');
      check(iFrame, (ps) => ps[ps.length - 1], 'atomic');
    });
  });

  describe('audio', () => {
    const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');

    it('passes G.711A payloads without a HiSilicon header through untouched', () => {
      const { out, asm } = frames(packets);
      const audio = out.filter((f) => f.kind === 'audio');
      assert.equal(audio.length, 214);
      assert.ok(audio.every((f) => f.codec === 'g711a' && f.payload.length === 160 && !f.hisilicon));
      assert.equal(asm.stats.hisiliconHeaders, 0);
    });

    it('strips a HiSilicon header (00 01 50 00 before 160 bytes)', () => {
      const withHeader = packets.map((p) => (p.dataType === 3 ? { ...p, body: addHisiliconHeader(p.body) } : p));
      const first = withHeader.find((p) => p.dataType === 3) as Jt1078Packet;
      assert.deepEqual([...first.body.subarray(0, 4)], [0x00, 0x01, 0x50, 0x00]);
      assert.equal(first.body.length, 164);
      const { out, asm } = frames(withHeader);
      const want = packets.filter((p) => p.dataType === 3).map((p) => p.body);
      const got = out.filter((f) => f.kind === 'audio').map((f) => f.payload);
      assert.equal(got.length, want.length);
      for (let i = 0; i < want.length; i++) assert.ok(got[i].equals(want[i]), `audio frame ${i}`);
      assert.ok(
        out.every((f) => f.hisilicon === (f.kind === 'audio')),
        'each audio frame says it had the header',
      );
      assert.equal(asm.stats.hisiliconHeaders, 214);
    });

    it('leaves a payload alone when the length in a would-be header does not match', () => {
      const b = Buffer.from([0, 1, 0x50, 0, ...Buffer.alloc(158)]);
      assert.equal(stripHisiliconHeader(b), b);
    });
  });

  it('drops a frame that never ends once it grows past maxFrameBytes, and recovers at the next I frame', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 1500);
    const clean = frames(packets).out;
    const ref = referenceFrames(packets);
    const keyIdx = clean.map((f, i) => (f.keyframe ? i : -1)).filter((i) => i >= 0);
    // insert, before a P frame, a frame that starts and then only ever continues (200 x 950 bytes)
    const j = ref.findIndex((f, i) => i > keyIdx[1] && f.packets[0].dataType === 1);
    const at = packets.indexOf(ref[j].packets[0]);
    const filler = { ...packets[at], dataType: 1, subMark: SUB_MARK.FIRST, marker: false, body: Buffer.alloc(950, 7) };
    const endless = [filler, ...Array.from({ length: 199 }, () => ({ ...filler, subMark: SUB_MARK.MIDDLE }))];
    const input = [...packets.slice(0, at), ...endless, ...packets.slice(at)].map((p, i) => ({ ...p, seq: i & 0xffff }));
    const { out, asm } = frames(input, { maxFrameBytes: 100_000 });
    const nextKey = keyIdx.find((i) => i > j) as number;
    const want = clean.filter((_, i) => i < j || i >= nextKey).map(frameKey);
    assert.deepEqual(out.map(frameKey), want);
    assert.equal(asm.stats.droppedFrames, 1);
    assert.ok(out.every((f) => f.payload.length <= 100_000));
  });
  it('keeps no packet body once its frame is out: the bodies of a key frame are free for the collector', async () => {
    // each body in memory of its own, so what still refers to it can be told by whether it is collected
    const cap = capturePackets(CAPTURES.find((c) => c.file.includes('xunilcyl'))!.file);
    const firstP = cap.findIndex((p, i) => i > 0 && p.dataType === 1 && p.subMark !== SUB_MARK.MIDDLE && p.subMark !== SUB_MARK.LAST);
    const out: Jt1078Frame[] = [];
    const asm = new Jt1078Reassembler({ onFrame: (f) => out.push(f) });
    const order = new Jt1078Reorderer(asm, { maxPackets: 0 });
    const refs: Array<WeakRef<ArrayBuffer>> = [];
    const feed = (from: number, to: number): void => {
      for (let i = from; i < to; i++) {
        const body = Buffer.allocUnsafeSlow(cap[i].body.length);
        cap[i].body.copy(body);
        refs.push(new WeakRef(body.buffer));
        order.push({ ...cap[i], body });
      }
    };
    // the key frame (dozens of packets), then the P frame after it: a short frame leaves most slots as they were
    feed(0, firstP);
    const keyPackets = refs.length;
    let end = firstP + 1;
    while (cap[end].subMark === SUB_MARK.MIDDLE || cap[end].subMark === SUB_MARK.LAST) end++;
    feed(firstP, end);
    assert.ok(keyPackets >= 10, `the key frame has ${keyPackets} packets`);
    assert.deepEqual(
      out.map((f) => f.keyframe),
      [true, false],
    );
    // WeakRefs hold their targets until the current job ends
    await new Promise((r) => setImmediate(r));
    collector()();
    const held = refs.map((r, i) => (r.deref() !== undefined ? i : -1)).filter((i) => i >= 0);
    assert.deepEqual(held, [], `packet bodies still held after their frames went: ${held.length} of ${refs.length}`);
    assert.equal(out.length, 2);
  });
});
