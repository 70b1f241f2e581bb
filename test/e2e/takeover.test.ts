/**
 * A second sender for a live stream's SIM and channel (jt1078-ingest README, one publisher link per stream): a real terminal on TCP pushes a capture to
 * an HTTP-FLV player while another TCP connection, or a UDP sender, from another address (127.0.0.2) pushes another
 * capture under the same SIM and channel. The player must get every frame of the real terminal, in order, and none
 * of the intruder's; the refusal is counted and logged once per link. The real terminal's reconnect within the
 * grace resumes the stream; once it is gone past the grace, the sender still pushing takes over.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import type { Notice } from '../../plugin-sdk';
import { definePlugin } from '../../plugin-sdk';
import { parseFlv } from '../support/flv-reader';
import {
  HttpFlvPlayer,
  TcpTerminal,
  capture,
  codedVideo,
  encodeCapture,
  encodeLazily,
  expectedFrom,
  ffprobe,
  firstNonMonotonic,
  loopedPackets,
  metric,
  openLive,
  statusOf,
  waitFor,
  type Expected,
  type OpenResult,
} from './helpers';

// The reconnect comes ~0.5 s after the terminal's last packet (the checks of what it sent come first); on a loaded
// machine a 2 s grace once ran out before it did and the intruder took over early. 5 s leaves ten times the room.
const GRACE_MS = 5000;
const REAL = 'jt1078/glaciall-cif-h264-2013.bin';
const OTHER = 'jt1078/xunilcyl-d1-h264-2013.bin';
const SIM = '013800138000';
const INTRUDER_HOST = '127.0.0.2';

/** Another capture's packets as the real terminal's SIM and channel, looped without end (seq and time continue). */
function intruderStream(): Iterator<Buffer> {
  return encodeLazily(loopedPackets(capture(OTHER), 1_000_000), { sim: SIM, channel: 1 })[Symbol.iterator]();
}

/** A sender pushing until stopped, paced (a batch, then a pause), from INTRUDER_HOST. */
class Intruder {
  sent = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private constructor(
    private readonly write: (b: Buffer[]) => Promise<void>,
    private readonly shut: () => Promise<void>,
  ) {}

