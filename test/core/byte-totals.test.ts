/**
 * Byte totals that pass 2^31 must not deoptimise the write path. A field V8 first sees holding a small integer is
 * kept as one; the first sum past 2^31 - 1 then changes the class's field representation, and the optimised code that
 * adds to it is thrown away and compiled again. flv-out's total of bytes sent (FlvServer.bytesOut) passes 2^31 about
 * 35 s into a load of 500 Mbit/s, and `--log-deopt` showed flv-out's player write path deoptimised there, in the
 * bench's window. A request's stream total (StreamState.bytesOut, added to on every write) passes it after ~4.8 h at
 * 1 Mbit/s. Both start as -0, a number V8 keeps as a double from the start. So: in a child process (V8's natives
 * syntax), a function adding to both is optimised, then passes 2^31; it must stay optimised and count every byte.
 * Each player's and session's own total (flv-out, RTMP, RTSP), a terminal parser's and a bus stream's pass 2^31 after
 * ~4.8 h at 1 Mbit/s, and the first to do so would change the class of all of them: an object past 2^31 must keep
 * the class of a new one. So must a bus reader's, an RTMP publisher's and an RTMP connection's, and the total of reads
 * set aside past the loop's slice (one for the process: 12 % of 500 Mbit/s passes 2^31 in ~5 min), and a hot
 * counter's sum between scrapes (--log-deopt: the ingest's bytes-read counter overflowed 42 s into a 500 Mbit/s load,
 * unscraped, and every stage adding to a hot counter was deoptimised) and a hot histogram's count. A plugin's own
 * total kept in no object of its own (rtsp-out's and RTMP's bytes out) is a ByteTotal: as a `let` in a closure it
 * deoptimised rtsp-out's send path 60 s into a 300 Mbit/s load.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';

const dist = (p: string): string => JSON.stringify(path.join(repoRoot, 'dist', p));

const CHILD = `
const { FlvServer } = require(${dist('plugins/flv-out/src/server.js')});
const { StreamState } = require(${dist('core/sessions/session-state.js')});
const { ByteTotal } = require(${dist('plugin-sdk/hot-metrics.js')});
const server = new FlvServer({});
const stream = new StreamState('13900000001_1_1', 'live', '13900000001', 1, undefined, 0);
const total = new ByteTotal();
function write(n) {
  server.sent(n);
  stream.bytesOut += n;
  total.add(n);
}
%PrepareFunctionForOptimization(write);
for (let i = 0; i < 100; i++) write(1000);
%OptimizeFunctionOnNextCall(write);
write(1000);
const before = (%GetOptimizationStatus(write) & 16) !== 0;
for (let i = 0; i < 3; i++) write(2 ** 30);
process.stdout.write(JSON.stringify({
  before,
  after: (%GetOptimizationStatus(write) & 16) !== 0,
  server: server.bytesOut,
  stream: stream.bytesOut,
  total: total.n,
  text: String(new FlvServer({}).bytesOut),
  totalText: String(new ByteTotal().n),
}));
`;

// each class made twice with stand-ins for what its constructor keeps; one of the two goes past 2^31
const MAPS = `
const net = require('node:net');
const { Player } = require(${dist('plugins/flv-out/src/player.js')});
const { RtmpPlayer } = require(${dist('plugins/rtmp/src/player.js')});
const { RtspSession } = require(${dist('plugins/rtsp-out/src/session.js')});
const { FlvServer } = require(${dist('plugins/flv-out/src/server.js')});
const { StreamState } = require(${dist('core/sessions/session-state.js')});
const { Jt1078Parser } = require(${dist('plugins/jt1078-ingest/src/parser.js')});
const { CoreMediaBus } = require(${dist('core/bus/media-bus.js')});
const limits = { maxGopBytes: 1 << 20, maxQueueBytes: 1 << 20, maxStreamBytes: 1 << 22, readerDropAfterMs: 30_000 };
const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } };
const bus = new CoreMediaBus(limits, quiet, () => 0);
let streams = 0;
const transport = { onDrain() {}, onGone() {}, backlogCoversAll: false, backlog: () => 0 };
const { Reader } = require(${dist('core/bus/reader.js')});
const { ReadSlices } = require(${dist('core/net/read-slices.js')});
const { PublishedChannel } = require(${dist('plugins/rtmp/src/published.js')});
const { RtmpConnection } = require(${dist('plugins/rtmp/src/connection.js')});
const { HotCounterSet, HotHistogramData } = require(${dist('plugin-sdk/hot-metrics.js')});
const counters = new HotCounterSet();
const settings = { name: 'r', media: 'av', slot: -1, maxQueueBytes: 1 << 20, dropAfterMs: 30_000, needKey: () => true, now: () => 0, onFault() {}, onClose() {} };
const rtmpHost = { replayOf: () => undefined };
// [the object whose class is compared, the total's field]
const make = {
  flv: () => [new Player('p', 's', 'r', '127.0.0.1:1', transport, {}, {}), 'bytesOut'],
  rtmp: () => [new RtmpPlayer('p', 's', 'r', '127.0.0.1:1', new net.Socket(), 1 << 20, {}, () => {}, () => {}), 'bytesOut'],
  rtsp: () => [new RtspSession('p', { reqId: 'r' }, 'tcp', undefined, '127.0.0.1:1', { now: () => 0 }, {}), 'bytesOut'],
  server: () => [new FlvServer({}), 'bytesOut'],
  stream: () => [new StreamState('s', 'live', '1', 1, undefined, 0), 'bytesOut'],
  parser: () => [new Jt1078Parser(() => {}).stats, 'bytes'],
  bus: () => [bus.create('s' + streams++, 'test').st, 'bytesIn'],
  reader: () => [new Reader({ write() {} }, settings).stats, 'bytes'],
  readSlices: () => [new ReadSlices(1, () => 0).stats, 'deferredBytes'],
  published: () => [new PublishedChannel('s', 'a', '127.0.0.1:1', 1 << 20, quiet, () => 0), 'bytes'],
  rtmpConnection: () => [new RtmpConnection('c', new net.Socket(), rtmpHost, 1 << 20, 60_000), 'bytesIn'],
  hotCounter: () => (counters.child({}), [counters.children[counters.children.length - 1], 'pending']),
  hotHistogram: () => [new HotHistogramData([1, 2]), 'count'],
};
const out = {};
for (const [name, f] of Object.entries(make)) {
  const [fresh] = f();
  const [past, field] = f();
  past[field] += 2 ** 31;
  out[name] = %HaveSameMap(fresh, past);
}
process.stdout.write(JSON.stringify(out));
process.exit(0);
`;

describe('byte totals past 2^31', function () {
  this.timeout(30_000);

  it('the code adding to them stays optimised, and every byte is counted', () => {
    const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', CHILD], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { before: boolean; after: boolean; server: number; stream: number; total: number; text: string; totalText: string };
    assert.ok(out.before, 'the write function was not optimised to begin with: the check proves nothing');
    assert.ok(out.after, 'passing 2^31 deoptimised the write function');
    assert.equal(out.server, 101 * 1000 + 3 * 2 ** 30);
    assert.equal(out.stream, 101 * 1000 + 3 * 2 ** 30);
    assert.equal(out.total, 101 * 1000 + 3 * 2 ** 30);
    assert.equal(out.text, '0', 'a new total reads 0 (as /metrics prints it), not -0');
    assert.equal(out.totalText, '0');
  });

  it("a player's, session's, connection's, parser's, reader's or stream's total past 2^31 keeps its object's hidden class", () => {
    const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', MAPS], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      flv: true,
      rtmp: true,
      rtsp: true,
      server: true,
      stream: true,
      parser: true,
      bus: true,
      reader: true,
      readSlices: true,
      published: true,
      rtmpConnection: true,
      hotCounter: true,
      hotHistogram: true,
    });
  });
});
