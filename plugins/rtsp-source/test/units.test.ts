/** The pieces on their own: depacketisers, Digest, SDP, the RTSP byte stream, URL redaction. */
import assert from 'node:assert/strict';
import { digestHeader, parseChallenges } from '../src/auth';
import { AacDepacketizer, parseAacConfig } from '../src/depacketize/audio';
import { h264Depacketizer, h265Depacketizer } from '../src/depacketize/video';
import { parseRtp, TimestampUnwrapper, type RtpPacket } from '../src/rtp';
import { RtspReader, type RtspResponse as RtspMessage } from '../../../plugin-sdk/rtsp';

/** the client's reader (rtsp-source reads cameras leniently), with callbacks per item */
class RtspWireParser {
  private readonly r = new RtspReader({ mode: 'resync' });
  constructor(private readonly h: { message(m: RtspMessage): void; interleaved(ch: number, data: Buffer): void; malformed(what: string): void }) {}
  push(chunk: Buffer): void {
    for (const it of this.r.push(chunk)) {
      if (it.kind === 'response') this.h.message(it.response);
      else if (it.kind === 'interleaved') this.h.interleaved(it.channel, it.data);
      else if (it.kind === 'skipped') this.h.malformed(it.what);
    }
  }
}
import { parseSdp, type SdpMedia } from '../src/sdp';
import { parseSourceUrl, redactText } from '../src/url';
import { TrackReceiver } from '../src/tracks';
import type { AccessUnit } from '../../../plugin-sdk';

const pkt = (payload: Buffer, o: { ts?: number; marker?: boolean; seq?: number } = {}): RtpPacket => ({
  payloadType: 96,
  marker: o.marker ?? true,
  seq: o.seq ?? 0,
  timestamp: o.ts ?? 1000,
  ssrc: 1,
  payload,
});
const SC = Buffer.from([0, 0, 0, 1]);

