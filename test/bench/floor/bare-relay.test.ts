import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Jt1078Packer } from '../../../plugins/jt1078-ingest/src/packer';
import { HttpFlvPlayer, waitFor } from '../../e2e/helpers';
import type { ReadTag } from '../../support/flv-reader';
import { scratchDir } from '../../support/paths';
import { Api, FLOOR_MAIN, freePort, startGateway, stopGateway, waitHealthy, writeSite, type Gateway } from '../support/gateway-harness';

/** the tags a player has read whole (the PreviousTagSize chain checked) */
const tags = (p: HttpFlvPlayer): ReadTag[] => p.parse().tags;

describe('bench floor: the bare relay', function () {
  this.timeout(60_000);
  let gw: Gateway | undefined;
  let api: Api;
  let dir: string;
  const abort = new AbortController();
  const players: HttpFlvPlayer[] = [];
  const sockets: net.Socket[] = [];

  before(async () => {
    dir = scratchDir('floor-test');
    const httpPort = await freePort();
    const siteFile = writeSite(dir, { gateway: { httpPort } });
    gw = startGateway({ siteFile, dir, pin: false, nodeOpts: [], main: FLOOR_MAIN });
    api = new Api(httpPort, abort.signal);
    await waitHealthy(gw, api, abort.signal);
  });

  after(async () => {
    for (const p of players) p.close();
    for (const s of sockets) s.destroy();
    if (gw) await stopGateway(gw);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** an open request's play URL and push port for this SIM, then `n` players of it and the terminal's socket */
  async function stream(sim: string, n: number): Promise<{ players: HttpFlvPlayer[]; terminal: net.Socket }> {
    const r = await api.openLive(sim, 0);
    const mine: HttpFlvPlayer[] = [];
    for (let i = 0; i < n; i++) {
      const p = await HttpFlvPlayer.connect(r.url.toString());
      players.push(p);
      mine.push(p);
      await waitFor('the FLV header', () => p.bytes >= 13);
    }
    const terminal = net.connect(r.port, '127.0.0.1');
    sockets.push(terminal);
    await new Promise<void>((resolve, reject) => terminal.once('connect', resolve).once('error', reject));
    return { players: mine, terminal };
  }

  /** a video frame (an I frame, data type 0, or a P frame, 1) of three packets (300 bytes each at most) at device time
   * 1000 ms, then one audio packet 40 ms on */
  function frames(sim: string, dataType: 0 | 1): { video: Buffer[]; audio: Buffer[]; payload: Buffer; sound: Buffer } {
    const packer = new Jt1078Packer({ layout: '2013', sim, channel: 1, maxBodySize: 300 });
    const payload = Buffer.alloc(800);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    const sound = Buffer.alloc(160, 0xd5);
    return {
      video: packer.packFrame({ dataType, pt: 98, timestamp: 1000, payload }),
      audio: packer.packFrame({ dataType: 3, pt: 6, timestamp: 1040, payload: sound }),
      payload,
      sound,
    };
  }

  /** each packet a tag: video behind an AVC packet header saying key frame (0x17, an I frame's packets) or not (0x27) */
  function assertTags(tags: ReadTag[], payload: Buffer, sound: Buffer, frameType: number): void {
    assert.deepEqual(
      tags.map((t) => [t.type, t.timestamp, t.body.length]),
      [
        [9, 0, 305],
        [9, 0, 305],
        [9, 0, 205],
        [8, 40, 160],
      ],
    );
    const avc = Buffer.from([frameType, 1, 0, 0, 0]);
    for (const t of tags.slice(0, 3)) assert.deepEqual(t.body.subarray(0, 5), avc);
    assert.deepEqual(Buffer.concat(tags.slice(0, 3).map((t) => t.body.subarray(5))), payload);
    assert.deepEqual(tags[3].body, sound);
  }

  it('writes a frame to its players once its last packet is read, however many reads it took', async () => {
    const { players, terminal } = await stream('13912345001', 2);
    const f = frames('13912345001', 0);
    const wire = Buffer.concat(f.video);
    // the first packet and a half: the floor has read them, and has no frame end yet
    terminal.write(wire.subarray(0, f.video[0].length + 100));
    await sleep(300);
    for (const p of players) assert.equal(p.bytes, 13, 'nothing but the FLV header before the frame ends');
    terminal.write(wire.subarray(f.video[0].length + 100));
    terminal.write(Buffer.concat(f.audio));
    for (const p of players) await waitFor('four tags', () => tags(p).length >= 4);
    for (const p of players) assertTags(tags(p), f.payload, f.sound, 0x17);
    // with several players, the same bytes to each
    assert.deepEqual(players[0].data(), players[1].data());
  });

  it('sends the frames a read ended at once and holds only the one it did not', async () => {
    const sim = '13912345003';
    const {
      players: [p],
      terminal,
    } = await stream(sim, 1);
    const packer = new Jt1078Packer({ layout: '2013', sim, channel: 1, maxBodySize: 300 });
    const first = packer.packFrame({ dataType: 0, pt: 98, timestamp: 5000, payload: Buffer.alloc(700, 1) });
    const second = packer.packFrame({ dataType: 1, pt: 98, timestamp: 5040, payload: Buffer.alloc(500, 2) });
    // one read: all of the first frame, then the first packet of the second
    terminal.write(Buffer.concat([...first, second[0]]));
    await waitFor('the first frame', () => tags(p).length >= 3);
    await sleep(300);
    assert.deepEqual(
      tags(p).map((t) => [t.timestamp, t.body.length]),
      [
        [0, 305],
        [0, 305],
        [0, 105],
      ],
      'the first frame, none of the second',
    );
    terminal.write(second[1]);
    await waitFor('the second frame', () => tags(p).length >= 5);
    assert.deepEqual(
      tags(p)
        .slice(3)
        .map((t) => [t.timestamp, t.body[0], t.body.length]),
      [
        [40, 0x27, 305],
        [40, 0x27, 205],
      ],
    );
  });

  it('gives a lone player the same tags (its corked writes)', async () => {
    const {
      players: [p],
      terminal,
    } = await stream('13912345002', 1);
    const f = frames('13912345002', 1);
    terminal.write(Buffer.concat(f.video.slice(0, 2)));
    await sleep(300);
    assert.equal(p.bytes, 13, 'nothing but the FLV header before the frame ends');
    terminal.write(Buffer.concat([f.video[2], ...f.audio]));
    await waitFor('four tags', () => tags(p).length >= 4);
    assertTags(tags(p), f.payload, f.sound, 0x27);
  });
});
