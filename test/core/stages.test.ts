import assert from 'node:assert/strict';
import * as path from 'node:path';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import type { AccessUnit } from '../../plugin-sdk/media';
import { audioUnit, videoUnit, withPayload } from '../../plugin-sdk/media';
import { audioStage } from '../../plugin-sdk/stages';
import { filterStage } from '../../plugin-sdk/filter-stage';
import { StageWorker } from '../../plugin-sdk/worker';
import { alawToS16 } from '../support/audio';
import type { TranscodeRequest } from './fixtures/g711-transcode-worker';

const KB = 1024;
const quiet = pino({ level: 'silent' });
const WORKER = path.join(__dirname, 'fixtures', 'g711-transcode-worker.js');
const tick = () => new Promise<void>((r) => setImmediate(r));

function newBus(limits: Partial<ConstructorParameters<typeof CoreMediaBus>[0]> = {}): CoreMediaBus {
  return new CoreMediaBus({ maxGopBytes: 512 * KB, maxQueueBytes: 200 * KB, maxStreamBytes: 1024 * KB, readerDropAfterMs: 30_000, ...limits }, quiet, Date.now);
}

const alaw = (dts: number, frame: Buffer) => audioUnit({ codec: 'g711a', dts, timescale: 8000, duration: frame.length, payload: frame });
/** A-law bytes as 16-bit little-endian PCM by the reference expansion (what the worker answers) */
const s16le = (codes: Buffer): Buffer => {
  const out = Buffer.alloc(codes.length * 2);
  codes.forEach((c, i) => out.writeInt16LE(alawToS16(c), 2 * i));
  return out;
};
const video = (dts: number, key: boolean) => videoUnit({ codec: 'h264', dts, keyframe: key, payload: Buffer.alloc(200) });

