/**
 * The webrtc-viewers bench's counting (support/bench-webrtc-viewer.ts): what a viewer's tracks hand up, told apart as
 * RTCP, video and audio RTP, frames by the marker bit and key frames by an IDR slice in any of RFC 6184's packet
 * shapes (single NAL unit, STAP-A, an FU-A's first fragment), with CSRCs and a header extension skipped.
 */
import assert from 'node:assert/strict';
import { AUDIO_PT, RtpCount, VIDEO_PT, isRtcp, rtpPayloadAt, startsIdr } from './support/bench-webrtc-viewer';

/** an RTP packet: `pt`, marker, optional CSRCs and a one-word header extension, then `payload` */
function rtp(pt: number, marker: boolean, payload: number[], o: { csrcs?: number; ext?: boolean } = {}): Buffer {
  const csrcs = o.csrcs ?? 0;
  const head = Buffer.alloc(12 + csrcs * 4 + (o.ext ? 8 : 0));
  head[0] = 0x80 | (o.ext ? 0x10 : 0) | csrcs;
  head[1] = (marker ? 0x80 : 0) | pt;
  if (o.ext) {
    const at = 12 + csrcs * 4;
    head.writeUInt16BE(0xbede, at);
    head.writeUInt16BE(1, at + 2);
  }
  return Buffer.concat([head, Buffer.from(payload)]);
}

const sps = [0x67, 0x42, 0xe0, 0x1f];
const pps = [0x68, 0xce];
/** STAP-A of SPS, PPS and a small IDR slice */
const stapWithIdr = [0x78, 0, sps.length, ...sps, 0, pps.length, ...pps, 0, 2, 0x65, 0x88];
const stapWithoutIdr = [0x78, 0, sps.length, ...sps, 0, pps.length, ...pps];
const fuStart = (type: number) => [0x7c, 0x80 | type, 1, 2, 3];
const fuMiddle = (type: number) => [0x7c, type, 4, 5, 6];
const fuEnd = (type: number) => [0x7c, 0x40 | type, 7, 8];

describe('webrtc-viewers bench: what a viewer counts', () => {
  it('finds the payload past CSRCs and a header extension, and refuses what is not RTP', () => {
    assert.equal(rtpPayloadAt(rtp(VIDEO_PT, false, [0x65])), 12);
    assert.equal(rtpPayloadAt(rtp(VIDEO_PT, false, [0x65], { csrcs: 2, ext: true })), 12 + 8 + 8);
    assert.equal(rtpPayloadAt(Buffer.alloc(8)), -1, 'too short');
    const v1 = rtp(VIDEO_PT, false, [0x65]);
    v1[0] = 0x40;
    assert.equal(rtpPayloadAt(v1), -1, 'version 1');
    const cut = rtp(VIDEO_PT, false, [], { ext: true }).subarray(0, 14);
    assert.equal(rtpPayloadAt(cut), -1, 'extension cut short');
  });

  it('tells RTCP from RTP by the second byte (RFC 5761)', () => {
    const rr = Buffer.from([0x81, 201, 0, 7, 0, 0, 0, 1]);
    assert.equal(isRtcp(rr), true);
    assert.equal(isRtcp(rtp(VIDEO_PT, true, [0x65])), false, 'a marked packet of PT 102 is 0xe6: not RTCP');
    assert.equal(isRtcp(rtp(72, false, [])), false, 'PT 72 unmarked is 72: not RTCP');
  });

  it('finds an IDR slice in a single NAL unit, a STAP-A and an FU-A start only', () => {
    const at = (p: number[]) => startsIdr(rtp(VIDEO_PT, false, p), 12);
    assert.equal(at([0x65, 0x88]), true);
    assert.equal(at([0x41, 0x9a]), false, 'non-IDR slice');
    assert.equal(at(stapWithIdr), true);
    assert.equal(at(stapWithoutIdr), false);
    assert.equal(at(fuStart(5)), true);
    assert.equal(at(fuMiddle(5)), false);
    assert.equal(at(fuStart(1)), false);
    assert.equal(at([0x78, 0, 40, 0x67]), false, 'a STAP-A whose size runs past the packet');
  });

  it('counts packets, bytes, frames and key frames by kind, and the window apart', () => {
    const c = new RtpCount();
    const key = [rtp(VIDEO_PT, false, stapWithoutIdr), rtp(VIDEO_PT, false, fuStart(5)), rtp(VIDEO_PT, false, fuMiddle(5)), rtp(VIDEO_PT, true, fuEnd(5))];
    const inter = [rtp(VIDEO_PT, false, fuStart(1)), rtp(VIDEO_PT, true, fuEnd(1))];
    const audio = rtp(AUDIO_PT, false, [0xd5, 0xd5]);
    for (const p of [...key, ...inter, audio]) c.push(p);
    c.measuring = true;
    for (const p of [...inter, audio, audio, rtp(VIDEO_PT, true, stapWithIdr)]) c.push(p);
    c.push(Buffer.from([0x80, 200, 0, 6, 0, 0, 0, 1])); // a sender report
    c.push(rtp(111, false, [1])); // a payload type not offered
    assert.equal(c.videoPackets, 4 + 2 + 2 + 1);
    assert.equal(c.audioPackets, 3);
    assert.equal(c.packets, 9 + 3 + 1, 'every RTP packet, the strange one too');
    assert.equal(c.videoFrames, 4);
    assert.equal(c.keyframes, 2);
    assert.equal(c.rtcp, 1);
    assert.equal(c.strange, 1);
    assert.equal(c.videoFramesInWindow, 2);
    assert.equal(c.audioPacketsInWindow, 2);
    assert.equal(c.packetsInWindow, 2 + 2 + 1 + 1);
    assert.equal(
      c.bytes,
      [...key, ...inter, audio, ...inter, audio, audio, rtp(VIDEO_PT, true, stapWithIdr), rtp(111, false, [1])].reduce((n, p) => n + p.length, 0),
    );
  });
});
