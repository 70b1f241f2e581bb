import assert from 'node:assert/strict';
import { audioUnit, type AccessUnit, type PluginDefinition, type TrackInfo } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { adts, ffmpegDecode, frequency } from '../../../test/support/audio';
import audioAac from '../index';

async function until(what: string, fn: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Read {
  units: AccessUnit[];
  tracks: Array<ReadonlyArray<TrackInfo>>;
}

describe('audio-aac: the aac stage', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const clip = testClip({ seconds: 2, audio: true });

  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'audio-aac', def: audioAac as PluginDefinition<object> },
      ],
      captureLogs: true,
    });
  });
  after(() => gw.stop());

  /** opens a channel, reads it via the stage with these params, pushes the whole clip at once, waits for `enough` */
  async function read(
    chanId: number,
    params: Record<string, unknown> | undefined,
    units: readonly AccessUnit[],
    tracks: readonly TrackInfo[],
    enough: (r: Read) => boolean,
  ): Promise<Read & { reqId: string }> {
    const open = await gw.openStream({ simNo: '13900000010', chanId });
    const stream = gw.bus.get(open.streamName)!;
    const r: Read = { units: [], tracks: [] };
    stream.subscribe({ write: (u) => r.units.push(u), tracks: (t) => r.tracks.push(t) }, { via: { stage: 'aac', params } });
    const pub = stream.attachPublisher();
    for (const t of tracks) pub.setTrack(t);
    for (const u of units) pub.push(u);
    await until('the stage output', () => enough(r));
    return { ...r, reqId: open.reqId };
  }

  it('turns G.711A into AAC-LC 8 kHz mono by default: a tone ffmpeg decodes at its frequency, frames back to back, video by reference', async () => {
    const audioIn = clip.units.filter((u) => u.kind === 'audio');
    const samplesIn = audioIn.reduce((n, u) => n + u.duration, 0);
    // all but the last two frames (the encoder holds one as look-ahead, and one is still filling)
    const expected = Math.floor(samplesIn / 1024) - 1;
    const r = await read(1, undefined, clip.units, clip.tracks, (x) => x.units.filter((u) => u.kind === 'audio').length >= expected);
    const aac = r.units.filter((u) => u.kind === 'audio');
    const video = r.units.filter((u) => u.kind === 'video');
    const last = r.tracks[r.tracks.length - 1]!;
    const at = last.find((t) => t.kind === 'audio')!;
    assert.deepEqual(
      { codec: at.codec, sampleRate: (at as { sampleRate: number }).sampleRate, channels: (at as { channels: number }).channels },
      { codec: 'aac', sampleRate: 8000, channels: 1 },
    );
    assert.deepEqual([...(at as { config: Buffer }).config], [0x15, 0x88], 'plain AAC-LC ASC: 8 kHz, mono');
    assert.ok(
      last.some((t) => t.kind === 'video'),
      'the video track is passed on',
    );
    assert.equal(video.length, clip.frameCount);
    assert.ok(
      video.every((u, i) => u === clip.units.filter((x) => x.kind === 'video')[i]),
      'video units by reference',
    );
    assert.ok(aac.every((u) => u.codec === 'aac' && u.timescale === 8000 && u.duration === 1024));
    for (let i = 1; i < aac.length; i++) assert.equal(aac[i].dtsTicks - aac[i - 1].dtsTicks, 1024, `frame ${i} follows on`);
    // the first frame is the encoder's priming: it starts 1024 samples before the first input sample
    assert.equal(aac[0].dtsTicks, audioIn[0].dtsTicks - 1024);

    const pcm = ffmpegDecode(
      adts(
        Buffer.from((at as { config: Buffer }).config),
        aac.map((u) => u.payload),
      ),
      'aac',
      ['-ac', '1'],
    );
    const f = frequency(pcm, 8000, 2048, pcm.length - 1024);
    assert.ok(Math.abs(f - 1000) < 10, `decoded tone at ${f.toFixed(1)} Hz`);
    await gw.api('POST', '/strm/close', { reqIds: [r.reqId] });
  });

  it('takes audioCfg: 16 kHz stereo, timed at 16 kHz', async () => {
    const r = await read(2, { sampleRate: 16000, channels: 2 }, clip.units, clip.tracks, (x) => x.units.filter((u) => u.kind === 'audio').length >= 20);
    const at = r.tracks[r.tracks.length - 1]!.find((t) => t.kind === 'audio') as { sampleRate: number; channels: number; config: Buffer };
    assert.deepEqual([at.sampleRate, at.channels], [16000, 2]);
    const aac = r.units.filter((u) => u.kind === 'audio');
    assert.ok(aac.every((u) => u.timescale === 16000));
    const pcm = ffmpegDecode(
      adts(
        Buffer.from(at.config),
        aac.map((u) => u.payload),
      ),
      'aac',
      ['-ac', '1'],
    );
    const f = frequency(pcm, 16000, 4096, pcm.length - 2048);
    assert.ok(Math.abs(f - 1000) < 10, `decoded tone at ${f.toFixed(1)} Hz`);
    await gw.api('POST', '/strm/close', { reqIds: [r.reqId] });
  });

  it('passes kept codecs through; leaves out audio it cannot decode, video unharmed, counted', async () => {
    const kept = await read(3, { keep: ['g711a'] }, clip.units, clip.tracks, (x) => x.units.length === clip.units.length);
    // each track in order (video passes at once, the stage's reader starts a microtask after the pushes here)
    const ofKind = (list: readonly AccessUnit[], kind: string) => list.filter((u) => u.kind === kind);
    assert.ok(
      ofKind(kept.units, 'video').every((u, i) => u === ofKind(clip.units, 'video')[i]),
      'video: the same objects, in order',
    );
    assert.equal(ofKind(kept.units, 'video').length, clip.frameCount);
    const show = (u: AccessUnit) => [u.codec, u.dtsTicks, u.duration, u.payload.toString('hex')];
    assert.deepEqual(ofKind(kept.units, 'audio').map(show), ofKind(clip.units, 'audio').map(show), 'audio as received, in order');
    await gw.api('POST', '/strm/close', { reqIds: [kept.reqId] });

    const g729 = clip.units.map((u) =>
      u.kind === 'audio' ? audioUnit({ codec: 'g729', dts: u.dts, timescale: 8000, duration: 320, payload: Buffer.alloc(40) }) : u,
    );
    const tracks: TrackInfo[] = [clip.video, { kind: 'audio', codec: 'g729', sampleRate: 8000, channels: 1 }];
    const r = await read(4, undefined, g729, tracks, (x) => x.units.length >= clip.frameCount);
    assert.equal(r.units.filter((u) => u.kind === 'video').length, clip.frameCount);
    assert.equal(r.units.filter((u) => u.kind === 'audio').length, 0);
    const metrics = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(metrics, /^gw_audio_aac_left_out_total\{codec="g729"\} 1$/m);
    assert.ok(gw.logs.some((l) => l.msg === 'audio codec cannot be decoded: left out of the AAC form (video goes on)' && l.codec === 'g729'));
    await gw.api('POST', '/strm/close', { reqIds: [r.reqId] });
  });

  it('bad audio never stops the video: codec switches, an undecodable codec, a rate change and garbage frames', async () => {
    const video = clip.units.filter((u) => u.kind === 'video');
    const open = await gw.openStream({ simNo: '13900000012', chanId: 1 });
    const stream = gw.bus.get(open.streamName)!;
    const got: AccessUnit[] = [];
    const tracks: Array<ReadonlyArray<TrackInfo>> = [];
    stream.subscribe({ write: (u) => got.push(u), tracks: (t) => tracks.push(t) }, { via: 'aac' });
    const pub = stream.attachPublisher();
    pub.setTrack(clip.video);
    let seed = 7;
    const junk = (n: number) => Buffer.from(Array.from({ length: n }, () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24));
    // four audio phases over the clip's video: G.711A, garbage G.726 at 2 bits, G.729 (no decoder), G.711u at 16 kHz
    const phases: Array<{ track: TrackInfo; frame: (i: number) => Buffer; rate: number }> = [
      { track: { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 }, frame: () => Buffer.alloc(320, 0xd5), rate: 8000 },
      { track: { kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 2, packing: 'left' }, frame: () => junk(80), rate: 8000 },
      { track: { kind: 'audio', codec: 'g729', sampleRate: 8000, channels: 1 }, frame: () => junk(40), rate: 8000 },
      { track: { kind: 'audio', codec: 'g711u', sampleRate: 16000, channels: 1 }, frame: () => junk(640), rate: 16000 },
    ];
    const per = Math.ceil(video.length / phases.length);
    for (let i = 0; i < video.length; i++) {
      const ph = phases[Math.floor(i / per)]!;
      if (i % per === 0) pub.setTrack(ph.track);
      pub.push(video[i]!);
      pub.push(audioUnit({ codec: ph.track.codec, dts: video[i]!.dts, timescale: ph.rate, duration: ph.rate / 25, payload: ph.frame(i) }));
    }
    await until('the last video unit', () => got.filter((u) => u.kind === 'video').length === video.length);
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      got.filter((u) => u.kind === 'video'),
      video,
      'every video unit, in order, by reference',
    );
    const aacCodecs = tracks
      .map((t) => t.find((x) => x.kind === 'audio'))
      .filter((a) => a !== undefined)
      .map((a) => `${a!.codec}@${(a as { sampleRate: number }).sampleRate}`);
    assert.ok(
      aacCodecs.every((c) => c === 'aac@8000'),
      `the output audio track is always AAC at the reader's rate (${aacCodecs.join(' ')})`,
    );
    const aac = got.filter((u) => u.kind === 'audio');
    assert.ok(aac.length > 5, `AAC frames came out (${aac.length})`);
    // the last phase (garbage mu-law at 16 kHz, decodable) produced AAC again after the G.729 gap: its first frame
    // is the new encoder's lead-in, one frame (128 ms) before the phase's first sample
    const lastPhase = video[3 * per]!.dts;
    assert.ok(
      aac.some((u) => u.dts >= lastPhase - 128.5),
      `AAC goes on after the undecodable phase (last at ${aac[aac.length - 1]!.dts} ms, phase from ${lastPhase})`,
    );
    const metrics = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(metrics, /^gw_audio_aac_failures_total 0$/m, 'no worker call failed');
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });

  it('one instance per (stream, params) for all readers; it stops, and its transcoder goes, with the last reader', async () => {
    const open = await gw.openStream({ simNo: '13900000011', chanId: 1 });
    const stream = gw.bus.get(open.streamName)!;
    const a = stream.subscribe({ write: () => undefined }, { via: 'aac' });
    const b = stream.subscribe({ write: () => undefined }, { via: { stage: 'aac', params: { sampleRate: 8000, channels: 1 } } });
    const pub = gw.publish(open.streamName, clip, { realtime: false });
    await pub.done;
    assert.equal(gw.bus.list().filter((s) => s.derivedFrom?.stream === open.streamName).length, 1, 'the defaults and the same values explicitly are one form');
    let metrics = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(metrics, /^gw_audio_aac_transcoders 1$/m);
    a.close();
    b.close();
    metrics = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(metrics, /^gw_audio_aac_transcoders 0$/m);
    assert.throws(() => stream.subscribe({ write: () => undefined }, { via: { stage: 'aac', params: { sampleRate: 12345 } } }), /sampleRate must be one of/);
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
  });
});

