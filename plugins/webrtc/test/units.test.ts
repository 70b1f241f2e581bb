/** The WebRTC plugin's pure parts: reading offers, choosing codecs, the answer's candidate, RTP and RTCP bytes. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chooseG711, chooseH264, chooseH265, h264Profile, OfferError, parseOffer } from '../src/offer';
import { withCandidate } from '../src/peer';
import { isRtcp, keyFrameRequests, packetsOf, rewrite, rtpPayload } from '../src/rtp-wire';
import { RtpUnit, VIDEO } from '../../../plugin-sdk/rtp';
import { iceServerLinks } from '../src/whep-http';
import { repoRoot } from '../../../test/support/paths';

// an offer Chromium 156 (Debian, headless) made for recvonly video and audio, as the browser tests send it
const CHROMIUM_OFFER = fs.readFileSync(path.join(repoRoot, 'plugins/webrtc/test/chromium-156-offer.sdp'), 'utf8');

/** a browser's RTP packet from `pt`, `seq`, `ts`, `ssrc` and a payload (talk's downlink audio). */
export function rtpPacket(pt: number, marker: boolean, seq: number, ts: number, ssrc: number, payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(12 + payload.length);
  out[0] = 0x80;
  out[1] = (marker ? 0x80 : 0) | pt;
  out.writeUInt16BE(seq & 0xffff, 2);
  out.writeUInt32BE(ts >>> 0, 4);
  out.writeUInt32BE(ssrc >>> 0, 8);
  payload.copy(out, 12);
  return out;
}