describe('rtsp-source pieces', () => {
  describe('H.264 (RFC 6184)', () => {
    const sps = Buffer.from([0x67, 0x42, 0xc0, 0x1e, 0xd9]);
    const pps = Buffer.from([0x68, 0xce, 0x3c, 0x80]);
    const idr = Buffer.concat([Buffer.from([0x65]), Buffer.alloc(3000, 7)]);

    it('joins STAP-A and FU-A into one Annex-B keyframe', () => {
      const d = h264Depacketizer({}, 1 << 20);
      const stap = Buffer.concat([Buffer.from([0x78]), u16(sps.length), sps, u16(pps.length), pps]);
      assert.deepEqual(d.push(pkt(stap, { marker: false, seq: 1 }), false), []);
      const body = idr.subarray(1);
      const fus = [body.subarray(0, 1000), body.subarray(1000, 2000), body.subarray(2000)];
      const out = fus.flatMap((part, i) =>
        d.push(pkt(Buffer.concat([Buffer.from([0x7c, (i === 0 ? 0x80 : 0) | (i === 2 ? 0x40 : 0) | 5]), part]), { marker: i === 2, seq: 2 + i }), false),
      );
      assert.equal(out.length, 1);
      assert.equal(out[0].keyframe, true);
      assert.deepEqual(out[0].payload, Buffer.concat([SC, sps, SC, pps, SC, idr]));
    });

    it('puts the SDP parameter sets in front of a keyframe that lacks them', () => {
      const d = h264Depacketizer({ 'sprop-parameter-sets': `${sps.toString('base64')},${pps.toString('base64')}` }, 1 << 20);
      const [f] = d.push(pkt(idr), false);
      assert.deepEqual(f.payload, Buffer.concat([SC, sps, SC, pps, SC, idr]));
    });

    it('drops a unit with a hole, and what follows until a keyframe', () => {
      const d = h264Depacketizer({}, 1 << 20);
      d.push(pkt(Buffer.from([0x7c, 0x85, 1, 2]), { marker: false, seq: 1 }), false);
      assert.deepEqual(d.push(pkt(Buffer.from([0x7c, 0x45, 3]), { seq: 3 }), true), [], 'FU end after a lost middle');
      assert.deepEqual(d.push(pkt(Buffer.from([0x41, 9, 9]), { ts: 4000, seq: 4 }), false), [], 'P frame while waiting for a keyframe');
      const out = d
        .push(pkt(Buffer.concat([sps]), { ts: 7000, marker: false, seq: 5 }), false)
        .concat(d.push(pkt(Buffer.from([0x65, 1]), { ts: 7000, seq: 6 }), false));
      assert.equal(out.length, 1);
      assert.equal(out[0].keyframe, true);
      assert.ok(d.stats.droppedFrames >= 2);
    });

    it('ends a unit where the timestamp changes, for cameras that never set the marker', () => {
      const d = h264Depacketizer({}, 1 << 20);
      assert.deepEqual(d.push(pkt(Buffer.from([0x41, 1]), { ts: 1, marker: false, seq: 1 }), false), []);
      const out = d.push(pkt(Buffer.from([0x41, 2]), { ts: 2, marker: false, seq: 2 }), false);
      assert.equal(out.length, 1);
      assert.deepEqual(out[0].payload, Buffer.concat([SC, Buffer.from([0x41, 1])]));
    });

    it('counts malformed payloads instead of throwing', () => {
      const d = h264Depacketizer({}, 1 << 20);
      for (const b of [Buffer.from([0x78, 0, 9, 1]), Buffer.from([0x7c]), Buffer.from([0x99, 1]), Buffer.from([0x7d, 0x80, 1]), Buffer.alloc(0)])
        d.push(pkt(b), false);
      assert.equal(d.stats.malformed, 5);
    });
  });

  describe('H.265 (RFC 7798)', () => {
    const nal = (type: number, body: number[]) => Buffer.from([type << 1, 1, ...body]);
    it('joins an AP of VPS/SPS/PPS and an FU of an IDR', () => {
      const vps = nal(32, [1]);
      const sps = nal(33, [2]);
      const pps = nal(34, [3]);
      const ap = Buffer.concat([Buffer.from([48 << 1, 1]), u16(vps.length), vps, u16(sps.length), sps, u16(pps.length), pps]);
      const d = h265Depacketizer({}, 1 << 20);
      d.push(pkt(ap, { marker: false, seq: 1 }), false);
      d.push(pkt(Buffer.from([49 << 1, 1, 0x80 | 19, 0xaa]), { marker: false, seq: 2 }), false);
      const out = d.push(pkt(Buffer.from([49 << 1, 1, 0x40 | 19, 0xbb]), { seq: 3 }), false);
      assert.equal(out.length, 1);
      assert.equal(out[0].keyframe, true);
      assert.deepEqual(out[0].payload, Buffer.concat([SC, vps, SC, sps, SC, pps, SC, Buffer.from([19 << 1, 1, 0xaa, 0xbb])]));
    });
  });

  describe('AAC (RFC 3640, AAC-hbr)', () => {
    const fmtp = { sizelength: '13', indexlength: '3', indexdeltalength: '3', mode: 'AAC-hbr', config: '1408' };
    it('reads the AudioSpecificConfig', () => {
      assert.deepEqual(parseAacConfig('1408'), { config: Buffer.from('1408', 'hex'), sampleRate: 16000, channels: 1, frameSamples: 1024 });
      assert.equal(parseAacConfig('zz'), undefined);
    });
    it('splits several AUs of a packet, each 1024 samples on', () => {
      const d = new AacDepacketizer(fmtp, 1024, 1 << 20);
      const a = Buffer.alloc(10, 1);
      const b = Buffer.alloc(20, 2);
      const headers = Buffer.from([0, 32, (10 >> 5) & 0xff, (10 << 3) & 0xff, (20 >> 5) & 0xff, (20 << 3) & 0xff]);
      const out = d.push(pkt(Buffer.concat([headers, a, b]), { ts: 0xfffffc00 }), false);
      assert.deepEqual(
        out.map((f) => [f.payload.length, f.timestamp]),
        [
          [10, 0xfffffc00],
          [20, 0],
        ],
      );
    });
    it('joins a fragmented AU and drops one whose fragments stop', () => {
      const d = new AacDepacketizer(fmtp, 1024, 1 << 20);
      const size = 30;
      const h = Buffer.from([0, 16, (size >> 5) & 0xff, (size << 3) & 0xff]);
      assert.deepEqual(d.push(pkt(Buffer.concat([h, Buffer.alloc(12, 1)]), { marker: false, seq: 1 }), false), []);
      const out = d.push(pkt(Buffer.concat([h, Buffer.alloc(18, 2)]), { seq: 2 }), false);
      assert.equal(out.length, 1);
      assert.equal(out[0].payload.length, 30);
      d.push(pkt(Buffer.concat([h, Buffer.alloc(12, 1)]), { marker: false, seq: 3 }), false);
      assert.deepEqual(d.push(pkt(Buffer.concat([h, Buffer.alloc(5, 2)]), { seq: 5 }), true), []);
    });
  });

  describe('RTP', () => {
    it('parses CSRCs, an extension and padding, and refuses what overruns', () => {
      const b = Buffer.from([0xb1, 0xe0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 2, 0xbe, 0xde, 0, 1, 1, 2, 3, 4, 0xaa, 0xbb, 0, 2]);
      const p = parseRtp(b)!;
      assert.equal(p.marker, true);
      assert.equal(p.payloadType, 96);
      assert.deepEqual(p.payload, Buffer.from([0xaa, 0xbb]));
      assert.equal(parseRtp(Buffer.from([0x80, 96, 0, 1])), undefined);
      assert.equal(parseRtp(Buffer.concat([Buffer.from([0xa0, 96]), Buffer.alloc(10), Buffer.from([200])])), undefined);
    });
    it('unwraps 32-bit timestamps across the wrap', () => {
      const u = new TimestampUnwrapper();
      assert.equal(u.unwrap(0xffffff00), 0xffffff00);
      assert.equal(u.unwrap(0x100), 0x1_0000_0100);
      assert.equal(u.unwrap(0xfffffff0), 0xfffffff0);
    });
  });

  describe('Digest (RFC 2617)', () => {
    it("answers the RFC's own example", () => {
      const [c] = parseChallenges([
        'Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"',
      ]);
      const h = digestHeader(c, 'Mufasa', 'Circle Of Life', 'GET', '/dir/index.html', 1, '0a4f113b');
      assert.match(h, /response="6629fae49393a05397450978507c4ef1"/);
      assert.match(h, /qop=auth, nc=00000001, cnonce="0a4f113b"/);
    });
    it('parses several challenges in one header', () => {
      const cs = parseChallenges(['Digest realm="cam", nonce="abc==", stale=TRUE, Basic realm="cam"']);
      assert.deepEqual(
        cs.map((c) => c.scheme),
        ['digest', 'basic'],
      );
      assert.equal(cs[0].params.nonce, 'abc==');
      assert.equal(cs[0].params.stale, 'TRUE');
    });
  });

  describe('SDP', () => {
    it('finds tracks, their codecs and control URLs', () => {
      const sdp = [
        'v=0',
        'o=- 0 0 IN IP4 127.0.0.1',
        's=cam',
        'a=control:*',
        'm=video 0 RTP/AVP 96',
        'a=rtpmap:96 H264/90000',
        'a=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z0IAHg==,aM4G4g==',
        'a=control:trackID=1',
        'm=audio 0 RTP/AVP 8',
        'a=control:rtsp://other/x',
        'm=audio 0 RTP/AVP 97',
        'a=rtpmap:97 MP4A-LATM/44100',
        'garbage',
      ].join('\r\n');
      const s = parseSdp(sdp, 'rtsp://cam/live');
      assert.deepEqual(
        s.media.map((m) => [m.type, m.codec, m.clockRate, m.control]),
        [
          ['video', 'h264', 90000, 'rtsp://cam/live/trackID=1'],
          ['audio', 'g711a', 8000, 'rtsp://other/x'],
          ['audio', undefined, 44100, 'rtsp://cam/live'],
        ],
      );
      assert.equal(s.media[0].fmtp['packetization-mode'], '1');
      assert.equal(s.badLines, 1);
    });
  });

  describe('RTSP byte stream', () => {
    it('reads responses and interleaved frames, and skips junk between them', () => {
      const msgs: RtspMessage[] = [];
      const frames: number[] = [];
      let junk = 0;
      const p = new RtspWireParser({ message: (m) => msgs.push(m), interleaved: (ch) => frames.push(ch), malformed: () => junk++ });
      const all = Buffer.concat([
        Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: 3\r\n\r\nabc'),
        Buffer.from([0x24, 0, 0, 2, 1, 2]),
        Buffer.from('\x01\x02junk'),
        Buffer.from([0x24, 1, 0, 1, 9]),
        Buffer.from('NOT A START LINE\r\n\r\n'),
        Buffer.from('RTSP/1.0 401 Unauthorized\r\nCSeq: 2\r\nWWW-Authenticate: Basic realm="a"\r\nWWW-Authenticate: Digest realm="a", nonce="n"\r\n\r\n'),
      ]);
      // byte by byte: every split point is a chunk boundary once
      for (let i = 0; i < all.length; i++) p.push(all.subarray(i, i + 1));
      assert.deepEqual(
        msgs.map((m) => m.status),
        [200, 401],
      );
      assert.equal(msgs[0].body.toString(), 'abc');
      assert.equal(msgs[1].headers.all('www-authenticate').length, 2);
      assert.deepEqual(frames, [0, 1]);
      assert.ok(junk >= 2);
    });
  });

  describe('source URL', () => {
    it('takes credentials from the URL over user/pwd, and shows neither password', () => {
      const s = parseSourceUrl('rtsp://adm%40in:p%3Ass@10.0.0.5/Streaming/101?password=x&ch=1', 'u', 'pw');
      assert.equal(s.user, 'adm@in');
      assert.equal(s.pwd, 'p:ss');
      assert.equal(s.port, 554);
      assert.equal(s.requestUrl, 'rtsp://10.0.0.5/Streaming/101?password=x&ch=1');
      assert.equal(s.redacted, 'rtsp://adm%40in@10.0.0.5/Streaming/101?password=***&ch=1');
      const t = parseSourceUrl('rtsps://cam:8322/x', 'u', 'pw');
      assert.deepEqual([t.tls, t.user, t.pwd, t.redacted], [true, 'u', 'pw', 'rtsps://u@cam:8322/x']);
      assert.equal(redactText('failed for p:ss (p%3Ass)', ['p:ss']), 'failed for *** (***)');
    });
  });
});

