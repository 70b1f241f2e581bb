import { strict as assert } from 'node:assert';
import { createFlvFormats, type FlvFrame } from '../src/flv-format';
import { unitAt, type AccessUnit, type AudioCodec, type AudioTrackInfo } from '../../../plugin-sdk';
import pino from 'pino';
import { CoreMediaBus } from '../../../test/support/core-parts';
import { flvFormatOf } from '../../../plugin-sdk/formats';
import { fixtureClip } from '../../../test/support/fixture-clip';

/** The FLV encoder's audio decisions, unit by unit: what it carries, what it leaves out, what it counts and reports. */
describe('flv-out FLV form: audio it leaves out', () => {
  const count = () => ({
    n: 0,
    inc() {
      this.n++;
    },
  });

  function encoder(audioCodecs: AudioCodec[]) {
    const skipped = count();
    const started: string[] = [];
    const formats = createFlvFormats({
      audioCodecs,
      tags: { video: count(), audio: count(), script: count() },
      audioSkipped: skipped,
      audioSkipStarted: (stream, codec) => started.push(`${stream}:${codec}`),
      encoders: () => undefined,
    });
    const enc = formats.av.createEncoder({ name: 's1', tracks: [], wallClock: () => undefined });
    return { enc, skipped, started };
  }

  let dts = 0;
  const audio = (codec: AudioCodec, bytes = 160): AccessUnit =>
    unitAt({ kind: 'audio', codec, timescale: 1000, dtsTicks: (dts += 20), keyframe: true, payload: Buffer.alloc(bytes, 0xd5) });
  const track = (codec: AudioCodec, sampleRate: number): AudioTrackInfo => ({ kind: 'audio', codec, sampleRate, channels: 1 });
  /** the FLV audio tags' first body byte (SoundFormat << 4 | flags) of a form, or undefined when left out */
  const soundByte = (f: FlvFrame | undefined): number | undefined => {
    if (f === undefined) return undefined;
    const parts: Buffer[] = [];
    f.pieces((b) => parts.push(b));
    const wire = Buffer.concat(parts);
    // the last tag is the unit's own (config tags come first): 11-byte header, then its body
    let at = 0;
    let last = -1;
    while (at + 11 <= wire.length) {
      last = at;
      at += 11 + wire.readUIntBE(at + 1, 3) + 4;
    }
    return wire[last] === 8 ? wire[last + 11] : undefined;
  };

  it('counts every unit of a codec it does not carry and reports the codec once', () => {
    const { enc, skipped, started } = encoder(['aac']);
    for (let i = 0; i < 50; i++) assert.equal(enc.encode(audio('g711a')), undefined);
    assert.equal(skipped.n, 50);
    assert.deepEqual(started, ['s1:g711a']);
    // another codec it does not carry is reported too, and the first one again only once
    for (let i = 0; i < 5; i++) enc.encode(audio('g711u'));
    for (let i = 0; i < 5; i++) enc.encode(audio('g711a'));
    assert.equal(skipped.n, 60);
    assert.deepEqual(started, ['s1:g711a', 's1:g711u']);
    // an empty unit has nothing to leave out: not counted
    enc.encode(audio('g711a', 0));
    assert.equal(skipped.n, 60);
  });

  it('carries a codec again once a new track makes it carriable (G.711 at 16 kHz, then 8 kHz)', () => {
    const { enc, skipped } = encoder(['aac', 'g711a']);
    enc.tracks!([track('g711a', 16000)]);
    for (let i = 0; i < 3; i++) assert.equal(enc.encode(audio('g711a')), undefined, 'FLV has no 16 kHz G.711');
    assert.equal(skipped.n, 3);
    enc.tracks!([track('g711a', 8000)]);
    const f = enc.encode(audio('g711a'));
    assert.equal(soundByte(f)! >> 4, 7, 'an FLV G.711 A-law tag');
    assert.equal(skipped.n, 3);
  });

  it('skips AAC only until it has a config: the first ADTS frame brings one and is carried', () => {
    const { enc, skipped } = encoder(['aac']);
    assert.equal(enc.encode(audio('aac', 20)), undefined, 'raw AAC without a config cannot be announced');
    assert.equal(enc.encode(audio('aac', 20)), undefined);
    assert.equal(skipped.n, 2);
    // ADTS: AAC-LC, 8 kHz (index 11), mono, one 27-byte frame
    const adts = Buffer.alloc(27, 0x21);
    adts.set([0xff, 0xf1, (1 << 6) | (11 << 2), (1 << 6) | (27 >> 11), (27 >> 3) & 0xff, ((27 & 7) << 5) | 0x1f, 0xfc]);
    const f = enc.encode(unitAt({ kind: 'audio', codec: 'aac', timescale: 8000, dtsTicks: 1024 * 10, keyframe: true, payload: adts }));
    assert.equal(soundByte(f), 0xaf, 'an FLV AAC tag');
    assert.equal(skipped.n, 2);
  });
});