describe('webrtc: offers, codecs, candidates, RTP', () => {
  it("reads Chromium's offer: two sections, their mids and directions, H.264 variants with their fmtp, G.711", () => {
    const o = parseOffer(CHROMIUM_OFFER);
    assert.deepEqual(
      o.media.map((m) => `${m.kind} ${m.mid} ${m.direction}`),
      ['video 0 recvonly', 'audio 1 recvonly'],
    );
    const h264 = o.media[0].codecs.filter((c) => c.name === 'H264');
    assert.equal(h264.length, 8);
    assert.deepEqual(
      h264.filter((c) => c.fmtp.get('packetization-mode') === '1').map((c) => `${c.pt}:${c.fmtp.get('profile-level-id')}`),
      ['102:42001f', '108:42e01f', '116:4d001f', '41:f4001f'],
    );
    assert.equal(chooseH265(o.media[0]), undefined, 'this Chromium offers no H.265');
    assert.equal(chooseG711(o.media[1], 'PCMA')?.pt, 8);
    assert.equal(chooseG711(o.media[1], 'PCMU')?.pt, 0);
  });

  it("picks the payload type whose profile is the SPS's, else one whose decoder plays it, and never packetization mode 0", () => {
    const v = parseOffer(CHROMIUM_OFFER).media[0];
    const pick = (sps: [number, number] | undefined) => chooseH264(v, sps && h264Profile(...sps))?.pt;
    assert.equal(pick([0x42, 0xe0]), 108, 'constrained baseline');
    assert.equal(pick([0x42, 0x00]), 102, 'baseline');
    assert.equal(pick([0x4d, 0x40]), 116, 'main');
    assert.equal(pick([0x64, 0x00]), 102, 'high: offered by none here, so the first mode-1 type (the decoder reads the SPS)');
    assert.equal(pick([0xf4, 0x00]), 41, 'high 4:4:4 predictive');
    assert.equal(pick(undefined), 108, 'before the stream has an SPS: constrained baseline');
    const mode0 = parseOffer(CHROMIUM_OFFER.replace(/packetization-mode=1/g, 'packetization-mode=0')).media[0];
    assert.equal(chooseH264(mode0, 'constrained-baseline'), undefined);
  });

  it('refuses what is no WebRTC offer, saying why', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /must start with v=0/],
      ['v=0\r\n', /no media section/],
      [CHROMIUM_OFFER.replace(/a=ice-ufrag:.*\r\n/g, '').replace(/a=ice-pwd:.*\r\n/g, ''), /no ICE credentials/],
      [CHROMIUM_OFFER.replace(/a=fingerprint:.*\r\n/g, ''), /no DTLS fingerprint/],
      [CHROMIUM_OFFER.replace(/a=mid:.*\r\n/g, ''), /usable mid/],
      [CHROMIUM_OFFER.replace('m=audio 9 UDP', 'm=audio nine UDP'), /malformed media line/],
      [`${CHROMIUM_OFFER}a=x:${'y'.repeat(5000)}\r\n`, /over 4096 characters/],
    ];
    for (const [sdp, why] of cases)
      assert.throws(
        () => parseOffer(sdp),
        (e: Error) => e instanceof OfferError && why.test(e.message),
        why.source,
      );
  });

  it("writes one host candidate at the public address into every section, and none of the library's", () => {
    const answer =
      'v=0\r\ns=-\r\nm=video 9 UDP/TLS/RTP/SAVPF 102\r\na=mid:0\r\na=candidate:2 1 UDP 2116026111 fd00::2 44093 typ host\r\na=end-of-candidates\r\nm=audio 9 UDP/TLS/RTP/SAVPF 8\r\na=mid:1\r\n';
    const out = withCandidate(answer, '203.0.113.7', 7090);
    assert.ok(!out.includes('fd00::2'));
    assert.equal(out.match(/a=candidate:1 1 UDP 2130706431 203\.0\.113\.7 7090 typ host\r\na=end-of-candidates/g)?.length, 2);
    assert.ok(out.endsWith('\r\n') && !out.includes('\r\n\r\n'));
  });

  it("makes a unit's packets whole once for all sessions, and gives each session its payload type, sequence and SSRC, the marker kept", () => {
    // a unit of two packets as the stream form keeps them: heads (4-byte prefix, RTP header, FU header) in one chunk,
    // then the table (head length, payload from, to), bodies as ranges of the payload
    const h1 = Buffer.from([0x24, 0, 0, 0, 0x80, 96, 0x12, 0x34, 0, 0, 0x0e, 0x10, 1, 2, 3, 4, 0x7c, 0x85]);
    const h2 = Buffer.from([0x24, 0, 0, 0, 0x80, 0x80 | 96, 0x12, 0x35, 0, 0, 0x0e, 0x10, 1, 2, 3, 4, 0x7c, 0x45]);
    const table = Buffer.alloc(24);
    [h1.length, 0, 5, h2.length, 5, 9].forEach((v, k) => table.writeUInt32LE(v, 4 * k));
    const unit = new RtpUnit(VIDEO, Buffer.concat([h1, h2, table]), 0, h1.length + h2.length, 2, Buffer.from('abcdefghi'), 0x1234, 0x0e10, 0x01020304, 0);
    const all = packetsOf(unit);
    assert.equal(packetsOf(unit), all, 'made once, then the same for the next session');
    assert.deepEqual(
      all.packets.map((p) => p.subarray(12).toString('latin1')),
      ['\x7c\x85abcde', '\x7c\x45fghi'],
    );
    const a = { pt: 108, ssrc: 0xdeadbeef, seq: 65535 };
    rewrite(all.packets[0], a);
    assert.equal(all.packets[0][1], 108, 'no marker on the first');
    assert.equal(all.packets[0].readUInt16BE(2), 65535);
    assert.equal(all.packets[0].readUInt32BE(4), 0x0e10, "the timestamp is the stream's");
    assert.equal(all.packets[0].readUInt32BE(8), 0xdeadbeef);
    rewrite(all.packets[1], a);
    assert.equal(all.packets[1][1], 0x80 | 108, 'the marker kept');
    assert.equal(all.packets[1].readUInt16BE(2), 0, 'the sequence wraps');
    // the next session writes its own values over the same bytes
    rewrite(all.packets[1], { pt: 41, ssrc: 7, seq: 9 });
    assert.deepEqual([all.packets[1][1], all.packets[1].readUInt16BE(2), all.packets[1].readUInt32BE(8)], [0x80 | 41, 9, 7]);
  });

  it("reads the browser's packets: RTCP told from RTP, PLI and FIR counted in a compound packet, talk audio past header extensions", () => {
    const rr = Buffer.from([0x81, 201, 0, 7, ...Array(28).fill(0)]);
    const pli = Buffer.from([0x81, 206, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2]);
    const fir = Buffer.from([0x84, 206, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]);
    assert.ok(isRtcp(rr) && isRtcp(pli));
    assert.equal(keyFrameRequests(Buffer.concat([rr, pli, fir])), 2);
    assert.equal(keyFrameRequests(rr), 0);
    const audio = Buffer.alloc(160, 0xd5);
    const plain = rtpPacket(8, true, 7, 160, 99, audio);
    assert.ok(!isRtcp(plain));
    assert.deepEqual(rtpPayload(plain)?.payload, audio);
    // one-byte header extension (RFC 8285): 0xBEDE, one word
    const ext = Buffer.concat([Buffer.from([0x90, 8, 0, 8, 0, 0, 1, 64, 0, 0, 0, 99, 0xbe, 0xde, 0, 1, 0x10, 0xff, 0, 0]), audio]);
    const got = rtpPayload(ext);
    assert.equal(got?.pt, 8);
    assert.deepEqual(got?.payload, audio);
    assert.equal(rtpPayload(Buffer.from([0x90, 8, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0xbe, 0xde, 0, 9])), undefined, 'an extension past the end');
  });

  it('hands STUN and TURN servers to clients as Link headers, credentials quoted, nothing injected', () => {
    assert.deepEqual(iceServerLinks({ iceServers: [] }), {});
    const l = iceServerLinks({
      iceServers: [{ urls: 'stun:stun.example.com:3478' }, { urls: 'turn:turn.example.com:443?transport=tcp', username: 'u"1\r\n', credential: 'p' }],
    });
    assert.equal(
      l.Link,
      '<stun:stun.example.com:3478>; rel="ice-server", <turn:turn.example.com:443?transport=tcp>; rel="ice-server"; username="u1"; credential="p"; credential-type="password"',
    );
  });

  it('a fuzzed offer is read or refused with an OfferError, never anything else', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const base = Buffer.from(CHROMIUM_OFFER, 'latin1');
    let read = 0;
    for (let i = 0; i < 3000; i++) {
      const b = Buffer.from(base);
      for (let k = 0, n = 1 + rnd(20); k < n; k++) b[rnd(b.length)] = rnd(256);
      const cut = rnd(4) === 0 ? b.subarray(0, rnd(b.length)) : b;
      try {
        const o = parseOffer(cut.toString('latin1'));
        // a plan must still be possible to make from what was read
        for (const m of o.media) chooseH264(m, undefined);
        read++;
      } catch (err) {
        assert.ok(err instanceof OfferError, `iteration ${i}: ${(err as Error).stack}`);
      }
    }
    assert.ok(read > 100, `some mutated offers still read: ${read}`);
  });
});
