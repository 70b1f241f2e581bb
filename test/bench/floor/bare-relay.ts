/**
 * The floor for ingest-flv and fanout: the least a relay must do to move the same terminals' bytes to the
 * same players. It reads each terminal's TCP bytes, finds packet boundaries only as far as routing needs (magic,
 * data type, body length; 2013 layout, which the bench sends), and writes each packet's body to the stream's players
 * as one FLV tag, timed by the packet's device timestamp (a video tag's AVC header keyed by the packet's data type).
 * No reassembly, no parameter sets, no GOP cache, no metrics, no backpressure policy beyond dropping for a player
 * that holds 4 MiB. Players join at any packet. A frame's tags go out once its last packet is read (one write a
 * frame, as the gateway's); a stream with several players (the fanout bench) gets them as one buffer, the same bytes
 * written to each.
 *
 * It answers the bench's API calls just enough (healthz, open, keep, an empty /metrics), on the httpPort of the
 * site file it is given like the gateway, so ingest-flv drives it unchanged.
 *
 * GW_FLOOR_AUDIO=drop: audio packets are read and dropped, not written: what reading a terminal's audio costs any
 * relay, whatever it then does with it (issue 11's ratio, `--floor --vs-video`).
 *
 *   node dist/test/bench/floor/bare-relay.js <site.json>
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';

const MAGIC = 0x30316364;
const MAX_PLAYER_BACKLOG = 4 * 1024 * 1024;
/** subpackage flags (low nibble of byte 15) of a frame's only and last packets */
const SUB_ATOMIC = 0;
const SUB_LAST = 2;
const DROP_AUDIO = process.env.GW_FLOOR_AUDIO === 'drop';

interface Stream {
  players: Set<net.Socket>;
  /** device timestamp of its first packet: FLV time 0 */
  t0: number;
}

const streams = new Map<string, Stream>();
const streamOf = (name: string): Stream => {
  let s = streams.get(name);
  if (!s) {
    s = { players: new Set(), t0: -1 };
    streams.set(name, s);
  }
  return s;
};

const FLV_HEADER = Buffer.from([0x46, 0x4c, 0x56, 0x01, 0x05, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00]);

/**
 * One FLV tag around `body`: header, body (by reference) and the previous-tag-size trailer. A video tag's header
 * ends with an AVC packet header (frame type by the packet's data type, a NAL unit packet, no composition offset),
 * so a player tells key frames and frames from sequence headers as in the gateway's FLV.
 */
function tag(type: number, ts: number, body: Buffer, key: boolean): Buffer[] {
  const video = type === 9;
  const hl = video ? 16 : 11;
  const h = Buffer.allocUnsafe(hl);
  h[0] = type;
  h.writeUIntBE(hl - 11 + body.length, 1, 3);
  h.writeUIntBE(ts & 0xffffff, 4, 3);
  h[7] = (ts >>> 24) & 0xff;
  h.writeUIntBE(0, 8, 3);
  if (video) {
    h[11] = key ? 0x17 : 0x27;
    h[12] = 1;
    h.writeUIntBE(0, 13, 3);
  }
  const t = Buffer.allocUnsafe(4);
  t.writeUInt32BE(hl + body.length, 0);
  return [h, body, t];
}

function bcdSim(buf: Buffer, at: number): string {
  let s = '';
  for (let i = 0; i < 6; i++) s += (buf[at + i] >> 4).toString() + (buf[at + i] & 15).toString();
  return s.replace(/^0+(?=\d)/, '');
}

