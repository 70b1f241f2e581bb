/**
 * With several workers, a per-address connection cap holds for the whole gateway, not per worker. The primary deals
 * an address's connections to the workers (API connections in turn, players and terminals by stream), and each
 * worker's gate counts only what it holds, so counted there alone an address would get its cap once per worker. The
 * primary counts them (core/cluster/address-caps.ts): from accept while it reads their first bytes, then in their worker until the
 * worker reports the close, or dies. The real gateway with two workers, loopback not exempt, the API port capped at 4.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { AddressCaps } from '../../core/cluster/address-caps';
import { parseAllowList } from '../../core/address-lists';
import { startClusterGateway, workerPids, workerRestarted, type ClusterGateway } from '../support/cluster-gateway';
import { metricSum, waitFor } from '../e2e/helpers';

const CAP = 4;

/** a keep-alive API connection that asked for /healthz: 'served' (left open) or 'refused' (reset or closed unanswered) */
async function tryApi(port: number, open: net.Socket[]): Promise<'served' | 'refused'> {
  const sock = net.connect(port, '127.0.0.1');
  return new Promise((resolve) => {
    let got = '';
    const done = (r: 'served' | 'refused') => {
      sock.removeAllListeners('data');
      if (r === 'served') open.push(sock);
      else sock.destroy();
      resolve(r);
    };
    sock.on('error', () => done('refused'));
    sock.on('close', () => done('refused'));
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if (/^HTTP\/1\.1 \d{3}/.test(got) && got.includes('\r\n\r\n')) done('served');
    });
    sock.on('connect', () => sock.write('GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n'));
  });
}

/** a connection that sends nothing: it stays with the primary, which waits for its first bytes */
async function silent(port: number): Promise<net.Socket> {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => undefined);
  await new Promise((r) => sock.once('connect', r));
  return sock;
}

async function closeAll(socks: net.Socket[]): Promise<void> {
  await Promise.all(
    socks.splice(0).map(
      (s) =>
        new Promise<void>((r) => {
          if (s.destroyed) {
            r();
            return;
          }
          s.once('close', () => r());
          s.destroy();
        }),
    ),
  );
}

