import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { testClip } from '../../../plugin-sdk/testkit';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import { HOST, ffprobeFlv, framesIn, httpPlay, pushAll, startFlvGateway, until, videoFrames, wsPlay, type FlvGateway } from './helpers';

async function metricsText(g: FlvGateway): Promise<string> {
  return String((await g.gw.api('GET', '/metrics', undefined, null)).json);
}

function metricValue(text: string, line: RegExp): number {
  const m = line.exec(text);
  return m ? Number(m[1]) : NaN;
}

describe('flv-out: lifecycle, gateways side by side, audio left out', function () {
  this.timeout(60_000);
  const started: FlvGateway[] = [];
  let dir: string;
  before(() => {
    dir = scratchDir('flv-out-lifecycle');
  });
  afterEach(async () => {
    for (const g of started.splice(0)) await g.stop().catch(() => undefined);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const start = async (flvOut: Record<string, unknown> = {}, captureLogs = false): Promise<FlvGateway> => {
    const g = await startFlvGateway(flvOut, {}, captureLogs);
    started.push(g);
    return g;
  };

  it('two gateways in one process each serve their own stream of the same name on their own port', async () => {
    const a = await start();
    const b = await start();
    assert.notEqual(a.port, b.port);
    const clips = [testClip(), testClip({ size: '160x120' })];
    const gws = [a, b];
    // the same SIM and channel on both: the same stream name, two unrelated streams
    const opened = await Promise.all(gws.map((g) => g.open('13900000001')));
    assert.equal(opened[0].stream, opened[1].stream);
    const players = gws.map((g, i) => httpPlay(g.port, opened[i].path));
    await until(() => gws.every((g) => g.flv.playerStats().length === 1), 'a player on each');
    gws.forEach((g, i) => {
      const pub = g.publisher(opened[i].stream);
      for (const t of clips[i].tracks) pub.setTrack(t);
      pushAll(pub, clips[i].units);
    });
    await until(() => players.every((p) => framesIn(p.data()) === 50), 'every frame on both');
    await Promise.all(gws.map((g, i) => g.gw.api('POST', '/strm/close', { reqIds: [opened[i].reqId] })));
    const sizes = await Promise.all(
      players.map(async (p, i) => {
        const probe = ffprobeFlv(await p.body, dir, `gw${i}.flv`);
        return `${probe.width}x${probe.height} ${probe.frames}`;
      }),
    );
    assert.deepEqual(sizes, ['320x240 50', '160x120 50']);
    for (const g of gws) {
      const text = await metricsText(g);
      assert.equal(metricValue(text, /^gw_flv_out_tags_total\{type="video"\} (\d+)$/m), 51, 'each counts its own tags: 50 frames and a sequence header');
    }
  });

  it('closing a request ends its players only; stats and gauges follow', async () => {
    const g = await start();
    const first = await g.open('13900000002', 1, 'one');
    const second = await g.open('13900000002', 1, 'two');
    assert.equal(first.stream, second.stream);
    const p1 = httpPlay(g.port, first.path);
    const p2 = wsPlay(g.port, second.path);
    await until(() => g.flv.playerStats().length === 2, 'two players');
    const clip = testClip();
    const pub = g.publisher(first.stream);
    for (const t of clip.tracks) pub.setTrack(t);
    pushAll(pub, clip.units.slice(0, 30));
    await until(() => framesIn(p1.data()) === 30 && framesIn(p2.data()) === 30, 'both to play');
    let text = await metricsText(g);
    assert.equal(metricValue(text, /^gw_flv_out_players (\d+)$/m), 2);
    assert.equal(metricValue(text, /^gw_flv_out_streams (\d+)$/m), 1, 'one stream, one FLV encoder');
    const out = metricValue(text, /^gw_flv_out_bytes_out (\d+)$/m);
    assert.equal(
      out,
      g.flv.playerStats().reduce((n, p) => n + p.bytesOut, 0),
    );
    const status = (await g.gw.api('GET', '/strm/status')).json.data as Array<Record<string, unknown>>;
    assert.deepEqual(
      status.map((r) => r.players),
      [1, 1],
    );

    await g.gw.api('POST', '/strm/close', { reqIds: [first.reqId] });
    await p1.body;
    assert.deepEqual(
      g.flv.playerStats().map((p) => p.reqId),
      [second.reqId],
      'the other request keeps its player',
    );
    pushAll(pub, clip.units.slice(30));
    await until(() => framesIn(p2.data()) === 50, 'the other player to go on');
    await g.gw.api('POST', '/strm/close', { reqIds: [second.reqId] });
    assert.equal((await p2.closed).code, 1000);
    await until(() => g.flv.playerStats().length === 0, 'no players');
    text = await metricsText(g);
    assert.equal(metricValue(text, /^gw_flv_out_streams (\d+)$/m), 0);
  });

  it('leaves G.711 out by default (counted, logged once per stream and codec); carries it when audioCodecs lists it', async () => {
    const clip = testClip({ audio: true });
    const audioUnits = clip.units.filter((u) => u.kind === 'audio').length;
    for (const carried of [false, true]) {
      const g = await start(carried ? { audioCodecs: ['aac', 'g711a'] } : {}, true);
      const o = await g.open('13900000003');
      const p = httpPlay(g.port, o.path);
      await until(() => g.flv.playerStats().length === 1, 'the player');
      const pub = g.publisher(o.stream);
      for (const t of clip.tracks) pub.setTrack(t);
      pushAll(pub, clip.units);
      await until(() => framesIn(p.data()) === 50, 'every frame');
      await g.gw.api('POST', '/strm/close', { reqIds: [o.reqId] });
      const flv = parseFlv(await p.body);
      const audioTags = flv.tags.filter((t) => t.type === 8);
      const skipped = metricValue(await metricsText(g), /^gw_flv_out_audio_skipped_total (\d+)$/m);
      const logged = g.gw.logs.filter((l) => l.msg === 'audio left out of the FLV; players get video only');
      if (carried) {
        assert.equal(flv.header.hasAudio, true);
        assert.ok(audioTags.length > 0 && audioTags.every((t) => t.codec === 'g711a'));
        assert.deepEqual([skipped, logged.length], [0, 0]);
      } else {
        assert.equal(flv.header.hasAudio, false, 'the header announces no audio');
        assert.equal(audioTags.length, 0);
        assert.equal(skipped, audioUnits, 'every audio unit counted');
        assert.equal(logged.length, 1, 'logged once');
        assert.match(String(logged[0].why), /not in audioCodecs/);
      }
      assert.equal(videoFrames(flv.tags).length, 50);
    }
  });

  it('stop() ends players and frees the port, leaving no handles; a taken port fails boot without exiting', async () => {
    // sockets, servers and pipes; timers are left out because mocha's own test timer comes and goes
    const kinds = (): string[] =>
      process
        .getActiveResourcesInfo()
        .filter((k) => k !== 'Timeout')
        .sort();
    const before = kinds();
    const g = await startFlvGateway();
    const port = g.port;
    const o = await g.open('13900000004');
    const hp = httpPlay(port, o.path);
    const wp = wsPlay(port, o.path);
    await until(() => g.flv.playerStats().length === 2, 'two players');
    const clip = testClip();
    const pub = g.publisher(o.stream);
    for (const t of clip.tracks) pub.setTrack(t);
    pushAll(pub, clip.units.slice(0, 10));
    await until(() => framesIn(hp.data()) === 10, 'media');

    // eslint-disable-next-line @typescript-eslint/unbound-method -- kept to be put back as it was; never called detached
    const exit = process.exit;
    let exitCalled = false;
    process.exit = ((code?: number) => {
      exitCalled = true;
      throw new Error(`process.exit(${code})`);
    }) as typeof process.exit;
    try {
      await assert.rejects(startFlvGateway({ port }), (err: Error) => /key port: port \d+ on 127\.0\.0\.1 is already in use/.test(err.message));
    } finally {
      process.exit = exit;
    }
    assert.equal(exitCalled, false);

    await g.stop();
    // (the kernel closes the requests first, so players get a clean end where the peer is quick enough)
    await Promise.allSettled([hp.body]);
    await wp.closed;
    assert.equal(g.flv.playerStats().length, 0);
    const again = net.createServer();
    await new Promise<void>((resolve, reject) => {
      again.once('error', reject);
      again.listen(port, HOST, resolve);
    });
    await new Promise<void>((resolve) => again.close(() => resolve()));
    await until(() => kinds().length <= before.length, 'handles to close', 2000).catch(() => undefined);
    assert.deepEqual(kinds(), before);
  });
});
