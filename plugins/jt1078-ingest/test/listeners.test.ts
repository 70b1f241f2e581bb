/**
 * The push listeners' binding of TCP and UDP on one port. A free port (0) is chosen by the TCP bind, and someone
 * else's UDP socket can hold the same number (CI lost a run to it): the pair must move to another port. The net
 * here binds real sockets; "someone else" is a real UDP socket that takes the port between the two binds.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { once } from 'node:events';
import pino from 'pino';
import { ManualClock, type PluginContext } from '../../../plugin-sdk';
import type { Jt1078IngestConfig } from '../src/config';
import type { IngestMetrics } from '../src/ingest-metrics';
import type { LinkHost } from '../src/terminal-link';
import type { TerminalLinkSet } from '../src/link-set';
import { listenForTerminals } from '../src/listeners';

interface Opened {
  tcp: net.Server[];
  udp: dgram.Socket[];
  squatters: dgram.Socket[];
}

/** A ctx.net of real sockets; `squat` says which UDP binds find their port taken just before they bind. */
function contextFor(ports: Partial<Jt1078IngestConfig>, squat: (nthUdp: number) => boolean, opened: Opened) {
  let udpCalls = 0;
  const bindError = (key: string, err: NodeJS.ErrnoException) => new Error(`key ${key}: ${err.code}`);
  const netApi = {
    listenTcp: (lo: { port: number; host?: string; key: string }) =>
      new Promise<net.Server>((resolve, reject) => {
        const srv = net.createServer();
        srv.once('error', (err) => reject(bindError(lo.key, err)));
        srv.listen(lo.port, '127.0.0.1', () => {
          opened.tcp.push(srv);
          resolve(srv);
        });
      }),
    listenUdp: async (lo: { port: number; key: string }) => {
      if (squat(++udpCalls)) {
        const s = dgram.createSocket('udp4');
        await new Promise<void>((resolve) => s.bind(lo.port, '127.0.0.1', resolve));
        opened.squatters.push(s);
      }
      return new Promise<dgram.Socket>((resolve, reject) => {
        const sock = dgram.createSocket('udp4');
        sock.once('error', (err) => reject(bindError(lo.key, err)));
        sock.bind(lo.port, '127.0.0.1', () => {
          opened.udp.push(sock);
          resolve(sock);
        });
      });
    },
  };
  const config = { host: '127.0.0.1', udp: true, udpIdleMs: 10_000, livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, ...ports };
  const ctx = { config, net: netApi, log: pino({ level: 'silent' }), clock: new ManualClock() } as unknown as PluginContext<Jt1078IngestConfig>;
  const noop = { add: () => undefined, inc: () => undefined };
  const m = { bytes: { child: () => noop }, links: noop, layouts: noop } as unknown as IngestMetrics;
  return { ctx, m };
}

const listening = (srv: net.Server) => srv.listening;

describe('jt1078-ingest listeners: TCP and UDP on one port', () => {
  let opened: Opened;
  beforeEach(() => {
    opened = { tcp: [], udp: [], squatters: [] };
  });
  afterEach(async () => {
    for (const s of opened.tcp) if (s.listening) await new Promise((r) => s.close(r));
    for (const s of [...opened.udp, ...opened.squatters]) s.close();
  });

  it('a free port whose UDP number is taken moves the pair to another port, and lets the first TCP bind go', async () => {
    // the first two UDP binds find their port taken: live2013 moves twice, the others bind at once
    const { ctx, m } = contextFor({}, (n) => n <= 2, opened);
    const l = await listenForTerminals(ctx, {} as LinkHost, {} as TerminalLinkSet, m);
    try {
      assert.equal(l.bound.size, 4);
      const squatted = opened.squatters.map((s) => s.address().port);
      assert.equal(squatted.length, 2);
      for (const [name, port] of l.bound) {
        assert.ok(!squatted.includes(port), `${name} bound ${port}, a port whose UDP was taken`);
        assert.ok(
          opened.udp.some((u) => u.address().port === port),
          `${name}: UDP bound on ${port}`,
        );
      }
      // the given-up TCP servers are closed; the four kept ones listen
      assert.equal(opened.tcp.length, 6);
      assert.deepEqual(
        opened.tcp.filter(listening).map((s) => (s.address() as net.AddressInfo).port),
        [...l.bound.values()],
      );
      const c = net.connect(squatted[0], '127.0.0.1');
      const [err] = (await once(c, 'error')) as [NodeJS.ErrnoException];
      assert.equal(err.code, 'ECONNREFUSED');
    } finally {
      l.stop();
    }
  });

  it('a configured port whose UDP is taken fails at once, naming the key', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const { ctx, m } = contextFor({ livePort2013: port }, (n) => n === 1, opened);
    await assert.rejects(listenForTerminals(ctx, {} as LinkHost, {} as TerminalLinkSet, m), /key livePort2013: EADDRINUSE/);
    assert.equal(opened.tcp.length, 1, 'no second try on a port the site gave');
  });

  it('after eight taken free ports it gives up with the bind error', async () => {
    const { ctx, m } = contextFor({}, () => true, opened);
    await assert.rejects(listenForTerminals(ctx, {} as LinkHost, {} as TerminalLinkSet, m), /key livePort2013: EADDRINUSE/);
    assert.equal(opened.tcp.length, 8);
    assert.equal(opened.tcp.filter(listening).length, 1, 'the last try is left to the plugin stop, as any bound server');
  });
});