describe('audio-aac: the stage across a worker restart', function () {
  this.timeout(60_000);

  it('an open in flight when the worker dies is made again on the new worker: the stream is not left mute', async () => {
    const path = await import('node:path');
    const { definePlugin } = await import('../../../plugin-sdk');
    const { StageWorker } = await import('../../../plugin-sdk/worker');
    const { aacStage } = await import('../src/aac-stage');
    const pino = (await import('pino')).default;
    const real = new StageWorker<import('../src/transcode-protocol').TranscodeRequest, import('../src/transcode-protocol').TranscodeReply>(
      path.join(__dirname, '..', 'src', 'transcode-worker.js'),
      { name: 'aac', log: pino({ level: 'silent' }), workerData: { coder: 'fast' } },
    );
    let opens = 0;
    // the first open meets a worker death, as when the supervisor restarts a crashed worker under it
    const flaky = {
      call: (req: import('../src/transcode-protocol').TranscodeRequest) => {
        if (req.op === 'open' && ++opens === 1) return Promise.reject(new Error('worker aac died (exit code 1)'));
        return real.call(req);
      },
    } as unknown as typeof real;
    const plugin = definePlugin({
      name: 'aac-flaky',
      setup(ctx) {
        ctx.bus.registerStage(
          aacStage({
            worker: flaky,
            defaults: { sampleRate: 8000, channels: 1 },
            bitrate: () => 24_000,
            maxGapMs: 2000,
            maxInFlight: 32,
            log: ctx.log,
            hooks: { transcoders: () => undefined, framesOut: () => undefined, failed: () => undefined, leftOut: () => undefined },
          }),
        );
        return { stop: () => real.close() };
      },
    });
    const stub = stubMediaPlugin();
    const gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'aac-flaky', def: plugin as PluginDefinition<object> },
      ],
    });
    try {
      const clip = testClip({ seconds: 2, audio: true });
      const open = await gw.openStream({ simNo: '13900000020', chanId: 1 });
      const stream = gw.bus.get(open.streamName)!;
      const aac: AccessUnit[] = [];
      stream.subscribe(
        {
          write: (u) => {
            if (u.kind === 'audio') aac.push(u);
          },
        },
        { via: 'aac' },
      );
      // in real time, as a terminal sends: frames pushed before the reopen are lost, the rest are encoded
      await gw.publish(open.streamName, clip, { realtime: true }).done;
      await until('AAC frames after the reopen', () => aac.length >= 5);
      assert.equal(opens, 2, 'opened again once');
      assert.ok(aac.every((u) => u.codec === 'aac'));
    } finally {
      await gw.stop();
    }
  });
});
