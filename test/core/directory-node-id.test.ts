/**
 * A node id belongs to one running node. A node restarted within the directory's TTL (after a crash) waits its last
 * run's heartbeat out, then starts, and sends the closed notices of what that run held; a second node started with an
 * id a running node has is refused (boot names nodeId), rather than share its claims.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import type Redis from 'ioredis';
import { RedisDirectory } from '../../core/directory/redis-directory';
import { NodeIdInUse, type LostNode, type RequestEntry } from '../../core/directory/directory';
import { startRedis, type RedisServer } from '../support/redis';
import { waitFor } from '../e2e/helpers';

const log = pino({ level: 'silent' });
const TTL = 2000;

function entry(reqId: string, d: RedisDirectory): RequestEntry {
  return {
    reqId,
    appId: 'A',
    nodeId: d.me.nodeId,
    epoch: d.me.epoch,
    worker: 0,
    channel: '1_1',
    fmt: 0,
    ctrl: true,
    keepIntv: 20,
    keepDeadline: Date.now() + 25_000,
    notice: { appId: 'A', last: true, payload: { instId: 'x', act: 'closed', reqId, typ: 'live', simNo: '1', chan: 1, mediaTyp: 'av' } },
  };
}

/** a process that dies without a word: its timers stop and its connection drops */
function crash(d: RedisDirectory): void {
  const inner = d as unknown as { beatTimer: NodeJS.Timeout; viewTimer: NodeJS.Timeout; refreshTimer: NodeJS.Timeout; client: Redis };
  clearInterval(inner.beatTimer);
  clearInterval(inner.refreshTimer);
  clearInterval(inner.viewTimer);
  inner.client.disconnect();
}

describe('a node id in the fleet directory (real redis-server)', function () {
  this.timeout(30_000);
  let redis: RedisServer;
  const dirs: RedisDirectory[] = [];
  const make = (epoch: string) => {
    const d = new RedisDirectory(redis.url, { nodeId: 'same', epoch, worker: 0 }, TTL, log);
    dirs.push(d);
    return d;
  };

  beforeEach(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(dirs.splice(0).map((d) => d.stop().catch(() => undefined)));
    await redis.stop();
  });

  it('a second running node with the same id is refused, naming the id', async () => {
    const a = make('run-1');
    await a.start({ apiBase: 'http://a', hosts: ['a'] }, ['A']);
    const b = make('run-2');
    await assert.rejects(
      b.start({ apiBase: 'http://b', hosts: ['b'] }, ['A']),
      (err: Error) => err instanceof NodeIdInUse && /'same' is in use/.test(err.message),
    );
    assert.ok(await a.isLive(a.me), 'the running node is untouched');
  });

  it("restarted within the TTL after a crash: waits the last run out, starts, and sends that run's closed notices", async () => {
    const a = make('run-1');
    await a.start({ apiBase: 'http://a', hosts: ['a'] }, ['A']);
    assert.equal(await a.reserve(entry('crashed-req-1', a), 10), 'ok');
    crash(a);
    dirs.splice(dirs.indexOf(a), 1);
    const b = make('run-2');
    const lost: LostNode[] = [];
    b.onNodeLost((l) => lost.push(l));
    await b.start({ apiBase: 'http://a', hosts: ['a'] }, ['A']);
    // (its last run's notices go once the gateway has started)
    b.ready();
    await waitFor('the last run reaped', () => lost.length > 0, 5_000, 20);
    assert.deepEqual(
      lost.map((l) => [l.epoch, l.requests.map((e) => e.reqId)]),
      [['run-1', ['crashed-req-1']]],
    );
    // the id of that request is free again, and the node is live as its new run only
    assert.equal(await b.reserve(entry('crashed-req-1', b), 10), 'ok');
    assert.ok(await b.isLive(b.me));
    assert.equal(await b.isLive({ nodeId: 'same', epoch: 'run-1', worker: 0 }), false);
  });
});
