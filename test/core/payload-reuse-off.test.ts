/**
 * A reader whose sink has no MediaReader.holdsPayloads is taken to hold everything it gets, which turns payload memory
 * reuse off for its stream (core/bus/payload-reuse.ts). The bus says which reader did: a log line once per stream,
 * and a count of such streams by reader for /metrics (CoreMediaBus.reuseOffByReader).
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import { nameFromFiles } from '../../core/bus/reader-name';
import type { MediaReader, Publisher, StageDefinition } from '../../plugin-sdk/bus';
import { audioUnit, videoUnit } from '../../plugin-sdk/media';

const KB = 1024;
const tick = () => new Promise<void>((r) => setImmediate(r));

interface LogLine {
  level: number;
  msg: string;
  stream?: string;
  reader?: string;
}

function newBus(reusePayloads = true): { bus: CoreMediaBus; lines: LogLine[]; offLines: () => LogLine[] } {
  const lines: LogLine[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => lines.push(JSON.parse(s) as LogLine) });
  const limits = { maxGopBytes: 4096 * KB, maxQueueBytes: 2048 * KB, maxStreamBytes: 8192 * KB, readerDropAfterMs: 60_000, reusePayloads };
  const bus = new CoreMediaBus(limits, log, () => 0);
  return { bus, lines, offLines: () => lines.filter((l) => /not reused/.test(l.msg)) };
}

function push(pub: Publisher, n: number, alloc = true): void {
  const payload = alloc ? pub.alloc(4 * KB).fill(n) : Buffer.alloc(4 * KB, n);
  pub.push(videoUnit({ codec: 'h264', dts: n * 40, keyframe: n % 10 === 0, payload }));
}

/** holds nothing once written, and says so */
const answering = (): MediaReader => ({ write: () => undefined, holdsPayloads: () => false });
/** cannot say when it is done */
const keeping = (): MediaReader => ({ write: () => undefined });

const asObject = (m: Map<string, number>): Record<string, number> => Object.fromEntries(m);

