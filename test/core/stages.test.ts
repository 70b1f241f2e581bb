import assert from 'node:assert/strict';
import * as path from 'node:path';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import type { AccessUnit } from '../../plugin-sdk/media';
import { audioUnit, videoUnit, withPayload } from '../../plugin-sdk/media';
import { audioStage } from '../../plugin-sdk/stages';
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
  it('decodes audio in a worker thread, passes video by reference at once, keeps each track\'s order', async () => {
    const worker = new StageWorker<TranscodeRequest, Uint8Array>(WORKER, { name: 'g711', log: quiet });
    const bus = newBus();
    bus.registerStage(audioStage({
      name: 'g711-pcm',
      create: () => ({
        track: (t) => (t.codec === 'g711a' ? { ...t, codec: 'pcm', bitsPerSample: 16 } : undefined),
        unit: async (u) => [withPayload(u, Buffer.from(await worker.call({ frame: u.payload })), { codec: 'pcm' })],
      }),
    }), 'test', quiet);
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
    assert.deepEqual(got.filter((u) => u.kind === 'video'), sent.filter((u) => u.kind === 'video'), 'video by reference, in order');
    // all of it was pushed in one turn, before the worker answered anything: video did not wait for audio in flight
    assert.deepEqual(got.slice(0, 4).map((u) => u.kind), ['video', 'video', 'video', 'video']);

    const mine = Buffer.concat(got.filter((u) => u.kind === 'audio').map((u) => u.payload));
    assert.ok(got.filter((u) => u.kind === 'audio').every((u) => u.codec === 'pcm' && u.timescale === 8000 && u.duration === 320));
    assert.equal(mine.length, 2560);
    assert.deepEqual(mine, s16le(all.subarray(0, 1280)), 'each frame\'s PCM from the worker, in order');
    await worker.close();
  });

  it('a reader joining a running stream through a new stage finds both tracks before its first unit, the GOP passed, the audio track made once', async () => {
    const bus = newBus();
    let tracksMade = 0;
    bus.registerStage(audioStage({
      name: 'pcm-ish',
      create: () => ({
        track: (t) => { tracksMade++; return { ...t, codec: 'pcm', bitsPerSample: 16 }; },
        unit: async (u) => [withPayload(u, Buffer.from(u.payload), { codec: 'pcm' })],
        holdsPayloads: () => false,
      }),
    }), 'test', quiet);
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
    src.subscribe({ tracks: (ts) => seen.push(ts.map((t) => t.codec).join('+')), write: (u) => { if (got.length === 0) seen.push(`first ${u.kind}`); got.push(u); } }, { via: 'pcm-ish' });
    await until('the GOP through the stage', () => got.filter((u) => u.kind === 'audio').length >= 4);
    assert.deepEqual(seen.slice(0, 2), ['h264+pcm', 'first video'], 'both tracks, video first, before the first unit');
    assert.deepEqual(got.filter((u) => u.kind === 'video'), sent.slice(2), 'the GOP\'s video, the same objects');
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
    bus.registerStage(audioStage({
      name: 'held',
      maxInFlight: 2,
      create: () => ({
        track: (t) => t,
        unit: (u) => new Promise<readonly AccessUnit[]>((resolve) => resolvers.push(() => resolve([u]))),
      }),
    }), 'test', quiet);
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
    assert.deepEqual(many.map((r) => r.length), Array(20).fill(2));
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
    bus.registerStage(audioStage({
      name: 'never',
      create: () => ({ track: (t) => t, unit: () => new Promise<readonly AccessUnit[]>(() => undefined) }),
      maxInFlight: 1,
    }), 'test', quiet);
    const src = bus.create('src', 'test', { expectVideo: false });
    const pub = src.attachPublisher();
    let ended = '';
    src.subscribe({ write: () => undefined, end: (r) => { ended = r; } }, { via: 'never' });
    await tick();
    for (let i = 0; i < 200 && !ended; i++) pub.push(alaw(i * 40, Buffer.alloc(320)));
    assert.match(ended, /^stage never failed: reader stuck/);
    assert.equal(src.stats().subscribers, 0, 'the stage let go of its input');
  });
});
