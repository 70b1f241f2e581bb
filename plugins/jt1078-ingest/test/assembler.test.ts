import assert from 'node:assert/strict';
import { NAL_SCAN, scanH264 } from '../../../plugin-sdk/formats';
import { joinAnnexB, NalRanges, splitAnnexB } from '../../../plugin-sdk/formats';
import { NAL_SCANS, NalUnits } from '../../../plugin-sdk/formats';
import type { AccessUnit, AudioTrackInfo, VideoTrackInfo } from '../../../plugin-sdk';
import { SUB_MARK } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { Jt1078StreamAssembler } from '../src/stream-assembler';
import pino from 'pino';
import { CoreMediaBus } from '../../../test/support/core-parts';
import { CAPTURES, Collector, assemble, capturePackets, checksum, framesOf, parsePackets, prng, reencode, sparseParameterSets } from './helpers';

function auKey(u: AccessUnit): string {
  return `${u.kind}/${u.codec}/${u.dts}/${u.keyframe}/${u.payload.length}/${checksum(u.payload)}`;
}

function increasing(xs: number[]): boolean {
  return xs.every((x, i) => i === 0 || x > xs[i - 1]);
}

describe('jt1078 stream assembler', function () {
  this.timeout(60000);
  for (const c of CAPTURES) {
    // that ffprobe decodes these units is checked in assembler-ffprobe.test.ts (full tier)
    it(`turns ${c.file} into access units: the track, a keyframe first, the timeline (${c.width}x${c.height})`, () => {
      const { out, asm } = assemble(capturePackets(c.file));
      const video = out.video();
      const audio = out.audio();
      assert.equal(video.length, c.videoFrames);
      assert.equal(audio.length, c.audioFrames);
      const vt = out.tracks.filter((t): t is VideoTrackInfo => t.kind === 'video');
      assert.equal(vt.length, 1);
      assert.equal(vt[0].codec, 'h264');
      assert.equal(vt[0].width, c.width);
      assert.equal(vt[0].height, c.height);
      assert.equal(vt[0].profile, c.profile);
      assert.ok(vt[0].sps && (vt[0].sps[0] & 0x1f) === 7 && vt[0].pps && (vt[0].pps[0] & 0x1f) === 8);
      // kept for the stream's life: memory of their own, not a slice pinning a slab of Node's pool (kept-bytes.ts)
      assert.equal(vt[0].sps.buffer.byteLength, vt[0].sps.length);
      assert.equal(vt[0].pps.buffer.byteLength, vt[0].pps.length);
      // the track is announced before its first unit, which is a keyframe carrying its parameter sets
      assert.equal(out.tracks.indexOf(vt[0]), 0);
      assert.equal(video[0].keyframe, true);
      assert.equal(video[0].dts, 0);
      assert.ok(scanH264(video[0].payload) & NAL_SCAN.SPS);
      assert.ok(increasing(video.map((u) => u.dts)));
      assert.ok(video.every((u) => u.pts === u.dts));
      // video at 90 kHz, exactly the ms timeline x 90
      assert.ok(
        video.every(
          (u) =>
            u.timescale === 90_000 &&
            Number.isInteger(u.dts) &&
            u.dtsTicks === u.dts * 90 &&
            u.ptsTicks === u.dtsTicks &&
            u.duration === 0 &&
            typeof u.receivedAt === 'number',
        ),
      );
      assert.ok(increasing(audio.map((u) => u.dts)));
      assert.ok(audio.every((u) => u.timescale === 8000 && u.duration === u.payload.length && u.dts === (u.dtsTicks * 1000) / 8000));
      assert.equal(asm.stats.timeline.rebases, 0);
    });
  }

  it('announces G.711A audio as 8 kHz mono and passes 160-byte payloads', () => {
    const { out } = assemble(capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin'));
    const at = out.tracks.filter((t): t is AudioTrackInfo => t.kind === 'audio');
    assert.deepEqual(at, [{ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 }]);
    const audio = out.audio();
    assert.ok(audio.every((u) => u.payload.length === 160 && u.codec === 'g711a'));
    // one origin for both kinds: audio 20 ms apart from 0, video 41-42 ms apart from 0
    assert.deepEqual(
      audio.slice(0, 3).map((u) => u.dts),
      [0, 20, 40],
    );
    // at the sample rate, each frame 160 samples long and starting where the one before ended
    assert.ok(audio.every((u, i) => u.timescale === 8000 && u.duration === 160 && u.dtsTicks === 160 * i && u.kind === 'audio' && u.keyframe));
  });

  it("stamps each unit with the time its last packet was parsed (receivedAt, on the assembler's clock)", () => {
    const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    let clock = 0;
    const out = new Collector();
    const asm = new Jt1078StreamAssembler(out, { now: () => clock });
    const lastPacketOf = new Map<AccessUnit, number>();
    packets.forEach((p, i) => {
      clock = 1000 + i;
      const before = out.units.length;
      asm.push(p);
      for (const u of out.units.slice(before)) lastPacketOf.set(u, i);
    });
    assert.equal(out.units.length, 102 + 214);
    for (const u of out.units) assert.equal(u.receivedAt, 1000 + (lastPacketOf.get(u) as number));
    // the second video frame starts at packet 7 and spans several: stamped at its last packet, not its first
    const at = (out.video()[1].receivedAt as number) - 1000;
    assert.equal(packets[7].subMark, SUB_MARK.FIRST);
    assert.ok(at > 7 && packets[at].subMark === SUB_MARK.LAST && packets[at].timestamp === packets[7].timestamp, `packet ${at}`);
  });

  it('gives the same access units for the capture re-packed in the 2019 layout', () => {
    const packets = capturePackets('jt1078/xunilcyl-d1-h264-2013.bin');
    const want = assemble(packets).out.units.map(auKey);
    const again = parsePackets([Buffer.concat(packets.map((p) => reencode(p, { layout: '2019' })))]);
    assert.ok(again.every((p) => p.layout === '2019'));
    assert.deepEqual(assemble(again).out.units.map(auKey), want);
  });

  it('starts at the first keyframe when the connection begins mid-GOP', () => {
    const packets = capturePackets('jt1078/glaciall-cif-h264-2013.bin');
    const clean = assemble(packets).out.video();
    const { out } = assemble(packets.slice(100));
    // the first I frame that starts at or after packet 100
    const videoFrames = framesOf(packets).filter((f) => f.first.dataType !== 3);
    const firstKey = videoFrames.findIndex((f) => packets.indexOf(f.first) >= 100 && f.first.dataType === 0);
    assert.ok(firstKey > 0 && clean[firstKey].keyframe);
    const got = out.video();
    assert.equal(got[0].keyframe, true);
    assert.equal(got.length, clean.length - firstKey);
    // same frames, on a timeline whose origin is the first packet received
    const shift = clean[firstKey].dts - got[0].dts;
    assert.ok(shift > 0);
    for (let i = 0; i < got.length; i++) {
      assert.equal(checksum(got[i].payload), checksum(clean[firstKey + i].payload));
      assert.equal(got[i].dts + shift, clean[firstKey + i].dts);
    }
  });

  it('over UDP puts shuffled datagrams back in order and, after a loss, resumes at a keyframe', () => {
    const packets = capturePackets('jt1078/gojt808-d1-h264-g711a-2013.bin');
    const clean = assemble(packets).out.units;
    const cleanVideo = clean.filter((u) => u.kind === 'video').map(auKey);
    const cleanSet = new Set(clean.map(auKey));
    const rand = prng(2024);
    const datagrams = packets.map((p, i) => ({ b: reencode(p), k: i === 0 ? -1 : i + rand() * 12 })).filter((_d, i) => i === 0 || rand() >= 0.01);
    assert.ok(datagrams.length < packets.length);
    datagrams.sort((a, b) => a.k - b.k);
    let now = 0;
    const out = new Collector();
    const asm = new Jt1078StreamAssembler(out, { reorder: {}, now: () => now });
    const parser = new Jt1078Parser((p) => asm.push(p));
    for (const d of datagrams) {
      parser.pushDatagram(d.b);
      now += 5;
      if (asm.nextDeadline() <= now) asm.poll();
    }
    asm.flush();
    const units = out.units;
    assert.ok(units.length > 0.4 * clean.length, `${units.length} of ${clean.length}`);
    for (const u of units) assert.ok(cleanSet.has(auKey(u)), 'every unit is one of the clean run (no damaged frame)');
    const video = out.video().map(auKey);
    assert.ok(increasing(out.video().map((u) => u.dts)));
    assert.ok(increasing(out.audio().map((u) => u.dts)));
    for (let i = 1; i < video.length; i++) {
      const prev = cleanVideo.indexOf(video[i - 1]);
      const cur = cleanVideo.indexOf(video[i]);
      assert.ok(cur > prev);
      if (cur !== prev + 1) assert.equal(out.video()[i].keyframe, true, 'after a gap, video resumes at a keyframe');
    }
    assert.ok(asm.stats.reorder.lost > 0);
  });

  it('announces the new parameters when the picture size changes mid-stream, and keeps time going', () => {
    const a = capturePackets('jt1078/glaciall-cif-h264-2013.bin').slice(0, 300);
    const b = capturePackets('jt1078/xunilcyl-d1-h264-2013.bin').slice(0, 300);
    // one terminal whose encoder restarts at D1 (and whose clock is entirely different)
    const joined = [...a, ...b].map((p, i) => ({ ...p, sim: '13800138000', channel: 1, seq: i }));
    const { out, asm } = assemble(joined);
    const vt = out.tracks as VideoTrackInfo[];
    assert.deepEqual(
      vt.map((t) => `${t.width}x${t.height}`),
      ['352x288', '704x576'],
    );
    const video = out.video();
    assert.ok(increasing(video.map((u) => u.dts)));
    assert.equal(asm.stats.timeline.rebases, 1);
    // the first D1 unit follows the second announcement and is a keyframe
    const cif = assemble(a).out.video().length;
    assert.equal(video[cif].keyframe, true);
    assert.ok(scanH264(video[cif].payload) & NAL_SCAN.SPS);
  });

  it('publishes keyframes as sent (the track holds the parameter sets), normalises 3-byte start codes, and indexes each unit without a second search', () => {
    const { packets, wire } = sparseParameterSets();
    const parsed = parsePackets(wire);
    const before = NAL_SCANS.count;
    const { out, asm } = assemble(parsed);
    const video = out.video();
    assert.equal(video.length, 931);
    const r = asm.stats.reassembly;
    assert.equal(NAL_SCANS.count - before, r.frames + r.skippedFrames, 'one search per video frame, normalised or not');
    const reader = new NalUnits();
    for (const u of video) {
      const flags = scanH264(u.payload);
      assert.equal(flags & NAL_SCAN.NEEDS_NORMALISING, 0, 'only 4-byte start codes');
      // the index made while laying out the normalised payload is the one a search finds
      const found = new NalRanges();
      found.scan(u.payload);
      assert.equal(reader.of(u), found.count);
      for (let i = 0; i < found.count; i++) assert.deepEqual([reader.start(i), reader.end(i)], [found.start(i), found.end(i)]);
    }
    const keys = video.filter((u) => u.keyframe);
    assert.equal(keys.length, 37);
    assert.equal(scanH264(keys[0].payload) & (NAL_SCAN.SPS | NAL_SCAN.PPS), NAL_SCAN.SPS | NAL_SCAN.PPS, 'the first as sent: with its sets');
    assert.ok(
      keys.slice(1).every((u) => (scanH264(u.payload) & NAL_SCAN.SPS) === 0),
      'the others as sent: none added',
    );
    const vt = out.tracks.find((t): t is VideoTrackInfo => t.kind === 'video')!;
    assert.ok(vt.sps && vt.pps, 'the track has them');
    // the non-key units are the original NAL units, re-joined
    const clean = assemble(packets).out.video();
    assert.ok(video[1].payload.equals(joinAnnexB(splitAnnexB(clean[1].payload))));
  });

  it("frames made anew (start codes normalised) leave the bus's memory reusable", async () => {
    const bus = new CoreMediaBus(
      { maxGopBytes: 4 << 20, maxQueueBytes: 2 << 20, maxStreamBytes: 8 << 20, readerDropAfterMs: 60_000 },
      pino({ level: 'silent' }),
      () => 0,
    );
    const stream = bus.create('sparse', 'test');
    const pub = stream.attachPublisher();
    const seen: Buffer[] = [];
    stream.subscribe({
      write: (u) => {
        if (u.kind === 'video') seen.push(Buffer.from(u.payload));
      },
      holdsPayloads: () => false,
    });
    await new Promise<void>((r) => setImmediate(r));
    const sink = new Collector();
    sink.onAccessUnit = (au) => pub.push(au);
    sink.onTrack = (t) => pub.setTrack(t);
    const asm = new Jt1078StreamAssembler(sink, { alloc: (n) => pub.alloc(n), discard: (b) => pub.discard(b) });
    const wire = sparseParameterSets().wire;
    // the frames before the first key frame are dropped (nothing to decode), and so are those after a lost packet
    // until the next key frame: their memory goes back too
    const sent = [...wire.slice(40), ...wire.slice(0, 300), ...wire.slice(301)];
    for (const p of parsePackets(sent)) asm.push(p);
    asm.flush();
    assert.ok(asm.stats.reassembly.skippedFrames > 5, `skipped ${asm.stats.reassembly.skippedFrames}`);
    const expected = assemble(parsePackets(sent)).out.video();
    assert.equal(seen.length, expected.length);
    for (let i = 0; i < seen.length; i++) assert.ok(seen[i].equals(expected[i].payload), `unit ${i} as made without the bus's memory`);
    assert.equal(bus.chunks.counts.escaped, 0, 'no chunk left to the collector');
    assert.ok(bus.chunks.counts.reused > 20, `reused ${bus.chunks.counts.reused}`);
    stream.close('test over');
  });
});