async function until(what: string, fn: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('stages: audioStage and StageWorker', function () {
  this.timeout(30_000);

  // that the worker's PCM is what ffmpeg decodes, byte for byte, is checked in stages-ffmpeg.test.ts (full tier)
  it("decodes audio in a worker thread, passes video by reference at once, keeps each track's order", async () => {
    const worker = new StageWorker<TranscodeRequest, Uint8Array>(WORKER, { name: 'g711', log: quiet });
    const bus = newBus();
    bus.registerStage(
      audioStage({
        name: 'g711-pcm',
        create: () => ({
          track: (t) => (t.codec === 'g711a' ? { ...t, codec: 'pcm', bitsPerSample: 16 } : undefined),
          unit: async (u) => [withPayload(u, Buffer.from(await worker.call({ frame: u.payload })), { codec: 'pcm' })],
        }),
      }),
      'test',
      quiet,
    );
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264' });
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const got: AccessUnit[] = [];
    const tracks: string[] = [];
    src.subscribe({ write: (u) => got.push(u), tracks: (ts) => tracks.push(ts.map((t) => t.codec).join('+')) }, { via: 'g711-pcm' });
    await tick();

    // every A-law code word, in 320-byte frames, between keyframes and P frames
    const all = Buffer.alloc(256 * 5);
    for (let i = 0; i < all.length; i++) all[i] = i & 0xff;
    const sent: AccessUnit[] = [];
    for (let i = 0; i < 4; i++) {
      const v = video(i * 40, i === 0);
      sent.push(v);
      pub.push(v);
      const a = alaw(i * 40 + 5, all.subarray(i * 320, (i + 1) * 320));
      sent.push(a);
      pub.push(a);
    }
    await until('all units through the stage', () => got.length === sent.length);
    assert.equal(tracks[tracks.length - 1], 'h264+pcm', 'the audio track as the stage made it');
    const order = (list: AccessUnit[], kind: string) => list.filter((u) => u.kind === kind).map((u) => u.dts);
    assert.deepEqual(order(got, 'audio'), order(sent, 'audio'), 'audio in the input order');
    assert.deepEqual(
      got.filter((u) => u.kind === 'video'),
      sent.filter((u) => u.kind === 'video'),
      'video by reference, in order',
    );
    // all of it was pushed in one turn, before the worker answered anything: video did not wait for audio in flight
    assert.deepEqual(
      got.slice(0, 4).map((u) => u.kind),
      ['video', 'video', 'video', 'video'],
    );

    const mine = Buffer.concat(got.filter((u) => u.kind === 'audio').map((u) => u.payload));
    assert.ok(got.filter((u) => u.kind === 'audio').every((u) => u.codec === 'pcm' && u.timescale === 8000 && u.duration === 320));
    assert.equal(mine.length, 2560);
    assert.deepEqual(mine, s16le(all.subarray(0, 1280)), "each frame's PCM from the worker, in order");
    await worker.close();
  });

  it('a reader joining a running stream through a new stage finds both tracks before its first unit, the GOP passed, the audio track made once', async () => {
    const bus = newBus();
    let tracksMade = 0;
    bus.registerStage(
      audioStage({
        name: 'pcm-ish',
        create: () => ({
          track: (t) => {
            tracksMade++;
            return { ...t, codec: 'pcm', bitsPerSample: 16 };
          },
          unit: async (u) => [withPayload(u, Buffer.from(u.payload), { codec: 'pcm' })],
          holdsPayloads: () => false,
        }),
      }),
      'test',
      quiet,
    );
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264' });
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const sent: AccessUnit[] = [];
    for (let i = 0; i < 6; i++) {
      sent.push(video(i * 40, i === 2));
      pub.push(sent[sent.length - 1]);
      pub.push(alaw(i * 40, Buffer.alloc(320, i)));
    }
    const seen: string[] = [];
    const got: AccessUnit[] = [];
    // what an FLV player does: the tracks known when its start point comes are the ones its file header announces
    src.subscribe(
      {
        tracks: (ts) => seen.push(ts.map((t) => t.codec).join('+')),
        write: (u) => {
          if (got.length === 0) seen.push(`first ${u.kind}`);
          got.push(u);
        },
      },
      { via: 'pcm-ish' },
    );
    await until('the GOP through the stage', () => got.filter((u) => u.kind === 'audio').length >= 4);
    assert.deepEqual(seen.slice(0, 2), ['h264+pcm', 'first video'], 'both tracks, video first, before the first unit');
    assert.deepEqual(
      got.filter((u) => u.kind === 'video'),
      sent.slice(2),
      "the GOP's video, the same objects",
    );
    // a change of the video track repeats the audio one in the list: the transform is not restarted for it
    pub.setTrack({ kind: 'video', codec: 'h264', width: 640, height: 480 });
    await tick();
    assert.equal(tracksMade, 1);
    pub.setTrack({ kind: 'audio', codec: 'g711u', sampleRate: 8000, channels: 1 });
    await tick();
    assert.equal(tracksMade, 2, 'a new audio track is');
  });

  it('holds the input while maxInFlight frames are out, then catches up; the source never waits', async () => {
    const bus = newBus();
    const resolvers: Array<() => void> = [];
    bus.registerStage(
      audioStage({
        name: 'held',
        maxInFlight: 2,
        create: () => ({
          track: (t) => t,
          unit: (u) => new Promise<readonly AccessUnit[]>((resolve) => resolvers.push(() => resolve([u]))),
        }),
      }),
      'test',
      quiet,
    );
    const src = bus.create('src', 'test', { expectVideo: false });
    const pub = src.attachPublisher();
    const got: number[] = [];
    src.subscribe({ write: (u) => got.push(u.dts) }, { via: 'held' });
    await tick();
    for (let i = 0; i < 6; i++) pub.push(alaw(i * 40, Buffer.alloc(320)));
    assert.equal(resolvers.length, 2, 'two frames handed to the transform, the rest wait in the bus for the stage');
    assert.equal(src.stats().queuedBytes, 4 * 320);
    while (resolvers.length) {
      resolvers.shift()!();
      await tick();
    }
    assert.deepEqual(got, [0, 40, 80, 120, 160, 200]);
  });

  it('the supervisor restarts a worker that dies or hangs; calls in flight reject with the reason', async () => {
    const log = pino({ level: 'silent' });
    const w = new StageWorker<TranscodeRequest, Uint8Array>(WORKER, { name: 'g711', log, hangMs: 300 });
    // A-law 0xd5 is +8 in linear PCM (the first test checks every code word against ffmpeg)
    assert.deepEqual([...(await w.call({ frame: new Uint8Array([0xd5]) }))], [8, 0]);
    await assert.rejects(w.call({ frame: new Uint8Array(1), test: 'exit' }), /worker g711 died \(exit code 3\)/);
    assert.deepEqual([...(await w.call({ frame: new Uint8Array([0xd5]) }))], [8, 0], 'a new worker answers');
    await assert.rejects(w.call({ frame: new Uint8Array(1), test: 'hang' }), /died \(no answer for 300 ms\)/);
    assert.equal((await w.call({ frame: new Uint8Array([0x55]) })).length, 2);
    assert.equal(w.deaths, 2);
    // a turn's calls cross as one message, and come back in order
    const before = w.batches;
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => w.call({ frame: new Uint8Array([i]) })));
    assert.equal(w.batches - before, 1);
    assert.deepEqual(
      many.map((r) => r.length),
      Array(20).fill(2),
    );
    // and one turn's calls wait for an earlier turn's call that awaits (an encoder being opened, say)
    const order: string[] = [];
    const slow = w.call({ frame: new Uint8Array(1), test: 'slow' }).then(() => order.push('slow'));
    await new Promise((r) => setImmediate(r));
    const next = w.call({ frame: new Uint8Array(1) }).then(() => order.push('next'));
    await Promise.all([slow, next]);
    assert.deepEqual(order, ['slow', 'next']);
    assert.equal(w.inFlight, 0);
    // behind is not hung: ten slow calls in ten turns wait up to ~1 s in all, past hangMs, while answers keep coming
    const deaths = w.deaths;
    const behind: Array<Promise<Uint8Array>> = [];
    for (let i = 0; i < 10; i++) {
      behind.push(w.call({ frame: new Uint8Array(1), test: 'slow' }));
      await new Promise((r) => setImmediate(r));
    }
    assert.equal((await Promise.all(behind)).length, 10);
    assert.equal(w.deaths, deaths, 'a worker that answers is not restarted');
    await w.close();
    await assert.rejects(w.call({ frame: new Uint8Array(1) }), /is closed/);
  });

  it('a stage whose input reader is ended as stuck closes its stream, ending its readers with the reason', async () => {
    const bus = newBus({ maxQueueBytes: 4 * KB });
    bus.registerStage(
      audioStage({
        name: 'never',
        create: () => ({ track: (t) => t, unit: () => new Promise<readonly AccessUnit[]>(() => undefined) }),
        maxInFlight: 1,
      }),
      'test',
      quiet,
    );
    const src = bus.create('src', 'test', { expectVideo: false });
    const pub = src.attachPublisher();
    let ended = '';
    src.subscribe(
      {
        write: () => undefined,
        end: (r) => {
          ended = r;
        },
      },
      { via: 'never' },
    );
    await tick();
    for (let i = 0; i < 200 && !ended; i++) pub.push(alaw(i * 40, Buffer.alloc(320)));
    assert.match(ended, /^stage never failed: reader stuck/);
    assert.equal(src.stats().subscribers, 0, 'the stage let go of its input');
  });
});