describe('a per-address connection cap across two workers (real process)', function () {
  this.timeout(90_000);
  let gw: ClusterGateway;
  let port: number;
  const open: net.Socket[] = [];

  before(async () => {
    gw = await startClusterGateway('cluster-caps', { workers: 2, perAddressExempt: [], maxHttpConnectionsPerAddress: CAP }, [
      { name: 'flv-out', config: { port: 0 } },
    ]);
    port = gw.ports['gateway.httpPort'];
  });

  afterEach(() => closeAll(open));
  after(() => gw?.stop());

  /** `n` more connections admitted, once those closed before have been reported (in batches of 10 ms) */
  const admitsAgain = (n: number) =>
    waitFor(
      `${n} connections admitted again`,
      async () => {
        const fresh: net.Socket[] = [];
        const r: string[] = [];
        for (let i = 0; i < n; i++) r.push(await tryApi(port, fresh));
        if (r.every((x) => x === 'served')) {
          open.push(...fresh);
          return true;
        }
        await closeAll(fresh);
        return undefined;
      },
      10_000,
      50,
    );

  it('connections still with the primary (no bytes yet) count too', async () => {
    const quiet: net.Socket[] = [];
    for (let i = 0; i < CAP; i++) quiet.push(await silent(port));
    assert.equal(await tryApi(port, open), 'refused');
    await closeAll(quiet);
    await admitsAgain(CAP);
  });

  it('an address holds its cap across both workers, and gets it back as its connections close', async () => {
    // (the connections of the test before are let go as their closes reach the primary)
    await admitsAgain(CAP);
    // dealt in turn: both workers hold some, neither holds its cap alone
    for (let i = 0; i < 3; i++) assert.equal(await tryApi(port, open), 'refused', `connection ${CAP + 1 + i} over the cap`);
    assert.equal(open.length, CAP);
    await closeAll(open.splice(0, 2));
    await admitsAgain(2);
    assert.equal(open.length, CAP);
    assert.equal(await tryApi(port, open), 'refused');
  });

  it('a worker killed with SIGKILL: its connections stop counting, and refusals were counted and logged', async () => {
    await admitsAgain(CAP);
    const before = workerPids(gw.child.pid!);
    process.kill(before.get(1)!, 'SIGKILL');
    await workerRestarted(gw.child.pid!, 1, before.get(1));
    // the dead worker's half is free: as many connections are admitted as it held
    const dead = await waitFor(
      "the dead worker's connections closed",
      () => {
        const n = open.filter((s) => s.destroyed).length;
        return n > 0 ? n : undefined;
      },
      5000,
      20,
    );
    assert.ok(dead < CAP, `the dead worker held ${dead} of ${CAP}`);
    open.splice(0, open.length, ...open.filter((s) => !s.destroyed));
    await admitsAgain(dead);
    // refusals after the restart: the counts of those before may have gone with the killed worker (a counter lives in
    // the worker the primary told, and restarts from 0 with it, as Prometheus counters do)
    for (let i = 0; i < 3; i++) assert.equal(await tryApi(port, open), 'refused', `connection ${CAP + 1 + i} over the cap after the restart`);
    await closeAll(open);
    let last = '';
    // the primary tells a worker its refusals in batches (REFUSED_BATCH_MS), and /metrics is refused until the closes
    // above have reached the primary
    await waitFor(
      'the refusals after the restart counted',
      async () => {
        const r = await gw.api('GET', '/metrics').catch(() => undefined);
        if (r?.status !== 200) return undefined;
        last = r.text;
        return metricSum(r.text, 'gw_core_connections_refused_total', { listener: 'gateway.httpPort', reason: 'address' }) >= 3 ? true : undefined;
      },
      5000,
      50,
    ).catch(() =>
      assert.fail(
        `fewer than 3 address refusals counted:\n${last
          .split('\n')
          .filter((l) => l.includes('refused'))
          .join('\n')}`,
      ),
    );
    assert.ok(gw.log().includes('this address holds its maximum on the listener'), 'the refusal is logged');
  });
});

describe("AddressCaps: the primary's count of an address's connections", () => {
  const caps = () => new AddressCaps(2, parseAllowList(['10.9.0.0/16'], 'test', 'perAddressExempt'));

  it('refuses past the cap whatever worker holds them, and counts IPv4-mapped and plain alike', () => {
    const c = caps();
    const a = c.admit('192.0.2.1')!;
    c.move(a, 0);
    const b = c.admit('::ffff:192.0.2.1')!;
    c.move(b, 1);
    assert.equal(c.admit('192.0.2.1'), undefined);
    assert.ok(c.admit('192.0.2.2'), 'another address is not affected');
    c.closed(1, b.key);
    assert.ok(c.admit('192.0.2.1'));
  });

  it('exempt addresses are counted but never refused', () => {
    const c = caps();
    for (let i = 0; i < 5; i++) assert.ok(c.admit('10.9.1.1'));
    assert.equal(c.of('10.9.1.1'), 5);
  });

  it("a dead worker's connections stop counting once, however their hand-over ends", () => {
    const c = caps();
    const a = c.admit('192.0.2.1')!;
    const b = c.admit('192.0.2.1')!;
    c.move(a, 1);
    c.move(b, 1);
    c.workerGone(1);
    assert.equal(c.of('192.0.2.1'), 0);
    // one was still queued for the dead worker: handed to worker 0 instead, counted there and nowhere else
    c.move(b, 0);
    assert.equal(c.of('192.0.2.1'), 1);
    // a late close report of the dead worker changes nothing
    c.closed(1, a.key);
    assert.equal(c.of('192.0.2.1'), 1);
    c.move(b, 'gone');
    c.move(b, 'gone');
    assert.equal(c.of('192.0.2.1'), 0);
    // a connection closed while the primary still read its first bytes
    const r = c.admit('192.0.2.1')!;
    assert.equal(c.of('192.0.2.1'), 1);
    c.move(r, 'gone');
    assert.equal(c.of('192.0.2.1'), 0);
  });
});