describe('rtsp-source: fuzzed input', () => {
  /** xorshift32: the same bytes every run, so a failure can be replayed */
  function rng(seed: number): () => number {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      return x / 0x1_0000_0000;
    };
  }
  const medias: SdpMedia[] = [
    { type: 'video', payloadType: 96, encoding: 'H264', codec: 'h264', clockRate: 90000, channels: 1, fmtp: {}, control: '' },
    { type: 'video', payloadType: 96, encoding: 'H265', codec: 'h265', clockRate: 90000, channels: 1, fmtp: { 'sprop-max-don-diff': '2' }, control: '' },
    {
      type: 'audio',
      payloadType: 96,
      encoding: 'MPEG4-GENERIC',
      codec: 'aac',
      clockRate: 16000,
      channels: 1,
      fmtp: { sizelength: '13', indexlength: '3', indexdeltalength: '3', mode: 'AAC-hbr', config: '1408', ctsdeltalength: '4', randomaccessindication: '1' },
      control: '',
    },
    { type: 'audio', payloadType: 96, encoding: 'PCMA', codec: 'g711a', clockRate: 8000, channels: 2, fmtp: {}, control: '' },
  ];

  it('20,000 mutated RTP packets per payload format: no throw, units well formed', () => {
    for (const media of medias) {
      const rand = rng(0x5eed + media.encoding.length);
      const units: AccessUnit[] = [];
      const r = new TrackReceiver(media, undefined, () => 0, { track: () => undefined, unit: (u) => units.push(u) }, 64 * 1024);
      let seq = 0;
      let ts = 0;
      for (let i = 0; i < 20_000; i++) {
        const len = 12 + Math.floor(rand() * 60);
        const b = Buffer.alloc(len);
        for (let j = 0; j < len; j++) b[j] = Math.floor(rand() * 256);
        // mostly valid headers, so the payload parsers see the garbage
        if (rand() < 0.9) {
          b[0] = 0x80 | (rand() < 0.05 ? 0x30 : 0);
          b[1] = 96 | (rand() < 0.3 ? 0x80 : 0);
          seq = (seq + (rand() < 0.95 ? 1 : Math.floor(rand() * 5))) & 0xffff;
          b.writeUInt16BE(seq, 2);
          if (rand() < 0.3) ts = (ts + Math.floor(rand() * 6000)) >>> 0;
          b.writeUInt32BE(ts, 4);
          // H.264/H.265 payload headers of the interesting kinds
          if (media.codec === 'h264' && rand() < 0.7) b[12] = [0x65, 0x41, 0x67, 0x68, 0x78, 0x7c][Math.floor(rand() * 6)];
          if (media.codec === 'h265' && rand() < 0.7) b[12] = [19 << 1, 1 << 1, 32 << 1, 48 << 1, 49 << 1][Math.floor(rand() * 5)];
          // AAC: often one right AU header (17 bits: size 5, index 0, the random-access flag) before the garbage
          if (media.codec === 'aac' && len >= 22 && rand() < 0.5) b.set([0x00, 0x11, 0x00, 0x28, 0x80], 12);
        }
        r.rtp(b);
      }
      let last = -Infinity;
      for (const u of units) {
        assert.ok(Number.isInteger(u.dtsTicks) && u.dtsTicks > last, `${media.encoding}: decode times go forward`);
        assert.ok(u.ptsTicks >= u.dtsTicks);
        assert.ok(u.payload.length > 0);
        last = u.dtsTicks;
      }
      // the garbage must reach the units: some of it is well formed enough to be published
      assert.ok(units.length > 50, `${media.encoding}: ${units.length} units from the fuzz`);
      assert.ok(r.depack.stats.malformed > 0 || media.codec === 'g711a', `${media.encoding}: malformed payloads counted`);
    }
  });

  it('20,000 random chunks into the RTSP byte stream parser: no throw', () => {
    const rand = rng(42);
    let events = 0;
    const p = new RtspWireParser({ message: () => events++, interleaved: () => events++, malformed: () => events++ });
    const pieces = [
      Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: 5\r\n\r\nhello'),
      Buffer.from([0x24, 0, 0, 3, 1, 2, 3]),
      Buffer.from('$\u0001\u00ff\u00ff'),
      Buffer.from('RTSP/1.0 200 OK\r\nContent-Length: -4\r\n\r\n'),
      Buffer.from('GET_PARAMETER rtsp://x RTSP/1.0\r\nCSeq: 3\r\n\r\n'),
    ];
    for (let i = 0; i < 20_000; i++) {
      const base = pieces[Math.floor(rand() * pieces.length)];
      const b = Buffer.from(base);
      if (rand() < 0.5) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
      p.push(b.subarray(0, Math.max(1, Math.floor(rand() * b.length) + 1)));
    }
    assert.ok(events > 0);
  });
});

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