describe('stages: filterStage and chains of stages', function () {
  this.timeout(30_000);

  /** a byte pattern per unit number, so a payload overwritten by a later frame shows */
  const fill = (b: Buffer, n: number): Buffer => {
    for (let i = 0; i < b.length; i++) b[i] = (n * 31 + i * 7) & 0xff;
    return b;
  };
  const intact = (u: AccessUnit, n: number): boolean => {
    for (let i = 0; i < u.payload.length; i++) if (u.payload[i] !== ((n * 31 + i * 7) & 0xff)) return false;
    return true;
  };
  const keyframesOnly = filterStage({ name: 'keys', create: () => (u) => u.keyframe });

  it("keeps the units its predicate keeps, by reference, passes the other track, and the input's payload memory is reused", async () => {
    const bus = newBus({ maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB });
    bus.registerStage(keyframesOnly, 'test', quiet);
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264' });
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    // a reader of the stage's stream whose socket holds what it got until told
    let holding = true;
    const got: Array<{ u: AccessUnit; n: number; ok: boolean }> = [];
    const numbers = new Map<AccessUnit, number>();
    const tracks: string[] = [];
    const write = (u: AccessUnit): void => {
      const n = numbers.get(u) ?? -1;
      got.push({ u, n, ok: intact(u, n) });
    };
    src.subscribe({ write, tracks: (t) => tracks.push(t.map((x) => x.codec).join('+')), holdsPayloads: () => holding }, { via: 'keys' });
    await tick();
    await tick();
    const pushed: AccessUnit[] = [];
    let n = 0;
    const push = (count: number): void => {
      for (const end = n + count; n < end; n++) {
        const v = videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % 10 === 0, payload: fill(pub.alloc(10 * KB), n) });
        numbers.set(v, n);
        pushed.push(v);
        pub.push(v);
        const a = alaw(n * 40 + 1, fill(pub.alloc(320), n));
        numbers.set(a, n);
        pub.push(a);
      }
    };
    push(40);
    assert.equal(tracks[0], 'h264+g711a');
    const video = got.filter((g) => g.u.kind === 'video');
    assert.deepEqual(
      video.map((g) => g.n),
      [0, 10, 20, 30],
      'key frames only',
    );
    assert.ok(
      video.every((g) => g.u === pushed[g.n]),
      'the same unit objects the publisher pushed',
    );
    assert.equal(got.filter((g) => g.u.kind === 'audio').length, 40, 'audio passes');
    assert.equal(bus.chunks.counts.reused, 0, 'nothing reused while the reader holds what it got');
    for (const g of got) assert.ok(intact(g.u, g.n), `held unit ${g.n} (${g.u.kind}) still as pushed`);
    holding = false;
    push(160);
    assert.ok(bus.chunks.counts.reused > 0, "the input's chunks come back once the reader lets go");
    for (const g of got) assert.ok(g.ok, `unit ${g.n} (${g.u.kind}) as pushed when it was written`);
    // a reader joining the stage's stream now gets its cached key frame intact
    const late: Array<{ u: AccessUnit; n: number }> = [];
    src.subscribe({ write: (u) => late.push({ u, n: numbers.get(u) ?? u.dts / 40 }), holdsPayloads: () => true }, { via: 'keys', media: 'v' });
    await tick();
    assert.deepEqual(
      late.map((g) => g.n),
      [190],
    );
    assert.ok(intact(late[0].u, 190));
    src.close('test over');
  });

  it("a stage started on a running stream gets the GOP cached at the input by reference, on the input's numbering", async () => {
    const bus = newBus({ maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB });
    bus.registerStage(keyframesOnly, 'test', quiet);
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    src.subscribe({ write: () => undefined, holdsPayloads: () => false });
    await tick();
    const pushed: AccessUnit[] = [];
    for (let n = 0; n < 25; n++) pushed.push(videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % 10 === 0, payload: fill(pub.alloc(10 * KB), n) }));
    for (const u of pushed) pub.push(u);
    const got: AccessUnit[] = [];
    src.subscribe({ write: (u) => got.push(u), holdsPayloads: () => true }, { via: 'keys' });
    await tick();
    await new Promise((r) => setImmediate(r));
    assert.equal(got.length, 1);
    assert.equal(got[0].payload.buffer, pushed[20].payload.buffer, "the cached key frame's own memory, not a copy");
    assert.equal(got[0].payload.byteOffset, pushed[20].payload.byteOffset);
    assert.ok(intact(got[0], 20));
    src.close('test over');
  });

  it("on a stream of video only, the input's payload memory is reused while the stage runs, and no kept frame is overwritten", async () => {
    const bus = newBus({ maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB });
    bus.registerStage(keyframesOnly, 'test', quiet);
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264' });
    const got: Array<{ u: AccessUnit; n: number; ok: boolean }> = [];
    const numbers = new Map<AccessUnit, number>();
    let holding = true;
    src.subscribe(
      {
        write: (u) => {
          const n = numbers.get(u) ?? -1;
          got.push({ u, n, ok: intact(u, n) });
        },
        holdsPayloads: () => holding,
      },
      { via: 'keys' },
    );
    await tick();
    await tick();
    const push = (from: number, to: number): void => {
      for (let n = from; n < to; n++) {
        const v = videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % 10 === 0, payload: fill(pub.alloc(10 * KB), n) });
        numbers.set(v, n);
        pub.push(v);
      }
    };
    push(0, 40);
    assert.equal(bus.chunks.counts.reused, 0, 'nothing reused while the reader holds the key frames it got');
    for (const g of got) assert.ok(intact(g.u, g.n), `key frame ${g.n} still as pushed`);
    holding = false;
    push(40, 200);
    assert.ok(bus.chunks.counts.reused > 0, "the input's chunks come back: the stage holds nothing of its own");
    assert.deepEqual(
      got.map((g) => g.n),
      Array.from({ length: 20 }, (_x, i) => i * 10),
    );
    for (const g of got) assert.ok(g.ok, `key frame ${g.n} as pushed when it was written`);
    src.close('test over');
  });

  it('a predicate that throws drops the unit and is logged, the stream goes on', async () => {
    const bus = newBus();
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    bus.registerStage(
      filterStage({
        name: 'odd',
        create: () => (u) => {
          if (u.dts === 40) throw new Error('boom');
          return true;
        },
      }),
      'test',
      log,
    );
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    const got: number[] = [];
    src.subscribe({ write: (u) => got.push(u.dts) }, { via: 'odd' });
    await tick();
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 3; i++) pub.push(video(i * 40, i === 0));
    assert.deepEqual(got, [0, 80]);
    assert.equal(lines.length, 1);
    assert.match(lines[0], /"err":"boom".*filter stage predicate threw: unit dropped/);
  });

  it('a chain of stages: each link reads the one before, shared by readers of the same chain, closed with its last reader', async () => {
    const bus = newBus();
    bus.registerStage(keyframesOnly, 'test', quiet);
    bus.registerStage(
      filterStage<{ after: number }>({
        name: 'after',
        params: (p) => ({ after: Number(p.after ?? 0) }),
        create:
          ({ params }) =>
          (u) =>
            u.dts >= params.after,
      }),
      'test',
      quiet,
    );
    const src = bus.create('src', 'test');
    const pub = src.attachPublisher();
    const a: number[] = [];
    const b: number[] = [];
    const chain = ['keys', { stage: 'after', params: { after: 100 } }] as const;
    const s1 = src.subscribe({ write: (u) => a.push(u.dts) }, { via: chain });
    const s2 = src.subscribe({ write: (u) => b.push(u.dts) }, { via: chain });
    const last = bus.list().find((s) => s.derivedFrom?.stage === 'after')!;
    assert.equal(last.derivedFrom!.stream, 'src~keys', 'the second link reads the first');
    assert.deepEqual(
      bus
        .list()
        .map((s) => s.name)
        .sort(),
      ['src', 'src~keys', last.name],
    );
    await tick();
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 12; i++) pub.push(video(i * 40, i % 3 === 0));
    assert.deepEqual(a, [120, 240, 360], 'key frames from 100 ms on');
    assert.deepEqual(b, a);
    s1.close();
    assert.equal(bus.list().length, 3, 'still read');
    s2.close();
    assert.deepEqual(
      bus.list().map((s) => s.name),
      ['src'],
      'both links closed with the last reader',
    );

    // a link that fails closes the links before it
    assert.throws(() => src.subscribe({ write: () => undefined }, { via: ['keys', 'nope'] }), /no stage 'nope'/);
    assert.deepEqual(
      bus.list().map((s) => s.name),
      ['src'],
    );
    assert.throws(() => src.subscribe({ write: () => undefined }, { via: [] }), /an empty chain/);
  });
});