/** flv-out's formats and the recorder's ask for one encoder per stream when their bytes are the same. */
describe("flv-out FLV form: shared with the gateway's other FLV readers", () => {
  const count = () => ({
    n: 0,
    inc() {
      this.n++;
    },
  });
  const newBus = (): CoreMediaBus =>
    new CoreMediaBus({ maxGopBytes: 4 << 20, maxQueueBytes: 2 << 20, maxStreamBytes: 8 << 20, readerDropAfterMs: 60_000 }, pino({ level: 'silent' }), () => 0);

  function hooks(audioCodecs: AudioCodec[]) {
    const encoders = { n: 0 };
    return {
      encoders,
      hooks: {
        audioCodecs,
        tags: { video: count(), audio: count(), script: count() },
        audioSkipped: count(),
        audioSkipStarted: () => undefined,
        encoders: (d: 1 | -1) => {
          encoders.n += d;
        },
      },
    };
  }

  it("a reader asking for flv-out's options gets flv-out's format: one encoder, one form per unit for both", async () => {
    const bus = newBus();
    const h = hooks(['aac', 'g711a', 'g711u']);
    const formats = createFlvFormats(h.hooks, bus);
    assert.equal(flvFormatOf(bus, { audioCodecs: ['g711u', 'aac', 'g711a'] }), formats.av, 'the same codecs in any order');
    assert.equal(flvFormatOf(bus, { audioCodecs: ['aac', 'g711a', 'g711u'], only: 'video' }), formats.v);
    const other = flvFormatOf(bus, { audioCodecs: ['aac'] });
    assert.notEqual(other, formats.av, 'other bytes: a format of its own');
    assert.equal(flvFormatOf(bus, { audioCodecs: ['aac'] }), other, 'made once per bus');
    assert.notEqual(flvFormatOf(newBus(), { audioCodecs: ['aac', 'g711a', 'g711u'] }), formats.av, "another gateway's bus: its own");

    const clip = fixtureClip({ seconds: 1 });
    const stream = bus.create('s1', 'test');
    const pub = stream.attachPublisher();
    pub.setTrack(clip.video);
    const player: unknown[] = [];
    const recording: unknown[] = [];
    stream.subscribe(
      {
        write: (_u, f) => {
          player.push(f);
        },
      },
      { format: formats.av },
    );
    stream.subscribe(
      {
        write: (_u, f) => {
          recording.push(f);
        },
      },
      { format: flvFormatOf(bus, { audioCodecs: ['aac', 'g711a', 'g711u'] }) },
    );
    await new Promise<void>((r) => setImmediate(r));
    for (const u of clip.units) pub.push(u);
    await new Promise<void>((r) => setImmediate(r));
    assert.equal(h.encoders.n, 1, 'one encoder for the stream');
    assert.equal(player.length, clip.units.length);
    assert.ok(
      player.every((f, i) => f !== undefined && f === recording[i]),
      'the very same forms',
    );
    stream.close('test over');
  });
});
