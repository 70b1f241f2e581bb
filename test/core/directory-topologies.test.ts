/**
 * The fleet directory on the three Redis topologies a site may name: a Redis Cluster of three masters
 * (`redis+cluster://`), where every script runs on the one slot of its hash tag and per-node keys live on other
 * masters, and Sentinel (`redis+sentinel://…/<master>`), where the directory finds the master through the sentinel.
 * Real servers: Debian's redis-server, in cluster mode and in sentinel mode, on loopback.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import Redis, { Cluster } from 'ioredis';
import { RedisDirectory } from '../../core/directory/redis-directory';
import type { LostNode, RequestEntry } from '../../core/directory/directory';
import { scratchDir } from '../support/paths';
import { freePort } from '../support/redis';
import { requireTool } from '../support/tools';
import { waitFor } from '../e2e/helpers';

const run = promisify(execFile);
const log = pino({ level: 'silent' });
const TTL = 2000;

interface Servers {
  children: ChildProcess[];
  dir: string;
  stop(): Promise<void>;
}

function serve(args: string[], dir: string): ChildProcess {
  const bin = requireTool('redis-server', 'redis-server');
  const c = spawn(bin, args, { cwd: dir, stdio: 'ignore' });
  c.on('error', () => undefined);
  return c;
}

async function pinged(port: number): Promise<void> {
  await waitFor(
    `redis on ${port}`,
    async () => {
      const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      c.on('error', () => undefined);
      try {
        await c.connect();
        return (await c.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        c.disconnect();
      }
    },
    10_000,
    50,
  );
}

function stopper(children: ChildProcess[], dir: string): () => Promise<void> {
  return async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) {
              resolve();
              return;
            }
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  };
}

/** three masters, slots spread by redis-cli --cluster create, no replicas */
async function startCluster(): Promise<Servers & { ports: number[] }> {
  const dir = scratchDir('redis-cluster');
  const ports = [await freePort(), await freePort(), await freePort()];
  const children = ports.map((p) =>
    serve(
      [
        '--port',
        String(p),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${p}.conf`,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      dir,
    ),
  );
  const stop = stopper(children, dir);
  try {
    for (const p of ports) await pinged(p);
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    await waitFor(
      'cluster_state:ok on every master',
      async () => {
        for (const p of ports) {
          const { stdout } = await run('redis-cli', ['-p', String(p), 'cluster', 'info']);
          if (!stdout.includes('cluster_state:ok')) return false;
        }
        return true;
      },
      20_000,
      200,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { children, dir, ports, stop };
}

/** one master and one sentinel watching it as `gwmaster` */
async function startSentinel(): Promise<Servers & { master: number; sentinel: number }> {
  const dir = scratchDir('redis-sentinel');
  const master = await freePort();
  const sentinel = await freePort();
  const conf = path.join(dir, 'sentinel.conf');
  fs.writeFileSync(
    conf,
    [
      `port ${sentinel}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor gwmaster 127.0.0.1 ${master} 1`,
      'sentinel down-after-milliseconds gwmaster 2000',
      '',
    ].join('\n'),
  );
  const children = [
    serve(['--port', String(master), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], dir),
    serve([conf, '--sentinel'], dir),
  ];
  const stop = stopper(children, dir);
  try {
    await pinged(master);
    await pinged(sentinel);
  } catch (err) {
    await stop();
    throw err;
  }
  return { children, dir, master, sentinel, stop };
}

function entry(reqId: string, d: RedisDirectory, appId = 'A'): RequestEntry {
  return {
    reqId,
    appId,
    nodeId: d.me.nodeId,
    epoch: d.me.epoch,
    worker: d.me.worker,
    channel: '1_1',
    fmt: 0,
    ctrl: true,
    keepIntv: 20,
    keepDeadline: Date.now() + 25_000,
    notice: { appId, last: true, payload: { instId: d.me.nodeId, act: 'closed', reqId, typ: 'live', simNo: '1', chan: 1, mediaTyp: 'av' } },
  };
}

/** what every topology must do: atomic claims and the SIM rule, requests across nodes, a lost node reaped once */
async function exercise(url: string): Promise<void> {
  const dirs: RedisDirectory[] = [];
  const make = async (nodeId: string) => {
    const d = new RedisDirectory(url, { nodeId, epoch: `e-${nodeId}`, worker: 0 }, TTL, log);
    dirs.push(d);
    await d.start({ apiBase: `http://${nodeId}.example`, hosts: [`${nodeId}.example`] }, ['A', 'B']);
    d.ready();
    return d;
  };
  try {
    const [a, b, c] = [await make('a'), await make('b'), await make('c')];
    // claims: one winner per channel over 20 rounds, SIMs spread over the cluster's slots
    for (let i = 0; i < 20; i++) {
      const ch = { sim: `1390000${1000 + i}`, chan: 1 };
      const [x, y] = await Promise.all([a.claim(ch), b.claim(ch)]);
      assert.equal(Number(x.ok) + Number(y.ok), 1, `round ${i}: ${JSON.stringify([x, y])}`);
    }
    const sim = { sim: '13911112222', chan: 1 };
    assert.deepEqual(await c.claim(sim), { ok: true });
    c.hold(sim);
    const sibling = await a.claim({ sim: sim.sim, chan: 2 });
    assert.equal(sibling.ok, false);
    assert.equal(!sibling.ok && sibling.why, 'sim');
    assert.equal((await a.lookup({ sim: sim.sim, chan: 2 })).simHolder?.nodeId, 'c');
    // requests: unique over nodes, found by application, cap over nodes
    assert.equal(await a.reserve(entry('topo-req-1', a), 2), 'ok');
    assert.equal(await b.reserve(entry('topo-req-1', b), 2), 'self');
    assert.equal(await b.reserve(entry('topo-req-1', b, 'B'), 2), 'other');
    assert.equal(await c.reserve(entry('topo-req-2', c), 2), 'ok');
    assert.equal(await b.reserve(entry('topo-req-3', b), 2), 'cap');
    assert.deepEqual(
      (await b.find('A', ['topo-req-1', 'topo-req-2', 'nope'])).map((e) => e?.nodeId),
      ['a', 'c', undefined],
    );
    // c stops without a word: a or b reaps it once, its claim expires, its place comes back
    const lost: LostNode[] = [];
    a.onNodeLost((l) => lost.push(l));
    b.onNodeLost((l) => lost.push(l));
    const inner = c as unknown as { beatTimer: NodeJS.Timeout; viewTimer: NodeJS.Timeout; refreshTimer: NodeJS.Timeout; client: Redis | Cluster };
    clearInterval(inner.beatTimer);
    clearInterval(inner.refreshTimer);
    clearInterval(inner.viewTimer);
    inner.client.disconnect();
    dirs.splice(dirs.indexOf(c), 1);
    await waitFor('c reaped', () => lost.length > 0, 4 * TTL, 50);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(lost.length, 1);
    assert.deepEqual(
      lost[0].requests.map((e) => e.reqId),
      ['topo-req-2'],
    );
    assert.equal(await b.reserve(entry('topo-req-3', b), 2), 'ok');
    await waitFor("c's claim expired", async () => (await a.claim(sim)).ok, 4 * TTL, 100);
    assert.deepEqual(
      a.liveNodes().map((n) => n.nodeId),
      ['a', 'b'],
    );
  } finally {
    await Promise.all(dirs.map((d) => d.stop().catch(() => undefined)));
  }
}

describe('the fleet directory on Redis Cluster and Sentinel (real servers)', function () {
  this.timeout(90_000);

  it('a Cluster of three masters: atomic claims, the SIM rule, requests across nodes, a lost node reaped once', async () => {
    const cluster = await startCluster();
    try {
      await exercise(`redis+cluster://127.0.0.1:${cluster.ports[0]},127.0.0.1:${cluster.ports[1]}`);
      // the keys really are spread: every master holds some of the directory
      for (const p of cluster.ports) {
        const { stdout } = await run('redis-cli', ['-p', String(p), 'dbsize']);
        assert.ok(Number(stdout.trim()) > 0, `master ${p} holds no key`);
      }
    } finally {
      await cluster.stop();
    }
  });

  it('Sentinel: the directory finds the master through the sentinel', async () => {
    const s = await startSentinel();
    try {
      await exercise(`redis+sentinel://127.0.0.1:${s.sentinel}/gwmaster`);
      const { stdout } = await run('redis-cli', ['-p', String(s.master), 'exists', 'gw:nodes']);
      assert.equal(stdout.trim(), '1', 'the directory wrote to the master the sentinel names');
    } finally {
      await s.stop();
    }
  });

  it('a URL of another scheme, or a sentinel URL without its master, is refused with a message saying what is expected', async () => {
    assert.throws(() => new RedisDirectory('redis+sentinel://127.0.0.1:26379', { nodeId: 'x', epoch: 'e', worker: 0 }, TTL, log), /names its master/);
  });
});
