/**
 * The pieces on their own: RTSP message parsing (however TCP cuts it), Transport headers, play URLs, and the
 * packetisers (H.264 FU-A/STAP-A, H.265 FU/AP, AAC AU headers, G.711) rebuilt by independent depacketisers here.
 */
import assert from 'node:assert/strict';
import { joinAnnexB } from '../../../plugin-sdk/formats';
import { audioUnit, videoUnit, type AccessUnit, type StreamInfo, type TrackInfo } from '../../../plugin-sdk';
import { parsePlayUri } from '../src/play-url';
import { Packetizer, VIDEO, AUDIO, createRtpFormat, type RtpTrackState, type RtpUnit } from '../../../plugin-sdk/rtp';
import { epochMsOfNtp, ntpOf } from '../src/rtcp';
import { RtspReader, parseTransports, serializeResponse, type RtspItem as ParsedItem, type RtspReaderOptions } from '../../../plugin-sdk/rtsp';

/** the server's reader (rtsp-out reads its clients strictly) */
class RtspParser extends RtspReader {
  constructor(limits: Omit<RtspReaderOptions, 'mode'> = {}) {
    super({ mode: 'strict', requestsOnly: true, ...limits });
  }
}
import { prng, randomBytes } from '../../../test/support/prng';

function bytes(n: number, seed: number, first: number[]): Buffer {
  const b = randomBytes(prng(seed), n);
  Buffer.from(first).copy(b);
  // no start codes inside: 00 00 0x would split the NAL unit
  for (let i = 2; i < n; i++) if (b[i - 2] === 0 && b[i - 1] === 0) b[i] = 0xff;
  return b;
}

/** The NAL units of H.264 RTP packets (single, STAP-A, FU-A), in order. */
function rebuildH264(ps: Buffer[]): Buffer[] {
  const nals: Buffer[] = [];
  let fu: Buffer[] = [];
  for (const p of ps) {
    const pl = p.subarray(12);
    const t = pl[0] & 0x1f;
    if (t === 24) for (let at = 1; at < pl.length; at += 2 + pl.readUInt16BE(at)) nals.push(pl.subarray(at + 2, at + 2 + pl.readUInt16BE(at)));
    else if (t === 28) {
      if (pl[1] & 0x80) fu = [Buffer.from([(pl[0] & 0xe0) | (pl[1] & 0x1f)])];
      fu.push(pl.subarray(2));
      if (pl[1] & 0x40) nals.push(Buffer.concat(fu));
    } else nals.push(pl);
  }
  return nals;
}

/** the RTP packets of a unit, as a UDP reader gets them */
function packets(u: RtpUnit): Buffer[] {
  const out: Buffer[] = [];
  u.forEach((head, body) => out.push(Buffer.concat(body ? [head.subarray(4), body] : [head.subarray(4)])));
  return out;
}

const state = (): RtpTrackState => ({ ssrc: 0x11223344, seq: 65534, tsOffset: 0 });

