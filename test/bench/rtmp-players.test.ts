/**
 * The rtmp-players bench's own parts: its RTMP client against a scripted server (split reads, small chunks,
 * interleaved chunk streams, acknowledgements, a refusal), and one short run of the bench at 5 streams where every
 * player of both kinds must get media.
 */
import assert from 'node:assert/strict';
import { amf0, rtmpMessage, RtmpBenchPlayer } from './support/bench-rtmp-player';
import { runOptions, parseArgs } from './rtmp-players';

/** a message in chunks of `size` on chunk stream `cid` (type 0, then type 3 headers), as an array of header and part buffers */
function chunked(cid: number, type: number, ts: number, body: Buffer, size: number): Buffer[] {
  const h = Buffer.alloc(12);
  h[0] = cid;
  h.writeUIntBE(ts, 1, 3);
  h.writeUIntBE(body.length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(1, 8);
  const out: Buffer[] = [h];
  for (let at = 0; at < body.length; at += size) {
    if (at > 0) out.push(Buffer.from([0xc0 | cid]));
    out.push(body.subarray(at, at + size));
  }
  return out;
}

/** feeds `b` in pieces of 1 to 97 bytes */
function feed(p: RtmpBenchPlayer, b: Buffer): void {
  for (let at = 0, k = 1; at < b.length; at += k, k = ((k * 7 + 3) % 97) + 1) p.push(b.subarray(at, Math.min(b.length, at + k)));
}

function scripted(): { player: RtmpBenchPlayer; written: Buffer[] } {
  const player = new RtmpBenchPlayer(undefined);
  const written: Buffer[] = [];
  const socket = {
    destroyed: false,
    write: (b: Buffer) => written.push(Buffer.from(b)),
    destroy: () => {
      socket.destroyed = true;
    },
  };
  (player as { socket?: unknown }).socket = socket;
  return { player, written };
}

const handshake = (): Buffer => {
  const s = Buffer.alloc(1 + 2 * 1536);
  s[0] = 3;
  for (let i = 1; i < s.length; i++) s[i] = i & 0xff;
  return s;
};

describe('rtmp-players bench', () => {
  it('its RTMP client plays through small chunks, interleaved streams and split reads, and acknowledges', () => {
    const { player, written } = scripted();
    const s = handshake();
    feed(player, s);
    assert.deepEqual(written[0], s.subarray(1, 1537), 'C2 echoes S1');
    assert.ok(
      written.some((b) => b.includes(Buffer.from('connect'))),
      'connect sent',
    );
    const win = Buffer.alloc(4);
    win.writeUInt32BE(20_000);
    const small = Buffer.alloc(4);
    small.writeUInt32BE(100);
    feed(
      player,
      Buffer.concat([
        rtmpMessage(2, 5, 0, win),
        rtmpMessage(2, 1, 0, small),
        ...chunked(3, 20, 0, amf0(['_result', 1, { fmsVer: 'x' }, { code: 'NetConnection.Connect.Success' }]), 100),
      ]),
    );
    assert.ok(
      written.some((b) => b.includes(Buffer.from('createStream'))),
      'createStream sent',
    );
    feed(player, Buffer.concat(chunked(3, 20, 0, amf0(['_result', 2, null, 1]), 100)));
    const play = written.find((b) => b.includes(Buffer.from('play')));
    assert.ok(play && play[0] === 8 && play.readUInt32LE(8) === 1, 'play sent on the stream createStream gave');
    feed(player, Buffer.concat(chunked(3, 20, 0, amf0(['onStatus', 0, null, { level: 'status', code: 'NetStream.Play.Start' }]), 100)));
    assert.equal(player.playing, true);
    player.measuring = true;
    const config = Buffer.concat([Buffer.from([0x17, 0]), Buffer.alloc(40)]);
    const key = Buffer.concat([Buffer.from([0x17, 1]), Buffer.alloc(5000, 7)]);
    const inter = Buffer.concat([Buffer.from([0x27, 1]), Buffer.alloc(3000, 9)]);
    const aac = Buffer.from([0xaf, 1, 1, 2, 3]);
    const v = chunked(5, 9, 40, key, 100);
    const a = chunked(4, 8, 40, aac, 100);
    // an audio message between a key frame's chunks: each chunk stream keeps its own message
    const media = Buffer.concat([...chunked(5, 9, 40, config, 100), ...v.slice(0, 6), ...a, ...v.slice(6), ...chunked(5, 9, 80, inter, 100)]);
    for (let i = 0; i < 3; i++) feed(player, media);
    assert.equal(player.error, undefined);
    assert.equal(player.videoConfigs, 3);
    assert.equal(player.videoFrames, 6);
    assert.equal(player.keyframes, 3);
    assert.equal(player.videoInWindow, 6);
    assert.equal(player.audioMessages, 3);
    assert.equal(player.acksSent, 1, 'one acknowledgement per 20,000 bytes read');
    const ack = written.find((b) => b[7] === 3);
    assert.ok(ack && ack.readUInt32BE(12) >= 20_000);
  });

  it('its RTMP client reports a refusal as an error', () => {
    const { player } = scripted();
    feed(player, handshake());
    feed(player, Buffer.concat(chunked(3, 20, 0, amf0(['onStatus', 0, null, { level: 'error', code: 'NetStream.Play.Failed', description: 'no' }]), 128)));
    assert.match(player.error ?? '', /NetStream.Play.Failed/);
  });

  it('runs: every FLV and RTMP player of 5 streams gets media', async function () {
    this.timeout(90_000);
    const o = { ...parseArgs(['--streams', '5', '--rounds', '1', '--seconds', '2', '--warmup', '0.5', '--no-floor', '--no-pin']) };
    const [[flv, rtmp]] = await runOptions(o);
    for (const r of [flv, rtmp]) {
      assert.equal(r.errors.length, 0, `${r.kind}: ${r.errors.join('; ')}`);
      assert.equal(r.playersWithMedia, 5, r.kind);
      assert.ok(r.videoPerPlayer.min > 0, r.kind);
      assert.ok(r.deliveredFraction > 0.9, `${r.kind}: ${r.deliveredFraction}`);
    }
    assert.equal(rtmp.kind, 'rtmp');
    assert.ok(rtmp.keyframesPerPlayerMin >= 0);
  });
});
