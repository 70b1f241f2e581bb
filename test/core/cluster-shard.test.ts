import assert from 'node:assert/strict';
import { channelKey, streamKey } from '../../plugin-sdk/cluster';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { keyOfTarget, shardOf, streamPathRouter } from '../../core/cluster/shard';
import { repoRoot } from '../support/paths';

describe('cluster routing keys', () => {
  it('finds the stream in the URLs of every output (decisions.md play URLs)', () => {
    assert.equal(keyOfTarget('/live/13800138000_1_1.flv?reqId=x&token=t'), '13800138000_1');
    assert.equal(keyOfTarget('/hls/13800138000_12_0/index.m3u8?reqId=x'), '13800138000_12');
    assert.equal(keyOfTarget('/hls/13800138000_1_1/seg-12.m4s'), '13800138000_1');
    assert.equal(keyOfTarget('rtsp://10.0.0.1:7554/live/13800138000_1_1?reqId=x&token=t'), '13800138000_1');
    assert.equal(keyOfTarget('rtsp://10.0.0.1:7554/live/13800138000_1_1/trackID=0'), '13800138000_1');
    assert.equal(keyOfTarget('/talk/13800138000_3_1?reqId=x'), '13800138000_3');
    // a SIM may carry dots (rtspSrc virtual terminals)
    assert.equal(keyOfTarget('/live/cam.east_2_1.flv'), 'cam.east_2');
    assert.equal(keyOfTarget('/strm/open'), undefined);
    assert.equal(keyOfTarget('/talk-stomp?reqId=abc'), undefined);
    assert.equal(keyOfTarget('/live/13800138000_1_7.flv'), undefined, 'the last part is live (1) or replay (0)');
  });

  it('live and replay of a channel share a key; a leading-zero SIM is the same channel once normalised', () => {
    assert.equal(streamKey('13800138000_1_1'), streamKey('13800138000_1_0'));
    assert.equal(streamKey('13800138000_1_1'), channelKey('13800138000', 1));
    assert.equal(streamKey('13800138000_01_1'), '13800138000_1');
  });

  it('reads the request line of HTTP, WebSocket and RTSP, and waits for it whole', () => {
    assert.deepEqual(streamPathRouter(Buffer.from('GET /live/1_1_1.flv?token=x HTTP/1.1\r\nHost: a\r\n'), false), { key: '1_1' });
    assert.deepEqual(streamPathRouter(Buffer.from('OPTIONS rtsp://h:7554/live/9_2_1?reqId=r RTSP/1.0\r\nCSeq: 1\r\n'), false), { key: '9_2' });
    assert.equal(streamPathRouter(Buffer.from('GET /live/1_1_1.flv?tok'), false), 'more');
    assert.equal(streamPathRouter(Buffer.from('POST /strm/open HTTP/1.1\r\n'), false), 'any');
    assert.equal(streamPathRouter(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x0a, 0x01]), false), 'any', 'a TLS hello names no path');
    assert.equal(streamPathRouter(Buffer.alloc(5000, 0x41), false), 'any');
  });

  it('spreads a fleet evenly and agrees with itself (every process computes it alone)', () => {
    for (const workers of [2, 3, 8]) {
      const counts = new Array<number>(workers).fill(0);
      for (let i = 0; i < 20_000; i++) counts[shardOf(channelKey(String(13800000000 + i), 1 + (i % 4)), workers)]++;
      const even = 20_000 / workers;
      for (const c of counts) assert.ok(Math.abs(c - even) < even * 0.1, `${workers} workers: ${counts.join(', ')}`);
    }
    assert.equal(shardOf('13800138000_1', 4), shardOf('13800138000_1', 4));
    assert.equal(shardOf('anything', 1), 0);
  });

  it('puts every channel of a terminal in one worker (a link may carry several), whatever the channel', () => {
    for (const workers of [2, 3, 8]) {
      for (let i = 0; i < 200; i++) {
        const sim = String(13800000000 + i);
        const w = shardOf(channelKey(sim, 1), workers);
        for (let chan = 2; chan <= 255; chan += 17) assert.equal(shardOf(channelKey(sim, chan), workers), w, `${sim} channel ${chan} over ${workers}`);
      }
    }
  });

  it('answers the same for a key asked again in a row, with the same or another worker count (its one-entry memo)', () => {
    // a channel key counts by its SIM (the part before '_')
    const fnv = (key: string, w: number) => {
      const k = key.split('_')[0];
      let h = 0x811c9dc5;
      for (let i = 0; i < k.length; i++) h = Math.imul(h ^ k.charCodeAt(i), 0x01000193);
      return (h >>> 0) % w;
    };
    const keys = ['13800138000_1', '13800138000_1', '13800138000_2', '13800138001_1', '13800138000_1'];
    for (const w of [2, 3, 3, 7, 2]) {
      for (const k of keys) assert.equal(shardOf(k, w), fnv(k, w), `${k} over ${w}`);
      // an equal key that is another string object
      assert.equal(shardOf(['13800138', '000_2'].join(''), w), fnv('13800138000_2', w));
    }
    // the same key in a row over other counts (the primary and a test's own shard maths differ in workers)
    for (const w of [2, 3, 5, 7, 11]) assert.equal(shardOf('13800138009_3', w), fnv('13800138009_3', w), `over ${w}`);
  });

  it("the primary loads a plugin's router module alone: none of the plugin, its setup or a dependency", () => {
    const shard = path.join(repoRoot, 'dist', 'core', 'cluster', 'shard.js');
    const route = path.join(repoRoot, 'dist', 'plugins', 'jt1078-ingest', 'src', 'route.js');
    const script = `const { loadRouter } = require(${JSON.stringify(shard)}); const before = new Set(Object.keys(require.cache));
      const r = loadRouter({ module: ${JSON.stringify(route)}, plugin: 'jt1078-ingest', name: 'jt1078' });
      console.log(JSON.stringify({ fn: typeof r, loaded: Object.keys(require.cache).filter((k) => !before.has(k)) }));`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as { fn: string; loaded: string[] };
    assert.equal(out.fn, 'function');
    const rel = out.loaded.map((f) => path.relative(path.join(repoRoot, 'dist'), f)).sort();
    assert.deepEqual(rel, [
      'plugin-sdk/formats/byte-order.js',
      'plugin-sdk/router/index.js',
      'plugin-sdk/sim.js',
      'plugins/jt1078-ingest/src/packet.js',
      'plugins/jt1078-ingest/src/route.js',
    ]);
  });
});
