import assert from 'node:assert/strict';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import { defineFormat, type MediaReader, type StageDefinition } from '../../plugin-sdk/bus';
import { audioUnit, videoUnit, withPayload, type AccessUnit, type TrackInfo } from '../../plugin-sdk/media';

const KB = 1024;
const quiet = pino({ level: 'silent' });

function unit(dts: number, key: boolean, size = 10 * KB, kind: 'video' | 'audio' = 'video'): AccessUnit {
  return kind === 'video'
    ? videoUnit({ codec: 'h264', dts, keyframe: key, payload: Buffer.alloc(size) })
    : audioUnit({ codec: 'g711a', dts, timescale: 8000, duration: size, payload: Buffer.alloc(size) });
}

/** lets the microtask that starts a new reader run */
const tick = () => new Promise<void>((r) => setImmediate(r));

function newBus(limits: Partial<ConstructorParameters<typeof CoreMediaBus>[0]> = {}, now: () => number = () => 0): CoreMediaBus {
  return new CoreMediaBus(
    {
      maxGopBytes: 512 * KB,
      maxQueueBytes: 200 * KB,
      maxStreamBytes: 1024 * KB,
      readerDropAfterMs: 30_000,
      ...limits,
    },
    quiet,
    now,
  );
}

function collect(extra: Partial<MediaReader> = {}): { got: AccessUnit[]; sink: MediaReader } {
  const got: AccessUnit[] = [];
  return { got, sink: { write: (u) => got.push(u), ...extra } };
}

