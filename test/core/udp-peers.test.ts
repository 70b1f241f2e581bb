/**
 * UdpPeerSockets (core/cluster/udp-peers.ts), on real loopback sockets: a socket bound with SO_REUSEADDR stands in
 * for the primary's, and the router reads a datagram's first byte as its key ('a' is this worker's). What the kernel
 * does with a connected socket on a shared port is what is tested, so nothing here is simulated but the router. The
 * two-worker gateway with real terminals is test/core/cluster-udp.test.ts.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import pino from 'pino';
import { UDP_PEER_PROOF, UdpPeerSockets, type UdpPeerEvent, type UdpPeerSocketsOptions } from '../../core/cluster/udp-peers';
import { waitFor } from '../e2e/helpers';

interface Got {
  data: string;
  port: number;
}

async function bound(reuseAddr = false, port = 0): Promise<dgram.Socket> {
  const s = dgram.createSocket({ type: 'udp4', reuseAddr });
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(port, '127.0.0.1', () => resolve());
  });
  return s;
}

const portOf = (s: dgram.Socket) => s.address().port;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("UDP peer sockets: a peer's datagrams to its worker without the primary (real sockets)", function () {
  this.timeout(20_000);
  let primary: dgram.Socket;
  let peers: UdpPeerSockets;
  const atPrimary: Got[] = [];
  const delivered: Got[] = [];
  const rerouted: Array<Got & { key: string }> = [];
  const events: UdpPeerEvent[] = [];
  const counts = { datagrams: 0 };
  let fdsOpen = 0;
  let fdsFree = true;
  const terminals: dgram.Socket[] = [];

  function start(o: Partial<UdpPeerSocketsOptions> = {}): UdpPeerSockets {
    return new UdpPeerSockets({
      type: 'udp4',
      host: '127.0.0.1',
      port: portOf(primary),
      router: (b) => (b.length ? { key: String.fromCharCode(b[0]) } : 'any'),
      owns: (key) => key === 'a',
      deliver: (m, r) => delivered.push({ data: m.toString(), port: r.port }),
      reroute: (m, r, key) => rerouted.push({ data: m.toString(), port: r.port, key }),
      max: 100,
      idleMs: 60_000,
      counts,
      log: pino({ level: 'silent' }),
      fds: {
        mayOpen: () => fdsFree,
        opened: () => {
          fdsOpen++;
        },
        closed: () => {
          fdsOpen--;
        },
      },
      onEvent: (e) => events.push(e),
      ...o,
    });
  }

  async function terminal(): Promise<dgram.Socket> {
    const t = await bound();
    terminals.push(t);
    return t;
  }

  /** sends from `t` to the shared port and waits until `where` holds it */
  async function send(t: dgram.Socket, data: string, where: Got[]): Promise<void> {
    t.send(data, portOf(primary), '127.0.0.1');
    await waitFor(`${data} at the expected socket`, () => where.some((g) => g.data === data && g.port === portOf(t)), 5_000, 5);
  }

  /** the primary routed datagrams of `t` here: it gets its socket at the UDP_PEER_PROOF'th */
  async function adopt(t: dgram.Socket): Promise<void> {
    const opened = events.filter((e) => e === 'opened').length;
    for (let i = 0; i < UDP_PEER_PROOF - 1; i++) peers.seen('127.0.0.1', portOf(t));
    assert.equal(events.filter((e) => e === 'opened').length, opened);
    peers.seen('127.0.0.1', portOf(t));
    await waitFor('the peer socket connected', () => events.filter((e) => e === 'opened').length > opened, 5_000, 5);
  }

  beforeEach(async () => {
    primary = await bound(true);
    primary.on('message', (m, r) => atPrimary.push({ data: m.toString(), port: r.port }));
    for (const a of [atPrimary, delivered, rerouted, events]) a.length = 0;
    counts.datagrams = 0;
    fdsFree = true;
    peers = start();
  });

  afterEach(() => {
    peers.close();
    assert.equal(fdsOpen, 0, 'every peer socket opened was counted closed');
    primary.close();
    for (const t of terminals.splice(0)) t.close();
  });

  it("takes an adopted peer's datagrams from the primary, and replies leave from the shared port", async () => {
    const t = await terminal();
    await send(t, 'a1', atPrimary);
    await adopt(t);
    assert.equal(peers.size, 1);
    await send(t, 'a2', delivered);
    await send(t, 'a3', delivered);
    assert.deepEqual(
      atPrimary.map((g) => g.data),
      ['a1'],
      'nothing after the socket connected reached the primary',
    );
    assert.equal(counts.datagrams, 2);

    const reply = new Promise<dgram.RemoteInfo>((resolve) => t.once('message', (_m, r) => resolve(r)));
    assert.equal(peers.send(Buffer.from('reply'), portOf(t), '127.0.0.1'), true);
    assert.equal((await reply).port, portOf(primary), 'the terminal hears the port it talks to');
    assert.equal(peers.send(Buffer.from('x'), 9, '127.0.0.1'), false, 'a peer without a socket: the primary sends');

    // another peer is still the primary's
    const other = await terminal();
    await send(other, 'a9', atPrimary);
    assert.ok(!delivered.some((g) => g.data === 'a9'));
  });

  it("a peer that also sends another worker's channel: that datagram goes back to the primary, and the peer with it", async () => {
    const t = await terminal();
    await adopt(t);
    await send(t, 'a1', delivered);
    t.send('b1', portOf(primary), '127.0.0.1');
    await waitFor('b1 rerouted', () => rerouted.some((g) => g.data === 'b1'), 5_000, 5);
    assert.deepEqual(rerouted, [{ data: 'b1', port: portOf(t), key: 'b' }]);
    assert.ok(events.includes('shared'));
    assert.equal(peers.size, 0);
    assert.ok(!delivered.some((g) => g.data === 'b1'), 'not delivered here');
    await send(t, 'a2', atPrimary);
    // routed here again by the primary: left to it for a while
    for (let i = 0; i < UDP_PEER_PROOF * 2; i++) peers.seen('127.0.0.1', portOf(t));
    assert.equal(peers.size, 0);
  });

  it('a flood of forged source addresses, a datagram or two from each, opens no socket', async () => {
    for (let port = 20_000; port < 30_000; port++) {
      peers.seen('127.0.0.1', port);
      if (port % 3 === 0) peers.seen('127.0.0.1', port);
    }
    assert.equal(peers.size, 0);
    assert.equal(fdsOpen, 0);
    // a real terminal among them still gets its socket
    await adopt(await terminal());
  });

  it('drops junk (no key) as the primary does', async () => {
    const t = await terminal();
    await adopt(t);
    t.send(Buffer.alloc(0), portOf(primary), '127.0.0.1');
    await send(t, 'a1', delivered);
    assert.deepEqual(
      delivered.map((g) => g.data),
      ['a1'],
    );
    assert.equal(rerouted.length, 0);
  });

  it("closes a silent peer's socket, whose datagrams then reach the primary again", async () => {
    peers.close();
    peers = start({ idleMs: 200 });
    const t = await terminal();
    await adopt(t);
    await send(t, 'a1', delivered);
    await waitFor('closed as idle', () => events.includes('idle'), 5_000, 20);
    assert.equal(peers.size, 0);
    await send(t, 'a2', atPrimary);
    // and the next datagram the primary routes here opens it again
    await adopt(t);
    await send(t, 'a3', delivered);
  });

  it('opens at most `max` sockets, and none while descriptors are short', async () => {
    peers.close();
    peers = start({ max: 1 });
    const [t1, t2] = [await terminal(), await terminal()];
    await adopt(t1);
    for (let i = 0; i < UDP_PEER_PROOF; i++) peers.seen('127.0.0.1', portOf(t2));
    assert.deepEqual(
      events.filter((e) => e !== 'opened'),
      ['full'],
    );
    peers.close();
    peers = start();
    fdsFree = false;
    for (let i = 0; i < UDP_PEER_PROOF; i++) peers.seen('127.0.0.1', portOf(t2));
    assert.deepEqual(
      events.filter((e) => e !== 'opened'),
      ['full', 'fds'],
    );
    assert.equal(peers.size, 0);
    await send(t2, 'a1', atPrimary);
  });

  it("a peer socket that fails (the peer gone: ICMP port unreachable) is closed, and the peer is the primary's again", async () => {
    const t = await terminal();
    await adopt(t);
    const port = portOf(t);
    terminals.splice(terminals.indexOf(t), 1);
    await new Promise<void>((r) => t.close(() => r()));
    // the kernel answers the send with a port unreachable, which Linux reports on the connected socket
    for (let i = 0; i < 20 && !events.includes('failed'); i++) {
      peers.send(Buffer.from('a-x'), port, '127.0.0.1', () => undefined);
      await sleep(20);
    }
    assert.ok(events.includes('failed'), `events: ${events.join(',')}`);
    assert.equal(peers.size, 0);
    // a new terminal on the same port is routed by the primary
    const again = await bound(false, port);
    terminals.push(again);
    await send(again, 'a1', atPrimary);
  });
});