describe('rtsp-out units: RTSP messages', () => {
  const req = 'DESCRIBE rtsp://h/live/a_1_1?reqId=x&token=y RTSP/1.0\r\nCSeq: 2\r\nAccept: application/sdp\r\n\r\n';
  const set = 'SET_PARAMETER * RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 5\r\n\r\nhello';
  const frame = Buffer.from([0x24, 1, 0, 3, 9, 9, 9]);
  const all = Buffer.concat([Buffer.from(req), frame, Buffer.from(set)]);

  function kinds(items: ParsedItem[]): string[] {
    return items.map((i) =>
      i.kind === 'request'
        ? `${i.request.method} ${i.request.headers.get('cseq')} ${i.request.body.toString()}`
        : i.kind === 'interleaved'
          ? `$${i.channel}:${i.data.length}`
          : i.kind === 'error'
            ? `error ${i.status}`
            : i.kind,
    );
  }

  it('reads requests, bodies and interleaved frames whole or a byte at a time', () => {
    const want = ['DESCRIBE 2 ', '$1:3', 'SET_PARAMETER 3 hello'];
    assert.deepEqual(kinds(new RtspParser().push(all)), want);
    const p = new RtspParser();
    const got: ParsedItem[] = [];
    for (let i = 0; i < all.length; i++) got.push(...p.push(all.subarray(i, i + 1)));
    assert.deepEqual(kinds(got), want);
    assert.equal(p.buffered, 0);
  });

  it('stops at the first error and holds nothing more', () => {
    const p = new RtspParser({ maxHeaderBytes: 100, maxBodyBytes: 10, maxHeaders: 4 });
    assert.deepEqual(kinds(p.push(Buffer.from('X'.repeat(101)))), ['error 400']);
    assert.deepEqual(p.push(Buffer.from(req)), []);
    assert.equal(p.buffered, 0);
    const many = new RtspParser({ maxHeaderBytes: 1000, maxBodyBytes: 10, maxHeaders: 2 });
    assert.deepEqual(kinds(many.push(Buffer.from('OPTIONS * RTSP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n'))), ['error 400']);
  });

  it('never writes a header value carrying CR or LF', () => {
    const r = serializeResponse(200, [
      ['CSeq', '1'],
      ['X', 'a\r\nInjected: yes'],
    ]).toString();
    assert.equal(r, 'RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n');
  });

  it('Transport headers: TCP and UDP, preference order, malformed left out', () => {
    assert.deepEqual(parseTransports('RTP/AVP/TCP;unicast;interleaved=0-1'), [{ lower: 'tcp', multicast: false, record: false, interleaved: [0, 1] }]);
    assert.deepEqual(parseTransports('RTP/AVP;unicast;client_port=5000-5001,RTP/AVP/TCP;unicast'), [
      { lower: 'udp', multicast: false, record: false, clientPort: [5000, 5001] },
      { lower: 'tcp', multicast: false, record: false },
    ]);
    assert.deepEqual(parseTransports('RTP/AVP/UDP;unicast;client_port=6000'), [{ lower: 'udp', multicast: false, record: false, clientPort: [6000, 6001] }]);
    assert.deepEqual(parseTransports('RTP/AVP;unicast;client_port=99999-1'), []);
    assert.deepEqual(parseTransports('RAW/RAW/UDP;unicast'), []);
    assert.equal(parseTransports('RTP/AVP;multicast')[0].multicast, true);
  });

  it('play URLs: absolute track URLs, a track appended after the query, path-only URIs, credentials dropped', () => {
    const { query, ...target } = parsePlayUri('rtsp://h:7554/live/1_2_1?reqId=r1&token=t%20x&via=video-thinner')!;
    assert.deepEqual(target, { stream: '1_2_1', reqId: 'r1', token: 't x', track: undefined, host: 'h:7554' });
    assert.equal(query.get('via'), 'video-thinner');
    assert.equal(parsePlayUri('rtsp://h/live/1_2_1/trackID=1?reqId=r&token=t')?.track, 1);
    const appended = parsePlayUri('rtsp://h/live/1_2_1?reqId=r&token=t/trackID=0');
    assert.deepEqual([appended?.track, appended?.token], [0, 't']);
    assert.equal(parsePlayUri('/live/1_2_1?reqId=r&token=t')?.stream, '1_2_1');
    assert.equal(parsePlayUri('rtsp://u:p@h/live/s?reqId=r&token=t')?.host, 'h');
    assert.equal(parsePlayUri('rtsp://h/vod/s'), undefined);
    assert.equal(parsePlayUri('rtsp://h/live/a/b'), undefined);
    assert.equal(parsePlayUri('rtsp://h/live/%zz'), undefined);
    assert.equal(parsePlayUri('*'), undefined);
  });
});

