/**
 * The bench's census of terminals: the machine's listen counters read from /proc/net/netstat's text, a real
 * terminal socket closed by the far end counted as the gateway's doing, and the warning naming each cause.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { LinkCensus, allConnected, censusWarning, listenCounters, logWarnings } from './support/link-census';
import { spellLine, spellOf } from './support/spell';

const NETSTAT = [
  'TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPBacklogDrop',
  'TcpExt: 0 0 17 19 3',
  'IpExt: InNoRoutes InTruncatedPkts',
  'IpExt: 0 0',
].join('\n');

describe('bench link census', () => {
  it('reads ListenOverflows and ListenDrops by their column, and nothing from a text without them', () => {
    assert.deepEqual(
      listenCounters(() => NETSTAT),
      { ListenOverflows: 17, ListenDrops: 19 },
    );
    assert.equal(
      listenCounters(() => 'TcpExt: ListenOverflows\nTcpExt: 4\n'),
      undefined,
    );
    assert.equal(
      listenCounters(() => {
        throw new Error('ENOENT');
      }),
      undefined,
    );
    const here = listenCounters();
    if (process.platform === 'linux') assert.ok(here && Number.isInteger(here.ListenDrops), 'this machine has the counters');
  });

  it('counts a terminal socket the far end closed, with when', async () => {
    const server = net.createServer((s) => setTimeout(() => s.destroy(), 50));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const census = new LinkCensus(performance.now());
      const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      sock.on('error', () => undefined);
      census.watch(sock);
      await once(sock, 'close');
      census.opened();
      const f = census.figures(2, 1);
      assert.equal(f.closedByGateway, 1);
      assert.ok(f.firstClosedS !== undefined && f.firstClosedS >= 0.04 && f.firstClosedS < 5, `closed at ${f.firstClosedS} s`);
      assert.equal(allConnected(f), false);
    } finally {
      server.close();
    }
  });

  it('names each cause, and quotes the log', () => {
    const full = { terminals: 500, counted: 500, closedByGateway: 0, firstClosedS: undefined, listenDrops: 0 };
    assert.equal(censusWarning(full, []), undefined);
    assert.equal(
      censusWarning({ ...full, counted: 437, closedByGateway: 40, firstClosedS: 12.34, listenDrops: 23 }, ['core: connection refused (x40)']),
      "  WARNING: 63 of 500 terminals not connected at the window's end: 40 closed by the gateway (the first 12.3 s after the opens began), " +
        '23 open here but not counted by the gateway (the kernel dropped 23 handshakes on full accept queues while they connected); ' +
        "the gateway's log: core: connection refused (x40)",
    );
    assert.match(
      censusWarning({ ...full, counted: 499 }, []) ?? '',
      /1 of 500 .*1 open here but not counted by the gateway; nothing in the gateway's log at warn$/,
    );
  });

  it("takes the log's warnings and errors once each, with their count", () => {
    const log = [
      JSON.stringify({ level: 30, msg: 'terminal pushing' }),
      JSON.stringify({ level: 40, plugin: 'jt1078-ingest', msg: 'connection refused' }),
      'not json',
      JSON.stringify({ level: 50, msg: 'boom' }),
      JSON.stringify({ level: 40, plugin: 'jt1078-ingest', msg: 'connection refused' }),
    ].join('\n');
    assert.deepEqual(logWarnings(log), ['jt1078-ingest: connection refused (x2)', 'boom']);
  });
});

describe('bench spell', () => {
  it("names the spell by the floor's CPU scaled to 500 terminals, with issue 48's bound for it", () => {
    // issue 48's evening rounds: the floor at 44.8 % for 500 is slow; the morning's 46-55 % for 1,000 is fast
    assert.deepEqual(spellOf(44.8, 500), { name: 'slow', floorPer500: 44.8, ratioTarget: 1.6 });
    assert.equal(spellOf(55, 1000).name, 'fast');
    assert.equal(spellOf(55, 1000).ratioTarget, 1.45);
    assert.equal(spellOf(33.9, 500).name, 'middling');
    assert.equal(spellOf(40, 500).name, 'middling', 'slow is past 40 %');
    assert.equal(spellOf(30, 500).name, 'fast');
    assert.equal(spellOf(8, 50).name, 'unjudged', "50 terminals' floor is mostly fixed costs");
    assert.equal(
      spellLine(spellOf(8, 50), 50),
      'spell: not judged (it is, on the video-only floor at 250 terminals or more; the floor took 8.0 % of a core at 50)',
    );
    assert.equal(spellOf(49.2, 500, true).name, 'unjudged', 'a floor carrying audio');
    assert.equal(
      spellLine(spellOf(82.6, 1000), 1000),
      'spell: SLOW, the floor took 82.6 % of a core at 1000 terminals (41.3 % at 500; slow above 40, fast at 30 or less)',
    );
  });
});