  static async tcp(port: number): Promise<Intruder> {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: INTRUDER_HOST });
    s.on('error', () => undefined);
    await once(s, 'connect');
    return new Intruder(
      async (bufs) => {
        if (s.destroyed) return;
        s.cork();
        for (const b of bufs) s.write(b);
        s.uncork();
        if (s.writableNeedDrain) await once(s, 'drain');
      },
      async () => {
        if (s.destroyed) return;
        const closed = once(s, 'close');
        s.end();
        await closed;
      },
    );
  }

  static async udp(port: number): Promise<Intruder> {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(0, INTRUDER_HOST, () => resolve());
    });
    return new Intruder(
      async (bufs) => {
        await Promise.all(bufs.map((d) => new Promise<void>((resolve) => s.send(d, port, '127.0.0.1', () => resolve()))));
      },
      () => new Promise<void>((resolve) => s.close(() => resolve())),
    );
  }

  start(batch = 16, pauseMs = 4): void {
    const it = intruderStream();
    this.loop = (async () => {
      while (!this.stopped) {
        const bufs: Buffer[] = [];
        for (let k = 0; k < batch; k++) bufs.push(it.next().value as Buffer);
        await this.write(bufs);
        this.sent += bufs.length;
        await sleep(pauseMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await this.shut();
  }
}

/** Split point in the middle of a GOP (between two frames), so the second half starts on P frames. */
function midGopSplit(from: number): number {
  const p = capture(REAL).packets;
  let split = from;
  while (!(p[split - 1].marker && p[split].dataType === 1)) split++;
  return split;
}

describe('e2e: a second sender for a live stream (takeover)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let notices: Notice[];
  let live2013: number;

  beforeEach(async () => {
    notices = [];
    const probe = definePlugin({
      name: 'e2e-probe',
      requires: ['flv-out'],
      setup(ctx) {
        ctx.notices.on((n) => notices.push(n));
      },
    });
    gw = await startTestGateway({
      captureLogs: true,
      plugins: [
        {
          name: 'jt1078-ingest',
          config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, disconnectGraceMs: GRACE_MS, unknownGraceMs: 30_000 },
        },
        { name: 'flv-out', config: { port: 0 } },
        { name: 'e2e-probe', def: probe },
      ],
    });
    live2013 = gw.ports['jt1078-ingest.livePort2013'];
  });
  afterEach(async () => {
    await gw.stop();
  });

  const refused = (transport: string) => metric(gw, 'gw_jt1078_ingest_takeovers_refused_total', { listener: 'live2013', transport });
  const accepted = (transport: string) => metric(gw, 'gw_jt1078_ingest_takeovers_accepted_total', { listener: 'live2013', transport });
  const logLines = (msg: string) => gw.logs.filter((l) => l.msg === msg);
  /** the takeover came a grace after the terminal's last packet, not before */
  function assertTakenOverAfter(lastSent: number): void {
    const line = logLines('stream taken over: its terminal did not come back within the grace');
    assert.equal(line.length, 1);
    const after = Number(line[0].time) - lastSent;
    assert.ok(after >= GRACE_MS - 50, `not before the grace (${after} ms after the terminal's last packet)`);
  }

  /**
   * The real terminal pushes the first `split` packets (paced, so the intruder's packets interleave with its own)
   * while the intruder pushes; returns what the player must have got.
   */
  async function realTerminalWithIntruder(
    intruder: Intruder,
    split: number,
  ): Promise<{ player: HttpFlvPlayer; open: OpenResult; want1: Expected; lastSent: number }> {
    const bufs = encodeCapture(capture(REAL).packets);
    const want1 = expectedFrom(capture(REAL).packets.slice(0, split));
    const open = await openLive(gw, SIM, 1);
    const player = await HttpFlvPlayer.connect(open.playUrl);
    const a = await TcpTerminal.connect(live2013);
    await a.send(bufs.slice(0, 300));
    await waitFor("the real terminal's first frames", () => player.videoFrames() > 0);
    intruder.start();
    await waitFor('the intruder under way', () => intruder.sent >= 64);
    // a batch every 5 ms: the intruder's batches land between the terminal's all along
    await a.send(bufs.slice(300, split), 32, 5);
    const lastSent = Date.now();
    await waitFor("the real terminal's frames", () => player.videoFrames() >= want1.video);
    await a.end();
    return { player, open, want1, lastSent };
  }

  it('TCP intruder: refused while the terminal is alive; the reconnect within the grace resumes; after the grace the intruder takes over', async () => {
    const intruder = await Intruder.tcp(live2013);
    const split = midGopSplit(2000);
    const real = capture(REAL).packets;
    const want2 = expectedFrom(real.slice(split));
    try {
      const { player, open, want1 } = await realTerminalWithIntruder(intruder, split);
      // the real terminal's frames, in order, nothing of the intruder's in between
      await sleep(100);
      const video1 = codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags);
      assert.equal(video1.length, want1.video, 'every frame of the real terminal and no other');
      assert.deepEqual(
        video1.map((t) => t.timestamp),
        want1.videoDts,
        "the real terminal's frames, in order, on its own timeline",
      );
      const refusedBefore = await refused('tcp');
      assert.ok(refusedBefore > 100, `the intruder's packets are counted (${refusedBefore})`);
      assert.ok(intruder.sent >= refusedBefore);

      // the terminal dropped its connection; it comes back (from its own address) within the grace, while the
      // intruder still pushes: the stream resumes with the terminal
      await sleep(300);
      const b = await TcpTerminal.connect(live2013);
      await b.send(encodeCapture(real.slice(split)), 32, 5);
      const lastSent = Date.now();
      await waitFor("the reconnected terminal's frames", () => player.videoFrames() >= want1.video + want2.video);
      await sleep(100);
      const video2 = codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags);
      assert.equal(video2.length, want1.video + want2.video);
      const last1 = want1.videoDts[want1.videoDts.length - 1];
      assert.deepEqual(
        video2.slice(want1.video).map((t) => t.timestamp),
        want2.videoDts.map((d) => d - want2.videoDts[0] + last1 + 20),
        'the reconnected terminal continues the timeline',
      );
      assert.equal(firstNonMonotonic(video2, true), -1);
      const p = ffprobe(sliceWhole(player.data()), 'flv');
      assert.equal(`${p.codec} ${p.width}x${p.height} ${p.frames}`, `h264 352x288 ${video2.length}`, "the intruder's D1 video never reached the player");
      assert.equal(await metric(gw, 'gw_jt1078_ingest_reconnects_total'), 1);
      assert.equal(await accepted('tcp'), 0);
      assert.ok((await refused('tcp')) > refusedBefore, "the intruder stayed refused through the terminal's absence");

      // the terminal goes for good: past the grace the sender still pushing takes the stream over (the request
      // does not close)
      const framesBefore = player.videoFrames();
      await b.end();
      await waitFor("the intruder's frames", () => player.videoFrames() > framesBefore + 10, 15_000);
      // the grace runs from the terminal's last packet
      assertTakenOverAfter(lastSent);
      assert.equal(await accepted('tcp'), 1);
      assert.ok(await statusOf(gw, open.reqId), 'the request is still open');
      assert.equal(
        notices.some((n) => n.payload.reqId === open.reqId && n.payload.act === 'closed'),
        false,
      );
      const refusedAtTakeover = await refused('tcp');
      await sleep(200);
      assert.equal(await refused('tcp'), refusedAtTakeover, 'the intruder is the publisher now: nothing more refused');

      // one warning for the refused link, not one per packet; three links pushed the stream, each once
      const warned = logLines('another link pushes this stream: refused');
      assert.equal(warned.length, 1, JSON.stringify(warned));
      assert.match(String(warned[0].link), /^live2013\/tcp#\d+ 127\.0\.0\.2:/);
      assert.equal(logLines('terminal pushing').length, 3);
      player.close();
    } finally {
      await intruder.stop();
    }
  });

  it('UDP intruder: refused while the terminal is alive, counted per transport; takes over once the terminal is gone past the grace', async () => {
    const intruder = await Intruder.udp(live2013);
    const split = midGopSplit(3000);
    try {
      const { player, open, want1, lastSent } = await realTerminalWithIntruder(intruder, split);
      await sleep(100);
      const video1 = codedVideo(parseFlv(player.data(), { allowTruncated: true }).tags);
      assert.equal(video1.length, want1.video, 'every frame of the real terminal and no other');
      assert.deepEqual(
        video1.map((t) => t.timestamp),
        want1.videoDts,
      );
      const p = ffprobe(sliceWhole(player.data()), 'flv');
      assert.equal(`${p.codec} ${p.width}x${p.height} ${p.frames}`, `h264 352x288 ${want1.video}`);
      assert.ok((await refused('udp')) > 100);
      assert.equal(await refused('tcp'), 0);
      assert.equal(logLines('another link pushes this stream: refused').length, 1);

      const framesBefore = player.videoFrames();
      await waitFor("the intruder's frames", () => player.videoFrames() > framesBefore + 10, 15_000);
      assertTakenOverAfter(lastSent);
      assert.equal(await accepted('udp'), 1);
      assert.equal(await metric(gw, 'gw_jt1078_ingest_reconnects_total'), 0);
      assert.ok(await statusOf(gw, open.reqId));
      player.close();
    } finally {
      await intruder.stop();
    }
  });
});

/** The FLV up to the end of its last whole tag (the player may be mid-tag). */
function sliceWhole(buf: Buffer): Buffer {
  const tags = parseFlv(buf, { allowTruncated: true }).tags;
  const last = tags[tags.length - 1];
  return buf.subarray(0, last.offset + 11 + last.body.length + 4);
}