describe('media bus', () => {
  it('a new reader starts at the latest keyframe (GOP cache), and nothing reaches it before subscribe() returns', async () => {
    const bus = newBus();
    const s = bus.create('a', 'test');
    const pub = s.attachPublisher();
    for (let i = 0; i < 30; i++) pub.push(unit(i * 40, i % 10 === 0, 1 * KB));
    const { got, sink } = collect();
    s.subscribe(sink);
    assert.equal(got.length, 0, 'not called synchronously');
    pub.push(unit(1200, false, 1 * KB));
    await tick();
    assert.equal(got.length, 11, 'units 20..29 from the cache, then the live one');
    assert.equal(got[0].keyframe, true);
    assert.equal(got[0].dts, 800);
    assert.deepEqual(got.map((u) => u.dts).slice(-2), [1160, 1200], 'in order');
  });

  it('a slow reader skips to the next keyframe; the publisher never waits; a fast one gets everything', async () => {
    const bus = newBus();
    const s = bus.create('b', 'test');
    const pub = s.attachPublisher();
    const fast: number[] = [];
    let slowWritable = false;
    const slow: number[] = [];
    let skippedUnits = 0;
    s.subscribe({ write: (u) => fast.push(u.dts) });
    const slowSub = s.subscribe({
      write: (u) => slow.push(u.dts),
      writable: () => slowWritable,
      skipped: (i) => {
        skippedUnits += i.units;
      },
    });
    await tick();
    for (let i = 0; i < 90; i++) pub.push(unit(i * 40, i % 25 === 0));
    assert.equal(fast.length, 90);
    assert.ok(slowSub.stats.skips >= 1, 'the slow one skipped');
    assert.equal(skippedUnits, slowSub.stats.skippedUnits, 'the sink was told what it lost');
    assert.ok(slowSub.stats.queuedBytes <= 200 * KB, `queue bounded: ${slowSub.stats.queuedBytes}`);
    slowWritable = true;
    slowSub.resume();
    assert.equal(slow.length, 15, 'the last GOP (units 75..89) was kept');
    assert.equal(slow[0] % (25 * 40), 0, `resumed at a keyframe (dts ${slow[0]})`);
    for (let i = 1; i < slow.length; i++) assert.equal(slow[i] - slow[i - 1], 40);
  });

  it('a joining reader takes a GOP larger than its queue cap without skipping it', async () => {
    const bus = newBus({ maxQueueBytes: 64 * KB });
    const s = bus.create('j', 'test');
    const pub = s.attachPublisher();
    for (let i = 0; i < 20; i++) pub.push(unit(i * 40, i === 0, 10 * KB));
    const { got, sink } = collect();
    const sub = s.subscribe(sink);
    pub.push(unit(800, false, 10 * KB));
    await tick();
    assert.equal(got.length, 21);
    assert.equal(sub.stats.skips, 0);
  });

  it("a unit larger than a reader's cap still reaches it when it can take it", async () => {
    const bus = newBus({ maxQueueBytes: 64 * KB });
    const s = bus.create('big', 'test');
    const pub = s.attachPublisher();
    const { got, sink } = collect();
    const sub = s.subscribe(sink);
    await tick();
    pub.push(unit(0, true, 100 * KB));
    pub.push(unit(40, false, 100 * KB));
    assert.equal(got.length, 2);
    assert.equal(sub.stats.skips, 0);
  });

  it('a reader that stops taking units is ended as stuck: by missed bytes, and by time', async () => {
    let now = 0;
    const bus = newBus({ maxQueueBytes: 64 * KB, readerDropAfterMs: 5000 }, () => now);
    const s = bus.create('stuck', 'test');
    const pub = s.attachPublisher();
    let ended = '';
    s.subscribe({
      write: () => undefined,
      writable: () => false,
      end: (r) => {
        ended = r;
      },
    });
    await tick();
    for (let i = 0; i < 100 && !ended; i++) pub.push(unit(i * 40, i % 5 === 0, 10 * KB));
    assert.match(ended, /^reader stuck: missed/);
    assert.equal(s.stats().subscribers, 0);
    assert.equal(s.stats().droppedReaders, 1);

    let ended2 = '';
    s.subscribe(
      {
        write: () => undefined,
        writable: () => false,
        end: (r) => {
          ended2 = r;
        },
      },
      { maxQueueBytes: 10_000 * KB },
    );
    await tick();
    pub.push(unit(2000, true, 1 * KB));
    now += 4000;
    pub.push(unit(2040, false, 1 * KB));
    assert.equal(ended2, '', 'not yet');
    now += 2000;
    pub.push(unit(2080, false, 1 * KB));
    assert.match(ended2, /^reader stuck: took nothing for 5000 ms/);
  });

  it('a sink that throws ends only its own subscription', async () => {
    const bus = newBus();
    const s = bus.create('throw', 'test');
    const pub = s.attachPublisher();
    let ended = '';
    s.subscribe({
      write: () => {
        throw new Error('boom');
      },
      end: (r) => {
        ended = r;
      },
    });
    const { got, sink } = collect();
    s.subscribe(sink);
    await tick();
    pub.push(unit(0, true));
    pub.push(unit(40, false));
    assert.match(ended, /sink threw: boom/);
    assert.equal(got.length, 2);
  });

  it('a unit pushed while a reader in step writes the one before reaches it next, in order, with no push after', async () => {
    // a reader in step takes a unit without queueing it: one that comes during that write must still follow it
    const bus = newBus();
    const s = bus.create('reenter', 'test');
    const pub = s.attachPublisher();
    const got: number[] = [];
    s.subscribe({
      write: (u) => {
        got.push(u.dts);
        if (u.dts === 40) pub.push(unit(80, false));
      },
    });
    await tick();
    pub.push(unit(0, true));
    pub.push(unit(40, false));
    assert.deepEqual(got, [0, 40, 80]);
  });

  it('the stream ceiling sheds the largest queue', async () => {
    const bus = newBus({ maxGopBytes: 64 * KB, maxQueueBytes: 600 * KB, maxStreamBytes: 700 * KB });
    const s = bus.create('c', 'test');
    const pub = s.attachPublisher();
    const subs = [0, 1, 2].map(() => s.subscribe({ write: () => undefined, writable: () => false }));
    await tick();
    for (let i = 0; i < 60; i++) pub.push(unit(i * 40, i % 30 === 0));
    const st = s.stats();
    assert.ok(st.queuedBytes + st.gopBytes <= 700 * KB + 10 * KB, `stream memory bounded: ${st.queuedBytes}`);
    assert.ok(subs.some((x) => x.stats.skips > 0));
  });

  it('a GOP larger than the cache limit is not cached: late joiners wait for the next keyframe', async () => {
    const bus = newBus({ maxGopBytes: 64 * KB });
    const s = bus.create('d', 'test');
    const pub = s.attachPublisher();
    for (let i = 0; i < 20; i++) pub.push(unit(i * 40, i === 0));
    const { got, sink } = collect();
    s.subscribe(sink);
    await tick();
    assert.equal(s.stats().gopBytes, 0);
    pub.push(unit(800, false));
    assert.equal(got.length, 0, 'no P frame without its keyframe');
    pub.push(unit(840, true));
    assert.equal(got.length, 1);
  });

  it('a reconnecting publisher continues the timeline with shifted copies; shared units are never changed', async () => {
    const bus = newBus();
    const s = bus.create('e', 'test');
    const { got, sink } = collect();
    s.subscribe(sink);
    await tick();
    const p1 = s.attachPublisher();
    const first = unit(0, true);
    p1.push(first);
    p1.push(unit(40, false));
    const p2 = s.attachPublisher();
    assert.equal(s.epoch, 2);
    assert.equal(p1.active, false);
    const again = unit(5, true); // a new connection rebases near zero
    p2.push(again);
    p1.push(unit(80, false));
    assert.deepEqual(
      got.map((u) => u.dts),
      [0, 40, 60],
    );
    assert.equal(got[2].dtsTicks, 60 * 90, 'ticks moved with the ms view');
    assert.notEqual(got[2], again, 'the shifted unit is a copy');
    assert.equal(again.dts, 5, 'the pushed unit is unchanged');
    assert.equal(got[0], first, 'an unshifted unit is passed by reference');
  });

  it('anchors each publisher to the wall clock, or to what it says (RTCP)', () => {
    let now = 1_700_000_000_000;
    const bus = newBus({}, () => now);
    const s = bus.create('w', 'test');
    assert.equal(s.wallClock(0), undefined);
    const p = s.attachPublisher();
    p.push(unit(1000, true));
    assert.equal(s.wallClock(1000), now);
    assert.equal(s.wallClock(1500), now + 500);
    now += 10_000;
    const p2 = s.attachPublisher();
    p2.setWallClock(1_800_000_000_000, 0);
    p2.push(unit(0, true)); // lands at 1020 on the stream's timeline
    assert.equal(s.wallClock(1020), 1_800_000_000_000);
  });

  it('ready at the first keyframe, or after audio alone when no video is expected; events fire', () => {
    const bus = newBus();
    const v = bus.create('v', 'test');
    let vReady = 0;
    v.on('ready', () => vReady++);
    const tracks: Array<ReadonlyArray<TrackInfo>> = [];
    v.on('tracks', (t) => tracks.push(t));
    const pv = v.attachPublisher();
    pv.setTrack({ kind: 'video', codec: 'h264', width: 2, height: 2 });
    pv.push(unit(0, false, 10, 'audio'));
    pv.push(unit(20, false));
    assert.equal(vReady, 0);
    pv.push(unit(40, true));
    assert.equal(vReady, 1);
    assert.equal(tracks.length, 1);
    const a = bus.create('a', 'test', { expectVideo: false });
    let aReady = 0;
    a.on('ready', () => aReady++);
    a.attachPublisher().push(unit(0, false, 160, 'audio'));
    assert.equal(aReady, 1);
    let late = 0;
    a.on('ready', () => late++);
    assert.equal(late, 1, 'a listener added after ready is called at once');
  });

  it('readers choose tracks: audio-only starts at any audio unit, video-only sees no audio', async () => {
    const bus = newBus();
    const s = bus.create('m', 'test');
    const pub = s.attachPublisher();
    pub.setTrack({ kind: 'video', codec: 'h264' });
    pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
    const aTracks: string[] = [];
    const a = collect({ tracks: (t) => aTracks.push(t.map((x) => x.kind).join()) });
    const v = collect();
    s.subscribe(a.sink, { media: 'a' });
    s.subscribe(v.sink, { media: 'v' });
    await tick();
    pub.push(unit(0, false, 160, 'audio'));
    pub.push(unit(10, false));
    pub.push(unit(40, true));
    assert.deepEqual(
      a.got.map((u) => u.kind),
      ['audio'],
    );
    assert.deepEqual(aTracks, ['audio']);
    assert.deepEqual(
      v.got.map((u) => u.dts),
      [40],
    );
  });

  it('track changes reach a queued reader in order with its units', async () => {
    const bus = newBus();
    const s = bus.create('t', 'test');
    const pub = s.attachPublisher();
    const seen: string[] = [];
    let writable = false;
    const sub = s.subscribe({
      write: (u) => seen.push(`u${u.dts}`),
      tracks: (t) => seen.push(`w${(t[0] as { width?: number }).width}`),
      writable: () => writable,
    });
    await tick();
    pub.setTrack({ kind: 'video', codec: 'h264', width: 1 });
    pub.push(unit(0, true, 100));
    pub.setTrack({ kind: 'video', codec: 'h264', width: 2 });
    pub.push(unit(40, true, 100));
    writable = true;
    sub.resume();
    assert.deepEqual(seen, ['w1', 'u0', 'w2', 'u40']);
  });

  it('a format frames each unit once for all its readers, from the GOP cache on, and stops with its last reader', async () => {
    const bus = newBus();
    const s = bus.create('f', 'test');
    const pub = s.attachPublisher();
    let encoders = 0;
    let closed = 0;
    const framed: number[] = [];
    const fmt = defineFormat<string>('test-format', () => {
      encoders++;
      let n = 0;
      return {
        encode: (u) => {
          framed.push(u.dts);
          return u.kind === 'audio' ? undefined : `#${n++}@${u.dts}`;
        },
        close: () => {
          closed++;
        },
      };
    });
    for (let i = 0; i < 5; i++) pub.push(unit(i * 40, i === 2));
    const r1: string[] = [];
    const r2: string[] = [];
    const s1 = s.subscribe<string>({ write: (_u, f) => r1.push(f) }, { format: fmt });
    assert.deepEqual(framed, [80, 120, 160], 'the new encoder framed the cached GOP first');
    const s2 = s.subscribe<string>({ write: (_u, f) => r2.push(f) }, { format: fmt });
    await tick();
    pub.push(unit(200, false));
    pub.push(unit(210, false, 10, 'audio'));
    assert.equal(encoders, 1);
    assert.deepEqual(framed, [80, 120, 160, 200, 210], 'once per unit, not per reader');
    assert.deepEqual(r1, ['#0@80', '#1@120', '#2@160', '#3@200'], 'a unit the format leaves out is not delivered');
    assert.deepEqual(r2, r1);
    assert.deepEqual(s.stats().formats, { 'test-format': 2 });
    s1.close();
    assert.equal(closed, 0);
    s2.close();
    assert.equal(closed, 1);
    pub.push(unit(240, false));
    assert.equal(framed.length, 5, 'no encoding without readers');
  });

  describe('stages', () => {
    const doubler: StageDefinition = {
      name: 'audio-doubler',
      params: (p) => {
        const times = p.times ?? 2;
        if (typeof times !== 'number' || times < 1) throw new TypeError('times must be a number >= 1');
        return { times };
      },
      start({ input, output, params }) {
        const times = params.times as number;
        const sub = input.subscribe({
          tracks: (ts) => {
            for (const t of ts) output.setTrack(t);
          },
          write: (u) => output.push(u.kind === 'audio' ? withPayload(u, Buffer.concat(Array(times).fill(u.payload))) : u),
        });
        return { stop: () => sub.close() };
      },
    };

    it('runs once per (stream, params) for all its readers, passes video by reference, and stops with the last reader', async () => {
      const bus = newBus();
      let started = 0;
      let stopped = 0;
      bus.registerStage(
        {
          ...doubler,
          start: (c) => {
            started++;
            const i = doubler.start(c);
            return {
              stop: () => {
                stopped++;
                i.stop();
              },
            };
          },
        },
        'p',
        quiet,
      );
      const s = bus.create('src', 'test');
      const pub = s.attachPublisher();
      const a = collect();
      const b = collect();
      const c = collect();
      const sa = s.subscribe(a.sink, { via: 'audio-doubler' });
      const sb = s.subscribe(b.sink, { via: { stage: 'audio-doubler', params: { times: 2 } } });
      const sc = s.subscribe(c.sink, { via: { stage: 'audio-doubler', params: { times: 3 } } });
      assert.equal(started, 2, 'times 2 (the default) shared; times 3 its own');
      const derived = bus.list().filter((x) => x.derivedFrom?.stream === 'src');
      assert.equal(derived.length, 2);
      assert.ok(
        derived.every((d) => /^src~audio-doubler~[0-9a-f]{10}$/.test(d.name)),
        derived.map((d) => d.name).join(),
      );
      await tick();
      const v = unit(0, true, 100);
      pub.push(v);
      pub.push(unit(0, false, 4, 'audio'));
      await tick();
      assert.equal(a.got[0], v, 'video by reference');
      assert.equal(a.got[1].payload.length, 8);
      assert.equal(b.got[1].payload.length, 8);
      assert.equal(c.got[1].payload.length, 12);
      assert.equal(s.stats().subscribers, 2, 'the source has one reader per running stage');
      sa.close();
      assert.equal(stopped, 0);
      sb.close();
      assert.equal(stopped, 1);
      sc.close();
      assert.equal(stopped, 2);
      assert.equal(s.stats().subscribers, 0);
      assert.deepEqual(
        bus.list().map((x) => x.name),
        ['src'],
      );
    });

    it('refuses unknown stages and bad params at subscribe; a closing source ends the stage readers', async () => {
      const bus = newBus();
      bus.registerStage(doubler, 'p', quiet);
      assert.throws(() => bus.registerStage(doubler, 'q', quiet), /registered already \(by plugin p\)/);
      const s = bus.create('src', 'test');
      assert.throws(() => s.subscribe({ write: () => undefined }, { via: 'nope' }), /no stage 'nope' on this gateway \(stages: audio-doubler\)/);
      assert.throws(() => s.subscribe({ write: () => undefined }, { via: { stage: 'audio-doubler', params: { times: 0 } } }), /times must be/);
      let ended = '';
      s.subscribe(
        {
          write: () => undefined,
          end: (r) => {
            ended = r;
          },
        },
        { via: 'audio-doubler' },
      );
      bus.remove('src', 'stream closed');
      assert.equal(ended, 'stream closed');
      assert.deepEqual(bus.list(), []);
    });

    it('a plugin view releases its streams and stages when the plugin stops', async () => {
      const bus = newBus();
      const view = bus.viewFor('p', quiet);
      view.registerStage(doubler);
      const own = view.create('mine');
      const other = bus.create('theirs', 'sessions');
      let ended = '';
      other.subscribe(
        {
          write: () => undefined,
          end: (r) => {
            ended = r;
          },
        },
        { via: 'audio-doubler' },
      );
      view.release();
      assert.equal(own.closed, true);
      assert.equal(other.closed, false);
      assert.equal(ended, 'stage audio-doubler stopped');
      assert.deepEqual(bus.stageNames(), []);
    });
  });

  it('closing the stream ends readers and tells the publisher', () => {
    const bus = newBus();
    const s = bus.create('f', 'test');
    let ended = '';
    s.subscribe({
      write: () => undefined,
      end: (r) => {
        ended = r;
      },
    });
    const pub = s.attachPublisher();
    let told = false;
    pub.onClose(() => {
      told = true;
    });
    let closedWith = '';
    s.on('closed', (r) => {
      closedWith = r;
    });
    bus.remove('f', 'stream closed');
    assert.equal(ended, 'stream closed');
    assert.equal(closedWith, 'stream closed');
    assert.equal(told, true);
    assert.equal(pub.closed, true);
    assert.equal(bus.get('f'), undefined);
  });

  it('refuses bad and taken stream names', () => {
    const bus = newBus();
    bus.create('ok_1.2~x-y', 'a');
    assert.throws(() => bus.create('ok_1.2~x-y', 'b'), /exists already \(made by a\)/);
    assert.throws(() => bus.create('../etc', 'b'), /stream name/);
    assert.throws(() => bus.create('', 'b'), /stream name/);
  });
});
