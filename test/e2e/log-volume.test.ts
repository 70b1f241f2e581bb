/**
 * What an attacker (or a busy application) can make the gateway write to its log. A UDP flood of valid-looking 1078
 * headers from many source ports makes a link per port, and a line per link would be 96,000 lines in 30 s; a flood
 * of bad play tokens would be a warning each; every open/close cycle has its lines. So: per-source rate limits with
 * a suppressed count, and requestLogLevel for the request lines.
 */
import assert from 'node:assert/strict';
import * as dgram from 'node:dgram';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestGateway, type TestGateway } from '../../plugin-sdk/testkit';
import { Jt1078Packer } from '../../plugins/jt1078-ingest/src/packer';
import { closeReq, httpUrlOf, metric, openLive, waitFor } from './helpers';

const INFO = 30;

function linesAtInfo(gw: TestGateway, msg?: string): Array<Record<string, unknown>> {
  return gw.logs.filter((l) => Number(l.level) >= INFO && (msg === undefined || l.msg === msg));
}

async function startGw(gateway: Record<string, unknown> = {}): Promise<TestGateway> {
  return startTestGateway({
    captureLogs: true,
    gateway: { logLevel: 'info', ...gateway },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, unknownGraceMs: 300, udpIdleMs: 300 } },
      { name: 'flv-out', config: { port: 0 } },
    ],
  });
}

describe('log volume under floods', function () {
  this.timeout(60_000);

  it('a UDP flood of valid 1078 packets for unopened channels from 2,000 source ports writes a handful of lines, with the count left out', async () => {
    const gw = await startGw();
    try {
      const port = gw.ports['jt1078-ingest.livePort2013:udp'];
      const packet = (i: number) =>
        new Jt1078Packer({ layout: '2013', sim: `0139${String(i).padStart(8, '0')}`, channel: 1 }).packFrame({
          dataType: 0,
          pt: 98,
          timestamp: 1000,
          payload: Buffer.from([0, 0, 0, 1, 0x65, 0x88, 0x84]),
        })[0];
      const before = linesAtInfo(gw).length;
      // 2,000 senders, each its own source port (a link each), a few datagrams each
      for (let batch = 0; batch < 20; batch++) {
        const socks = await Promise.all(
          Array.from(
            { length: 100 },
            () =>
              new Promise<dgram.Socket>((resolve) => {
                const s = dgram.createSocket('udp4');
                s.bind(0, '127.0.0.1', () => resolve(s));
              }),
          ),
        );
        await Promise.all(
          socks.map(
            (s, i) =>
              new Promise<void>((resolve) => {
                const p = packet(batch * 100 + i);
                s.send(p, port, '127.0.0.1', () => s.send(p, port, '127.0.0.1', () => resolve()));
              }),
          ),
        );
        for (const s of socks) s.close();
        // the kernel's receive buffer holds a few hundred small datagrams: let the gateway read them
        await sleep(40);
      }
      const linksMade = await metric(gw, 'gw_jt1078_ingest_links_total', { transport: 'udp' });
      assert.ok(linksMade >= 1500, `UDP links the flood made: ${linksMade} (each used to write two lines)`);
      // the links time out (udpIdleMs) and close: their close lines are rate-limited too
      await waitFor('the flood links to close', async () => (await metric(gw, 'gw_jt1078_ingest_links')) === 0 || undefined, 20_000).catch(() => undefined);
      await sleep(800);
      const flood = linesAtInfo(gw).slice(before);
      const unmatched = flood.filter((l) => l.msg === 'data for a channel nobody opened: dropped');
      const closed = flood.filter((l) => l.msg === 'terminal link closed');
      assert.ok(unmatched.length >= 1 && unmatched.length <= 3, `unmatched warnings: ${unmatched.length}`);
      assert.ok(closed.length <= 3, `link-closed lines: ${closed.length}`);
      assert.ok(flood.length <= 10, `lines written for the flood: ${flood.length} (${[...new Set(flood.map((l) => l.msg))].join('; ')})`);
      // the packets are all counted even though the lines are not
      assert.ok((await metric(gw, 'gw_jt1078_ingest_unmatched_packets_total')) >= linksMade);
    } finally {
      await gw.stop();
    }
    // at stop, a line says how much the rate limit left out
    const told = gw.logs.find((l) => l.msg === 'lines left out by the per-source log rate limit since start');
    assert.ok(told && Number(told.suppressed) > 1000, `stop summary: ${JSON.stringify(told)}`);
  });

  it('1,000 plays with a wrong token write one refusal line per address per 10 s, and every refusal is counted', async () => {
    const gw = await startGw();
    try {
      const r = await openLive(gw, '013800138001', 1, { user: { token: 'right' } });
      const url = new URL(httpUrlOf(r.playUrl));
      url.searchParams.set('token', 'wrong');
      const codes = new Set<number>();
      for (let i = 0; i < 1000; i += 50) {
        const res = await Promise.all(
          Array.from({ length: 50 }, () =>
            fetch(url).then(async (x) => {
              await x.arrayBuffer();
              return x.status;
            }),
          ),
        );
        for (const c of res) codes.add(c);
      }
      assert.deepEqual([...codes], [401]);
      const refused = linesAtInfo(gw, 'play refused: unknown request or wrong token');
      assert.equal(refused.length, 1);
      assert.equal(await metric(gw, 'gw_flv_out_plays_refused_total'), 1000, 'every refusal counted');
      await closeReq(gw, r.reqId);
    } finally {
      await gw.stop();
    }
  });

  it("requestLogLevel debug: open/close cycles write no info line; info (the default) writes each request's lines", async () => {
    for (const level of ['debug', 'info'] as const) {
      // the gateway logs at debug here, so the lines are seen at their level
      const gw = await startGw({ requestLogLevel: level, logLevel: 'debug' });
      try {
        const before = linesAtInfo(gw).length;
        for (let i = 0; i < 50; i++) {
          const r = await openLive(gw, '013800138002', 1 + (i % 4));
          await closeReq(gw, r.reqId);
        }
        const cycle = linesAtInfo(gw).slice(before);
        if (level === 'debug') {
          assert.deepEqual(
            cycle.map((l) => l.msg),
            [],
            'no line at info or above for the cycles',
          );
          const debug = gw.logs.filter((l) => l.msg === 'request opened' || l.msg === 'request closed');
          assert.equal(debug.length, 100, 'still written at debug');
          assert.ok(debug.every((l) => l.level === 20));
        } else {
          assert.equal(cycle.filter((l) => l.msg === 'request opened').length, 50);
          assert.equal(cycle.filter((l) => l.msg === 'request closed').length, 50);
        }
      } finally {
        await gw.stop();
      }
    }
  });

  it('a bad requestLogLevel stops boot naming the key', async () => {
    await assert.rejects(startGw({ requestLogLevel: 'loud' }), /requestLogLevel/);
  });
});