describe('rtsp-out units: packetisers', () => {
  it('H.264: STAP-A for the small NAL units, FU-A over the MTU, single NAL units between; marker on the last', () => {
    const sps = bytes(20, 1, [0x67, 0x42, 0xc0, 0x1e]);
    const pps = bytes(4, 2, [0x68]);
    const idr = bytes(5000, 3, [0x65]);
    const small = bytes(900, 4, [0x41]);
    const au = joinAnnexB([Buffer.from([0x09, 0xf0]), sps, pps, idr, small]);
    const u = new Packetizer(1400).h264(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: au }), [sps, pps], VIDEO, 96, 1234, state())!;
    const ps = packets(u);
    assert.ok(ps.every((p) => p.length <= 1400));
    assert.deepEqual(
      ps.map((p) => p.readUInt16BE(2)),
      ps.map((_p, i) => (65534 + i) & 0xffff),
      'sequence wraps',
    );
    assert.deepEqual(
      ps.map((p) => p[1] >> 7),
      ps.map((_p, i) => (i === ps.length - 1 ? 1 : 0)),
    );
    assert.ok(ps.every((p) => p.readUInt32BE(4) === 1234 && p.readUInt32BE(8) === 0x11223344));
    const nals = rebuildH264(ps);
    assert.deepEqual(nals, [sps, pps, idr, small], "the AUD is left out; the rest comes back as sent (the track's sets are not added again)");
    assert.equal(ps[0][12] & 0x1f, 24);
    assert.equal(ps[0][12] & 0x60, 0x60, 'STAP-A NRI is the highest of its units');
  });

  it("H.264: a key frame without an SPS of its own gets the track's SPS and PPS first; other frames get nothing added", () => {
    const sps = bytes(20, 11, [0x67, 0x42, 0xc0, 0x1e]);
    const pps = bytes(4, 12, [0x68]);
    const idr = bytes(3000, 13, [0x65]);
    const p = new Packetizer(1400);
    const key = packets(p.h264(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: joinAnnexB([idr]) }), [sps, pps], VIDEO, 96, 0, state())!);
    const nals = rebuildH264(key);
    assert.deepEqual(nals, [sps, pps, idr], 'SPS and PPS (one STAP-A) before the IDR slice');
    assert.equal(key[0][12] & 0x1f, 24);
    const p40 = videoUnit({ codec: 'h264', dts: 40, keyframe: false, payload: joinAnnexB([bytes(300, 14, [0x41])]) });
    const other = packets(p.h264(p40, [sps, pps], VIDEO, 96, 0, state())!);
    assert.deepEqual(
      rebuildH264(other).map((n) => n[0]),
      [0x41],
    );
  });

  it('H.265: AP for VPS/SPS/PPS, FU over the MTU (2-byte payload header, 1-byte FU header)', () => {
    const vps = bytes(24, 5, [0x40, 0x01]);
    const sps = bytes(40, 6, [0x42, 0x01]);
    const pps = bytes(8, 7, [0x44, 0x01]);
    const idr = bytes(4000, 8, [0x26, 0x01]);
    const au = joinAnnexB([vps, sps, pps, idr]);
    const ps = packets(new Packetizer(1000).h265(videoUnit({ codec: 'h265', dts: 0, keyframe: true, payload: au }), undefined, VIDEO, 96, 0, state())!);
    assert.ok(ps.every((p) => p.length <= 1000));
    const nals: Buffer[] = [];
    let fu: Buffer[] = [];
    for (const p of ps) {
      const pl = p.subarray(12);
      const t = (pl[0] >> 1) & 0x3f;
      if (t === 48) for (let at = 2; at < pl.length; at += 2 + pl.readUInt16BE(at)) nals.push(pl.subarray(at + 2, at + 2 + pl.readUInt16BE(at)));
      else if (t === 49) {
        if (pl[2] & 0x80) fu = [Buffer.from([(pl[0] & 0x81) | ((pl[2] & 0x3f) << 1), pl[1]])];
        fu.push(pl.subarray(3));
        if (pl[2] & 0x40) nals.push(Buffer.concat(fu));
      } else nals.push(pl);
    }
    assert.deepEqual(nals, [vps, sps, pps, idr]);
    assert.equal((ps[0][12] >> 1) & 0x3f, 48, 'the first packet is an AP');
  });

  it('AAC: one AU per packet behind its AU header; fragments over the MTU name the whole AU', () => {
    const frame = bytes(1000, 9, [0x21]);
    const ps = packets(new Packetizer(400).aac(frame, AUDIO, 97, 1024, state())!);
    assert.ok(ps.length > 1 && ps.every((p) => p.length <= 400));
    for (const p of ps) {
      assert.equal(p.readUInt16BE(12), 16, 'AU-headers-length: 16 bits');
      assert.equal(p.readUInt16BE(14) >> 3, 1000, 'AU-size: the whole AU');
    }
    assert.deepEqual(Buffer.concat(ps.map((p) => p.subarray(16))), frame);
    assert.deepEqual(
      ps.map((p) => p[1] >> 7),
      ps.map((_p, i) => (i === ps.length - 1 ? 1 : 0)),
    );
  });

  it('G.711: as received; a long frame split, each part timed by its first sample', () => {
    const frame = bytes(3000, 10, [0xd5]);
    const ps = packets(new Packetizer(1400).g711(frame, AUDIO, 8, 8000, state(), 1)!);
    assert.deepEqual(
      ps.map((p) => p.readUInt32BE(4)),
      [8000, 8000 + 1388, 8000 + 2 * 1388],
    );
    assert.deepEqual(Buffer.concat(ps.map((p) => p.subarray(12))), frame);
    assert.ok(ps.every((p) => (p[1] & 0x80) === 0 && (p[1] & 0x7f) === 8));
  });

  it('a unit laid out whole for one TCP write: its packets as interleaved frames, in order, byte for byte', () => {
    const sps = bytes(20, 1, [0x67, 0x42, 0xc0, 0x1e]);
    const pps = bytes(4, 2, [0x68]);
    const au = joinAnnexB([sps, pps, bytes(9000, 11, [0x65]), bytes(300, 12, [0x41])]);
    const units = [
      new Packetizer(1400).h264(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: au }), [sps, pps], VIDEO, 96, 0, state())!,
      new Packetizer(400).aac(bytes(1000, 9, [0x21]), AUDIO, 97, 1024, state())!,
      new Packetizer(1400).g711(bytes(160, 10, [0xd5]), AUDIO, 8, 8000, state(), 1)!,
    ];
    for (const u of units) {
      const pieces: Buffer[] = [];
      u.forEach((head, body) => pieces.push(body ? Buffer.concat([head, body]) : head));
      const want = Buffer.concat(pieces);
      assert.equal(u.wireBytes, want.length);
      // laid out after other bytes, as in a scratch slab: nothing before `at` or after the end is touched
      const into = Buffer.alloc(7 + want.length + 5, 0xee);
      assert.equal(u.copyWire(into, 7), 7 + want.length);
      assert.ok(into.subarray(7, 7 + want.length).equals(want), 'the frames differ from the packets forEach gives');
      assert.ok(into.subarray(0, 7).every((b) => b === 0xee) && into.subarray(7 + want.length).every((b) => b === 0xee));
      // each frame: '$', the track's default channel, the RTP length
      let n = 0;
      for (let at = 0; at < want.length; n++) {
        assert.equal(want[at], 0x24);
        assert.equal(want[at + 1], u.track * 2);
        at += 4 + want.readUInt16BE(at + 2);
      }
      assert.equal(n, u.count);
    }
  });

  it("catchUp: a GOP's packets made again as encode made them, same numbers; a unit it does not remember, or that packs otherwise now, left out", () => {
    const inc = { inc: () => undefined };
    const enc = createRtpFormat({ mtu: 600, packets: { video: inc, audio: inc }, encoders: () => undefined }).createEncoder({ name: 's' } as StreamInfo);
    const sps = bytes(20, 1, [0x67, 0x42, 0xc0, 0x1e]);
    const pps = bytes(4, 2, [0x68]);
    const tracks: TrackInfo[] = [
      { kind: 'video', codec: 'h264', sps, pps },
      { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 },
    ];
    enc.tracks!(tracks);
    const gop = (from: number): AccessUnit[] => {
      const out: AccessUnit[] = [];
      for (let i = 0; i < 12; i++) {
        const n = from + i;
        // the key frame without parameter sets of its own: the track's go first (what a tracks change alters)
        out.push(
          videoUnit({ codec: 'h264', dts: n * 40, keyframe: i === 0, payload: joinAnnexB([bytes(300 + ((n * 701) % 2500), n, [i === 0 ? 0x65 : 0x41])]) }),
        );
        out.push(audioUnit({ codec: 'g711a', dts: n * 40, timescale: 8000, payload: bytes(320, 1000 + n, [0xd5]) }));
      }
      return out;
    };
    const wire = (u: RtpUnit | undefined): Buffer | undefined => {
      if (u === undefined) return undefined;
      const b = Buffer.alloc(u.wireBytes);
      u.copyWire(b, 0);
      return b;
    };
    enc.encode(gop(0)[0]);
    const units = gop(100);
    const live = units.map((u) => wire(enc.encode(u)));
    // the units as the bus gives them again: new objects, the same times
    const again = units.map((u) => ({ ...u }));
    const made = enc.catchUp!(again, tracks).map(wire);
    assert.equal(made.length, units.length);
    for (let i = 0; i < units.length; i++) assert.ok(made[i] !== undefined && made[i]!.equals(live[i]!), `unit ${i}: not the packets encode made`);
    // the live sequence goes on from the last unit caught up: the next unit's first packet follows it
    const nextUnit = videoUnit({ codec: 'h264', dts: 112 * 40, keyframe: false, payload: joinAnnexB([bytes(200, 7, [0x41])]) });
    const next = enc.encode(nextUnit)!;
    const lastVideo = made.filter((b, i) => units[i].kind === 'video').at(-1)!;
    let lastSeq = -1;
    for (let at = 0; at < lastVideo.length; at += 4 + lastVideo.readUInt16BE(at + 2)) lastSeq = lastVideo.readUInt16BE(at + 6);
    assert.equal(next.firstSeq, (lastSeq + 1) & 0xffff);
    // a joiner after it gets the GOP so far, the unit just sent included, as the readers in step got it
    const later = enc.catchUp!([...again, { ...nextUnit }], tracks).map(wire);
    assert.ok(later.at(-1)!.equals(wire(next)!));
    for (let i = 0; i < units.length; i++) assert.ok(later[i]!.equals(live[i]!));
    // units it never encoded (another GOP's times): left out, not numbered anew
    assert.deepEqual(
      enc.catchUp!(gop(500), tracks).filter((f) => f !== undefined),
      [],
    );
    // the track's parameter sets changed since: the key frame packs into more packets now, and is left out; the rest is as it was
    enc.tracks!([{ kind: 'video', codec: 'h264', sps: bytes(400, 3, [0x67, 0x42, 0xc0, 0x1e]), pps }]);
    const changed = enc.catchUp!([...again, { ...nextUnit }], tracks).map(wire);
    assert.equal(changed[0], undefined, 'the key frame packs otherwise now');
    for (let i = 1; i < units.length; i++) assert.ok(changed[i]!.equals(live[i]!));
  });

  it('NTP timestamps: epoch ms round trip', () => {
    const ms = Date.UTC(2026, 10, 23, 22, 0, 0, 125);
    const n = ntpOf(ms);
    assert.equal(n.sec, Math.floor(ms / 1000) + 2_208_988_800);
    assert.ok(Math.abs(epochMsOfNtp(n.sec, n.frac) - ms) < 0.001);
  });
});