function onTerminal(sock: net.Socket): void {
  let pending: Buffer | undefined;
  let stream: Stream | undefined;
  // Tags of a frame whose last packet has not been read yet. They are written once it has, so a player gets one
  // write a frame however many reads the frame took, as from the gateway: a relay writing per read would pay every
  // player a syscall per read of a large key frame. Still no reassembly: the subpackage flag says where frames end.
  let held: Buffer[] = [];
  sock.on('data', (chunk: Buffer) => {
    const buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = undefined;
    let off = 0;
    // how many of `held` end with a frame's last packet: those go out now, the rest wait for their frame's end
    let ready = 0;
    while (buf.length - off >= 30) {
      if (buf.readUInt32BE(off) !== MAGIC) {
        off++;
        continue;
      }
      const dataType = buf[off + 15] >> 4;
      const headerLen = dataType === 4 ? 18 : dataType === 3 ? 26 : 30;
      const bodyLen = buf.readUInt16BE(off + headerLen - 2);
      if (buf.length - off < headerLen + bodyLen) break;
      if (!stream) stream = streamOf(`${bcdSim(buf, off + 8)}_${buf[off + 14]}_1`);
      if (dataType !== 4 && !(dataType === 3 && DROP_AUDIO)) {
        const device = buf.readUInt32BE(off + 16) * 0x100000000 + buf.readUInt32BE(off + 20);
        if (stream.t0 < 0) stream.t0 = device;
        held.push(...tag(dataType === 3 ? 8 : 9, device - stream.t0, buf.subarray(off + headerLen, off + headerLen + bodyLen), dataType === 0));
        const sub = buf[off + 15] & 15;
        if (sub === SUB_ATOMIC || sub === SUB_LAST) ready = held.length;
      }
      off += headerLen + bodyLen;
    }
    if (off < buf.length) pending = Buffer.from(buf.subarray(off));
    if (!stream || ready === 0) return;
    const out = ready === held.length ? held : held.slice(0, ready);
    held = ready === held.length ? [] : held.slice(ready);
    if (stream.players.size > 1) {
      // many players (fanout): the tags are put together once and the same bytes go to each, as the gateway shares
      // a unit's framing
      const bytes = Buffer.concat(out);
      for (const p of stream.players) if (p.writableLength <= MAX_PLAYER_BACKLOG) p.write(bytes);
      return;
    }
    for (const p of stream.players) {
      if (p.writableLength > MAX_PLAYER_BACKLOG) continue;
      p.cork();
      for (const b of out) p.write(b);
      p.uncork();
    }
  });
  sock.on('error', () => undefined);
}

function reply(res: http.ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function main(): Promise<void> {
  const site = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as { gateway: { httpPort: number } };
  const terminals = net.createServer(onTerminal);
  await new Promise<void>((r) => terminals.listen(0, '127.0.0.1', r));
  const tcpPort = (terminals.address() as net.AddressInfo).port;

  const players = http.createServer((req, res) => {
    res.on('error', () => undefined);
    const m = /^\/live\/([^/?]+)\.flv/.exec(req.url ?? '');
    if (!m) return reply(res, 404, 'not found', 'text/plain');
    const s = streamOf(m[1]);
    // the socket is the player's from here: a raw body until close, no chunked framing to make per write
    const sock = req.socket;
    sock.setNoDelay(true);
    sock.write('HTTP/1.1 200 OK\r\nContent-Type: video/x-flv\r\nConnection: close\r\n\r\n');
    sock.write(FLV_HEADER);
    s.players.add(sock);
    sock.on('close', () => s.players.delete(sock));
  });
  await new Promise<void>((r) => players.listen(0, '127.0.0.1', r));
  const flvPort = (players.address() as net.AddressInfo).port;

  let seq = 0;
  const api = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/healthz') return reply(res, 200, { status: 'ok' });
    if (url === '/metrics') return reply(res, 200, '', 'text/plain');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (url === '/strm/open') {
        const b = JSON.parse(Buffer.concat(chunks).toString()) as { simNo: string; chanId: number };
        const name = `${b.simNo.replace(/^0+(?=\d)/, '')}_${b.chanId}_1`;
        const reqId = `floor${++seq}`;
        return reply(res, 200, {
          errCode: 0,
          message: 'OK',
          data: [
            {
              reqId,
              playUrl: `http://127.0.0.1:${flvPort}/live/${name}.flv?reqId=${reqId}`,
              host: '127.0.0.1',
              port: tcpPort,
              tcp: true,
            },
          ],
        });
      }
      if (url === '/strm/keep') return reply(res, 200, { errCode: 0, message: 'OK', data: [] });
      reply(res, 404, { errCode: -7, message: 'not in the floor' });
    });
  });
  await new Promise<void>((r) => api.listen(site.gateway.httpPort, '127.0.0.1', r));
  process.on('SIGTERM', () => process.exit(0));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
