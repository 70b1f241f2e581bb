import assert from 'node:assert/strict';
import * as net from 'node:net';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { definePlugin, type AccessUnit, type MediaStream, type PluginDefinition, type TrackInfo } from '../index';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../testkit';
import { freePortOverrides } from '../../core/config';
import { fixtureClip } from '../../test/support/fixture-clip';

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
    @IsInt()
    @Min(0)
    @Max(65535)
    port = busy[0];
    @IsInt()
    @Min(0)
    @Max(65535)
    dataPort2013 = busy[1];
    @IsInt()
    @Min(0)
    @Max(65535)
    dataPort2019 = busy[2];
    @IsOptional()
    @IsInt()
    @Min(1)
    @Max(65535)
    publicPort: number | undefined = undefined;
    /** a number that is not a port: left alone */
    @IsInt()
    @Min(1)
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
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the SDK's tests import no plugin: this one test loads two plugins' config classes
    const ingest = require('../../plugins/jt1078-ingest/index').Jt1078IngestConfig as new () => object;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
    const flv = require('../../plugins/flv-out/index').FlvOutConfig as new () => object;
    assert.deepEqual(freePortOverrides(ingest), { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 });
    assert.deepEqual(freePortOverrides(flv), { port: 0 });
    assert.deepEqual(freePortOverrides(undefined), {});
  });

  it('jt1078-ingest and flv-out loaded by name get free ports; open results and play URLs carry them', async () => {
    gw = await startTestGateway({ plugins: [{ name: 'jt1078-ingest', config: { udp: true } }, { name: 'flv-out' }] });
    const defaults = [7080, 7081, 7612, 7613, 7614, 7615];
    const p = gw.ports;
    for (const key of [
      'jt1078-ingest.livePort2013',
      'jt1078-ingest.livePort2019',
      'jt1078-ingest.replayPort2013',
      'jt1078-ingest.replayPort2019',
      'flv-out.port',
    ]) {
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

/** A bus reader that keeps what it is given, with the time each unit arrived. */
function collect(stream: MediaStream): { units: AccessUnit[]; at: number[]; tracks: Array<ReadonlyArray<TrackInfo>>; close(): void } {
  const units: AccessUnit[] = [];
  const at: number[] = [];
  const tracks: Array<ReadonlyArray<TrackInfo>> = [];
  const sub = stream.subscribe({
    write(u) {
      units.push(u);
      at.push(performance.now());
    },
    tracks(t) {
      tracks.push(t);
    },
  });
  return { units, at, tracks, close: () => sub.close() };
}

async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('plugin-sdk test kit: media helpers (publish, open, waitReady)', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });
  // the capture re-timed to 25 fps: a 1 s pass is 25 frames, a keyframe first and no other (its GOP is 30 frames)
  const clipOf = (audio = false) => fixtureClip({ seconds: 1, fps: 25, audio });
  const boot = async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }] });
    return gw;
  };

  it('openStream, publish in real time, read through a bus subscription, waitReady', async function () {
    this.timeout(20_000);
    await boot();
    const clip = clipOf(true);
    const opened = await gw!.openStream({ simNo: '013900000001', chanId: 2 });
    assert.match(opened.reqId, /\S/);
    assert.equal(opened.streamName, '13900000001_2_1');
    assert.equal(opened.ready, false);
    assert.match(opened.playUrl, /\/live\/13900000001_2_1\?reqId=/);
    assert.equal(opened.result.reqId, opened.reqId);

    const stream = gw!.bus.get(opened.streamName)!;
    const reader = collect(stream);
    const t0 = performance.now();
    const p = gw!.publish(opened.streamName, clip);
    assert.equal(p.pushed, 0, 'nothing is pushed before publish() returns');
    const st = await gw!.waitReady(opened.reqId, 5000);
    assert.equal(st.ready, true);
    assert.equal(st.stream, opened.streamName);
    await p.done;
    await until(() => reader.units.length === clip.units.length, 'every unit at the reader');
    reader.close();

    // the very units of the clip (shared, not copied), in order, the keyframe first
    reader.units.forEach((u, i) => assert.equal(u, clip.units[i], `unit ${i}`));
    assert.equal(reader.units[0]!.kind, 'video');
    assert.ok(reader.units[0]!.keyframe);
    assert.deepEqual(
      reader.tracks.at(-1)!.map((t) => t.codec),
      ['h264', 'g711a'],
    );
    // paced by their timestamps: the last unit (dts 960) came about a second after the first
    const span = reader.at.at(-1)! - reader.at[0]!;
    assert.ok(span >= 900 && span < 3000, `span ${span} ms`);
    assert.ok(performance.now() - t0 >= 950);
    assert.equal(p.pushed, clip.units.length);
    const status = (await gw!.api('GET', `/strm/status?reqId=${opened.reqId}`)).json.data[0];
    assert.deepEqual(status.codecs, [
      { kind: 'video', codec: 'h264', width: 704, height: 576 },
      { kind: 'audio', codec: 'g711a', sampleRate: 8000 },
    ]);
  });

  it('all at once with loops: each pass continues the timeline at exact ticks; fps re-times the video', async () => {
    await boot();
    const clip = clipOf();
    const { streamName } = await gw!.openStream({ simNo: '13900000002', chanId: 1 });
    const reader = collect(gw!.bus.get(streamName)!);
    const p = gw!.publish(streamName, clip, { realtime: false, loop: 3 });
    assert.equal(p.pushed, 75, 'pushed before publish() returned');
    await p.done;
    await until(() => reader.units.length === 75, '3 passes at the reader');
    reader.units.forEach((u, i) => {
      assert.deepEqual([u.dtsTicks, u.dts, u.keyframe], [i * 3600, i * 40, i % 25 === 0], `unit ${i}`);
      assert.equal(u.payload, clip.units[i % 25]!.payload);
    });
    reader.close();

    const other = await gw!.openStream({ simNo: '13900000002', chanId: 3 });
    const fast = collect(gw!.bus.get(other.streamName)!);
    gw!.publish(other.streamName, clip, { realtime: false, fps: 50 });
    await until(() => fast.units.length === 25, 'the re-timed clip');
    assert.deepEqual(
      fast.units.map((u) => u.dtsTicks),
      clip.units.map((_, i) => i * 1800),
    );
    assert.throws(() => gw!.publish(other.streamName, clipOf(true), { fps: 50 }), /fps re-times video only/);
    assert.throws(() => gw!.publish(other.streamName, clip, { realtime: false, loop: true }), /endless loop needs realtime/);
  });

  it('a late reader starts at a keyframe; an endless loop stops with stop() and with the gateway', async function () {
    this.timeout(20_000);
    await boot();
    const clip = clipOf();
    const { streamName, reqId } = await gw!.openStream({ simNo: '13900000003', chanId: 1 });
    const p = gw!.publish(streamName, clip, { loop: true });
    await gw!.waitReady(reqId);
    // into the second GOP: the GOP cache gives the reader the keyframe at 1 s and what followed
    await until(() => p.pushed > 32, 'a second GOP');
    const late = collect(gw!.bus.get(streamName)!);
    await until(() => late.units.length > 5, 'units at the late reader');
    assert.ok(late.units[0]!.keyframe && late.units[0]!.dts === 1000, `first at ${late.units[0]!.dts}`);
    for (let i = 1; i < late.units.length; i++) assert.equal(late.units[i]!.dts, late.units[i - 1]!.dts + 40);
    p.stop();
    await p.done;
    const n = p.pushed;
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(p.pushed, n, 'nothing pushed after stop()');
    late.close();

    const again = gw!.publish(streamName, clip, { loop: true });
    await until(() => again.pushed > 2, 'the second publisher');
    await gw!.stop();
    gw = undefined;
    await again.done;
  });

  it('fails with messages that say what is wrong', async () => {
    await boot();
    await assert.rejects(gw!.openStream({ simNo: '13900000004', chanId: 1, fmt: 3 }), /open 13900000004\/1 refused: HTTP \d+, errCode -?\d+: .*fmt/);
    const { reqId } = await gw!.openStream({ simNo: '13900000004', chanId: 1 });
    await assert.rejects(gw!.waitReady(reqId, 200), new RegExp(`request ${reqId} was not ready within 200 ms .*is anything publishing`));
    await gw!.api('POST', '/strm/close', { reqIds: [reqId] });
    await assert.rejects(gw!.waitReady(reqId, 200), /is not open/);
    assert.throws(() => gw!.publish('no_such_stream', clipOf()), /no stream 'no_such_stream' on the bus/);
  });
});