describe('payload reuse off: which reader turned it off', () => {
  it('a keeper named by ReaderOptions.reader: one log line for the stream, counted by reader while it reads', async () => {
    const { bus, offLines } = newBus();
    const s = bus.create('v1', 'test');
    const pub = s.attachPublisher();
    s.subscribe(answering());
    await tick();
    for (let n = 0; n < 20; n++) push(pub, n);
    assert.equal(s.reuseOffBy, undefined);
    assert.equal(bus.reuseOffByReader().size, 0);
    assert.equal(offLines().length, 0);

    const first = s.subscribe(keeping(), { reader: 'recorder file' });
    const second = s.subscribe(keeping(), { reader: 'hls-out segmenter' });
    assert.equal(s.reuseOffBy, 'recorder file', 'the first keeper is named');
    assert.deepEqual(asObject(bus.reuseOffByReader()), { 'recorder file': 1 });
    const lines = offLines();
    assert.equal(lines.length, 1, 'one line for the stream');
    assert.equal(lines[0].level, 30, 'at info');
    assert.equal(lines[0].stream, 'v1');
    assert.equal(lines[0].reader, 'recorder file');

    first.close();
    assert.equal(s.reuseOffBy, 'hls-out segmenter', 'the keeper still reading is named');
    second.close();
    assert.equal(s.reuseOffBy, undefined, 'reuse is on again');
    assert.equal(bus.reuseOffByReader().size, 0);
    const again = s.subscribe(keeping(), { reader: 'recorder file' });
    assert.equal(s.reuseOffBy, 'recorder file');
    assert.equal(offLines().length, 1, 'still one line: once per stream');
    again.close();
    s.close('test over');
  });

  it("several streams are counted by the reader that keeps each one's memory", () => {
    const { bus, offLines } = newBus();
    const pubs = ['a', 'b', 'c'].map((name) => {
      const s = bus.create(name, 'test');
      const pub = s.attachPublisher();
      s.subscribe(keeping(), { reader: name === 'c' ? 'rtsp-out udp' : 'hls-out' });
      return pub;
    });
    for (const pub of pubs) push(pub, 0);
    assert.deepEqual(asObject(bus.reuseOffByReader()), { 'hls-out': 2, 'rtsp-out udp': 1 });
    assert.deepEqual(
      offLines().map((l) => [l.stream, l.reader]),
      [
        ['a', 'hls-out'],
        ['b', 'hls-out'],
        ['c', 'rtsp-out udp'],
      ],
    );
    for (const s of bus.list()) s.close('test over');
    assert.equal(bus.reuseOffByReader().size, 0, 'closed streams are not counted');
  });

  it('only where reuse would run: a stream whose publisher never allocs, or gateway.reusePayloads false, is not counted', () => {
    const plain = newBus();
    const s = plain.bus.create('own-buffers', 'test');
    const pub = s.attachPublisher();
    s.subscribe(keeping(), { reader: 'hls-out' });
    for (let n = 0; n < 20; n++) push(pub, n, false);
    assert.equal(plain.bus.reuseOffByReader().size, 0);
    assert.equal(plain.offLines().length, 0);
    // the first alloc makes it count, and says so
    push(pub, 20);
    assert.deepEqual(asObject(plain.bus.reuseOffByReader()), { 'hls-out': 1 });
    assert.equal(plain.offLines().length, 1);

    const off = newBus(false);
    const t = off.bus.create('no-reuse', 'test');
    const tp = t.attachPublisher();
    t.subscribe(keeping(), { reader: 'hls-out' });
    for (let n = 0; n < 20; n++) push(tp, n);
    assert.equal(off.bus.reuseOffByReader().size, 0, 'reuse is off for every stream by configuration, not by a reader');
    assert.equal(off.offLines().length, 0);
  });

  it("a keeper with no name is named by the code that subscribed; one a stage's start subscribes, by the stage", async () => {
    const { bus, offLines } = newBus();
    const s = bus.create('v2', 'test');
    const pub = s.attachPublisher();
    push(pub, 0);
    const sub = s.subscribe(keeping());
    assert.equal(s.reuseOffBy, 'payload-reuse-off.test', 'outside a plugin: the calling file');
    sub.close();

    // a stage that passes video and reads audio with a sink that cannot say when it is done
    const keepAudio: StageDefinition = {
      name: 'keep-audio',
      passes: ['video'],
      start(ctx) {
        const r = ctx.input.subscribe(keeping(), { media: 'a' });
        return { stop: () => r.close() };
      },
    };
    bus.registerStage(keepAudio, 'test', pino({ level: 'silent' }));
    const viaStage = s.subscribe(answering(), { via: 'keep-audio' });
    await tick();
    pub.push(audioUnit({ codec: 'g711a', dts: 40, timescale: 8000, payload: pub.alloc(160) }));
    assert.equal(s.reuseOffBy, 'stage keep-audio', 'named by the stage, not by whoever asked for it');
    viaStage.close();
    assert.equal(s.reuseOffBy, undefined, 'the stage stopped with its last reader');

    // a keeper on a stage's stream keeps the input's memory: the input is counted, by that reader; the stage's not
    const passVideo: StageDefinition = {
      name: 'pass-video',
      passes: ['video'],
      start: () => ({ stop: () => undefined }),
    };
    bus.registerStage(passVideo, 'test', pino({ level: 'silent' }));
    const onStage = s.subscribe(keeping(), { via: 'pass-video', reader: 'flv-out player' });
    push(pub, 10);
    assert.deepEqual(asObject(bus.reuseOffByReader()), { 'flv-out player': 1 });
    assert.equal(s.reuseOffBy, 'flv-out player');
    assert.equal(offLines().length, 1, 'still the one line of stream v2');
    onStage.close();
    assert.equal(bus.reuseOffByReader().size, 0);
    s.close('test over');
  });

  it("names from call sites: the plugin's folder, an SDK example's, a package, else the file; the bus and the SDK are skipped", () => {
    const bus = '/srv/gw/dist/core/bus/stream.js';
    const sdk = '/srv/gw/dist/plugin-sdk/stages.js';
    assert.equal(nameFromFiles([bus, sdk, 'node:internal/process/task_queues', '/srv/gw/dist/plugins/hls-out/src/forms.js']), 'hls-out');
    assert.equal(nameFromFiles([bus, '/srv/gw/dist/plugin-sdk/examples/raw-h264-ws/index.js']), 'raw-h264-ws');
    assert.equal(nameFromFiles([bus, '/srv/app/node_modules/@acme/gw-archive/dist/sink.js']), '@acme/gw-archive');
    assert.equal(nameFromFiles([bus, '/srv/app/node_modules/gw-archive/index.js']), 'gw-archive');
    assert.equal(nameFromFiles([bus, 'C:\\gw\\dist\\plugins\\recorder\\src\\recording.js']), 'recorder');
    assert.equal(nameFromFiles([bus, '', '/srv/site/my-plugin.js']), 'my-plugin');
    assert.equal(nameFromFiles([bus, sdk, 'node:events']), 'unnamed');
    assert.equal(nameFromFiles([]), 'unnamed');
  });

  it('a bad reader name is refused at subscribe with a clear error and a log line', () => {
    const { bus, lines } = newBus();
    const s = bus.create('v3', 'test');
    for (const bad of ['', 'two\nlines', 'x'.repeat(101), 42 as unknown as string]) {
      assert.throws(
        () => s.subscribe(keeping(), { reader: bad }),
        (err: Error) => err instanceof TypeError && /reader must be a name of 1-100 characters/.test(err.message),
      );
    }
    assert.equal(lines.filter((l) => l.msg === 'subscribe refused: bad reader name' && l.stream === 'v3').length, 4);
    assert.equal(s.readerCount, 0);
    assert.equal(s.reuseOffBy, undefined);
    s.close('test over');
  });
});
