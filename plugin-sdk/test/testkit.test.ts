import assert from 'node:assert/strict';
import * as net from 'node:net';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { definePlugin, type PluginDefinition } from '../index';
import { startTestGateway, type TestGateway } from '../testkit';
import { freePortOverrides } from '../../core/config';

function listen(port = 0): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer((s) => s.destroy());
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}
const portOf = (srv: net.Server): number => (srv.address() as net.AddressInfo).port;
const closeServer = (srv: net.Server): Promise<void> => new Promise((r) => srv.close(() => r()));

/**
 * A plugin whose config defaults to ports that are taken while it boots (a gateway already running on this
 * machine, as 7080-7081 and 7612-7615 are for the default site), and whose publicPort follows its port.
 */
function fixedPortPlugin(busy: number[]): { def: PluginDefinition<object>; seen: () => Record<string, unknown> } {
  class FixedConfig {
    @IsInt() @Min(0) @Max(65535)
    port = busy[0];
    @IsInt() @Min(0) @Max(65535)
    dataPort2013 = busy[1];
    @IsInt() @Min(0) @Max(65535)
    dataPort2019 = busy[2];
    @IsOptional() @IsInt() @Min(1) @Max(65535)
    publicPort: number | undefined = undefined;
    /** a number that is not a port: left alone */
    @IsInt() @Min(1)
    portions = 7;
  }
  let seen: Record<string, unknown> = {};
  const def = definePlugin({
    name: 'fixed',
    config: FixedConfig,
    async setup(ctx) {
      seen = { ...ctx.config };
      const srv = await ctx.net.listenTcp({ port: ctx.config.port, key: 'port' }, (s) => s.destroy());
      await ctx.net.listenTcp({ port: ctx.config.dataPort2013, key: 'dataPort2013' }, (s) => s.destroy());
      await ctx.net.listenUdp({ port: ctx.config.dataPort2019, key: 'dataPort2019' }, () => undefined);
      const bound = (srv.address() as net.AddressInfo).port;
      ctx.routes.get('/fixed/where', () => ({ data: [{ advertised: ctx.config.publicPort ?? bound }] }), { auth: 'api' });
    },
  });
  return { def: def as PluginDefinition<object>, seen: () => seen };
}

describe('plugin-sdk test kit: ports', () => {
  const blockers: net.Server[] = [];
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await Promise.all(blockers.splice(0).map(closeServer));
  });

  async function busyPorts(n: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = await listen();
      blockers.push(s);
      out.push(portOf(s));
    }
    return out;
  }

  it('a plugin whose default ports are taken boots on free ones, and reports those', async () => {
    const busy = await busyPorts(3);
    const p = fixedPortPlugin(busy);
    gw = await startTestGateway({ plugins: [{ name: 'fixed', def: p.def }] });
    assert.deepEqual(p.seen(), { port: 0, dataPort2013: 0, dataPort2019: 0, publicPort: undefined, portions: 7 });
    const bound = gw.ports['fixed.port'];
    assert.ok(bound > 0 && !busy.includes(bound), `bound ${bound}`);
    assert.ok(gw.ports['fixed.dataPort2013'] > 0 && !busy.includes(gw.ports['fixed.dataPort2013']));
    assert.ok(gw.ports['fixed.dataPort2019:udp'] > 0);
    // publicPort is not bound: unset, it follows the port really bound
    const r = await gw.api('GET', '/fixed/where');
    assert.deepEqual(r.json.data, [{ advertised: bound }]);
  });

  it('keeps the ports a test gives, in the config or in the environment (which wins)', async () => {
    const busy = await busyPorts(3);
    // a port known to be free: bind, note, release
    const spare = await listen();
    const wanted = portOf(spare);
    await closeServer(spare);
    const spare2 = await listen();
    const fromEnv = portOf(spare2);
    await closeServer(spare2);
    const p = fixedPortPlugin(busy);
    gw = await startTestGateway({
      plugins: [{ name: 'fixed', def: p.def, config: { port: wanted, publicPort: 8443 } }],
      env: { GW_FIXED_DATA_PORT2019: String(fromEnv) },
    });
    assert.equal(gw.ports['fixed.port'], wanted);
    assert.equal(gw.ports['fixed.dataPort2019:udp'], fromEnv);
    assert.deepEqual((await gw.api('GET', '/fixed/where')).json.data, [{ advertised: 8443 }]);
  });

  it('a port the test gives that is taken still fails boot naming the key', async () => {
    const busy = await busyPorts(3);
    const p = fixedPortPlugin(busy);
    await assert.rejects(
      startTestGateway({ plugins: [{ name: 'fixed', def: p.def, config: { port: busy[0] } }] }),
      new RegExp(`plugin fixed: key port: port ${busy[0]} on 127\\.0\\.0\\.1 is already in use`),
    );
  });

  it('the port-like keys of the real plugins: bound ports, not the advertised or non-port ones', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ingest = require('../../plugins/jt1078-ingest/index').Jt1078IngestConfig as new () => object;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const flv = require('../../plugins/flv-out/index').FlvOutConfig as new () => object;
    assert.deepEqual(freePortOverrides(ingest), { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 });
    assert.deepEqual(freePortOverrides(flv), { port: 0 });
    assert.deepEqual(freePortOverrides(undefined), {});
  });

  it('jt1078-ingest and flv-out loaded by name get free ports; open results and play URLs carry them', async () => {
    gw = await startTestGateway({ plugins: [{ name: 'jt1078-ingest', config: { udp: true } }, { name: 'flv-out' }] });
    const defaults = [7080, 7081, 7612, 7613, 7614, 7615];
    const p = gw.ports;
    for (const key of ['jt1078-ingest.livePort2013', 'jt1078-ingest.livePort2019', 'jt1078-ingest.replayPort2013', 'jt1078-ingest.replayPort2019', 'flv-out.port']) {
      assert.ok(p[key] > 0 && !defaults.includes(p[key]), `${key} bound ${p[key]}`);
    }
    // UDP shares each TCP listener's number
    assert.equal(p['jt1078-ingest.livePort2013:udp'], p['jt1078-ingest.livePort2013']);

    const live = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '13900000001', chanId: 1, scheme: 'http' });
    assert.equal(live.json.errCode, 0, JSON.stringify(live.json));
    const l = live.json.data[0];
    assert.deepEqual([l.port, l.port2019], [p['jt1078-ingest.livePort2013'], p['jt1078-ingest.livePort2019']]);
    assert.equal(new URL(l.playUrl).port, String(p['flv-out.port']));

    const replay = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'replay', simNo: '13900000001', chanId: 1, scheme: 'http' });
    assert.equal(replay.json.errCode, 0, JSON.stringify(replay.json));
    const r = replay.json.data[0];
    assert.deepEqual([r.port, r.port2019], [p['jt1078-ingest.replayPort2013'], p['jt1078-ingest.replayPort2019']]);

    // the play URL's port really serves FLV: an unknown token is refused with 401 there
    const res = await fetch(l.playUrl.replace('token=t', 'token=wrong'));
    assert.equal(res.status, 401);
    await res.body?.cancel();
  });
});
