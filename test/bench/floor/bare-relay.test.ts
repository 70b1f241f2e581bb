import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Jt1078Packer } from '../../../plugins/jt1078-ingest/src/packer';
import { scratchDir } from '../../support/paths';
import { Api, FLOOR_MAIN, freePort, startGateway, stopGateway, waitHealthy, writeSite, type Gateway } from '../support/gateway-harness';

/** FLV tags read by one player: type, timestamp and body */
interface Tag {
  type: number;
  ts: number;
  body: Buffer;
}

/** A raw HTTP-FLV player: everything it read, and the tags after the response head and the FLV file header. */
class RawPlayer {
  private bytes = Buffer.alloc(0);
  constructor(readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => { this.bytes = Buffer.concat([this.bytes, c]); });
  }

  static async open(url: URL): Promise<RawPlayer> {
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    const p = new RawPlayer(socket);
    await p.until(() => p.body() !== undefined && p.body()!.length >= 13, 'the response head and FLV header');
    return p;
  }

  /** the bytes after the response head */
  body(): Buffer | undefined {
    const at = this.bytes.indexOf('\r\n\r\n');
    return at < 0 ? undefined : this.bytes.subarray(at + 4);
  }

  tags(): Tag[] {
    const b = this.body() ?? Buffer.alloc(0);
    const out: Tag[] = [];
    for (let off = 13; off + 11 <= b.length;) {
      const size = b.readUIntBE(off + 1, 3);
      if (off + 11 + size + 4 > b.length) break;
      const ts = b.readUIntBE(off + 4, 3) | (b[off + 7] << 24);
      out.push({ type: b[off], ts, body: b.subarray(off + 11, off + 11 + size) });
      assert.equal(b.readUInt32BE(off + 11 + size), 11 + size, 'previous-tag-size trailer');
      off += 11 + size + 4;
    }
    return out;
  }

  async until(done: () => boolean, what: string): Promise<void> {
    const by = Date.now() + 10_000;
    while (!done()) {
      if (Date.now() > by) throw new Error(`player: no ${what} within 10 s`);
      await sleep(10);
    }
  }
}

describe('bench floor: the bare relay', function () {
  this.timeout(60_000);
  let gw: Gateway | undefined;
  let api: Api;
  let dir: string;
  const abort = new AbortController();
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
    for (const s of sockets) s.destroy();
    if (gw) await stopGateway(gw);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** an open request's play URL and push port for this SIM, then `n` players of it and the terminal's socket */
  async function stream(sim: string, n: number): Promise<{ players: RawPlayer[]; terminal: net.Socket }> {
    const r = await api.openLive(sim, 0);
    const players: RawPlayer[] = [];
    for (let i = 0; i < n; i++) {
      const p = await RawPlayer.open(r.url);
      sockets.push(p.socket);
      players.push(p);
    }
    const terminal = net.connect(r.port, '127.0.0.1');
    sockets.push(terminal);
    await new Promise<void>((resolve, reject) => terminal.once('connect', resolve).once('error', reject));
    return { players, terminal };
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
  function assertTags(tags: Tag[], payload: Buffer, sound: Buffer, frameType: number): void {
    assert.deepEqual(tags.map((t) => [t.type, t.ts, t.body.length]), [[9, 0, 305], [9, 0, 305], [9, 0, 205], [8, 40, 160]]);
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
    for (const p of players) assert.equal(p.body()!.length, 13, 'nothing but the FLV header before the frame ends');
    terminal.write(wire.subarray(f.video[0].length + 100));
    terminal.write(Buffer.concat(f.audio));
    for (const p of players) await p.until(() => p.tags().length >= 4, 'four tags');
    for (const p of players) assertTags(p.tags(), f.payload, f.sound, 0x17);
    // with several players, the same bytes to each
    assert.deepEqual(players[0].body(), players[1].body());
  });

  it('sends the frames a read ended at once and holds only the one it did not', async () => {
    const sim = '13912345003';
    const { players: [p], terminal } = await stream(sim, 1);
    const packer = new Jt1078Packer({ layout: '2013', sim, channel: 1, maxBodySize: 300 });
    const first = packer.packFrame({ dataType: 0, pt: 98, timestamp: 5000, payload: Buffer.alloc(700, 1) });
    const second = packer.packFrame({ dataType: 1, pt: 98, timestamp: 5040, payload: Buffer.alloc(500, 2) });
    // one read: all of the first frame, then the first packet of the second
    terminal.write(Buffer.concat([...first, second[0]]));
    await p.until(() => p.tags().length >= 3, 'the first frame');
    await sleep(300);
    assert.deepEqual(p.tags().map((t) => [t.ts, t.body.length]), [[0, 305], [0, 305], [0, 105]], 'the first frame, none of the second');
    terminal.write(second[1]);
    await p.until(() => p.tags().length >= 5, 'the second frame');
    assert.deepEqual(p.tags().slice(3).map((t) => [t.ts, t.body[0], t.body.length]), [[40, 0x27, 305], [40, 0x27, 205]]);
  });

  it('gives a lone player the same tags (its corked writes)', async () => {
    const { players: [p], terminal } = await stream('13912345002', 1);
    const f = frames('13912345002', 1);
    terminal.write(Buffer.concat(f.video.slice(0, 2)));
    await sleep(300);
    assert.equal(p.body()!.length, 13, 'nothing but the FLV header before the frame ends');
    terminal.write(Buffer.concat([f.video[2], ...f.audio]));
    await p.until(() => p.tags().length >= 4, 'four tags');
    assertTags(p.tags(), f.payload, f.sound, 0x27);
  });
});
