import assert from 'node:assert/strict';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import { GopCache } from '../../core/bus/gop-cache';
import type { Entry } from '../../core/bus/entry';
import { defineFormat, type FormatEncoder, type UnitFormat } from '../../plugin-sdk/bus';
import { audioUnit, unitAt, videoUnit, type AccessUnit, type TrackInfo } from '../../plugin-sdk/media';
import { collector } from '../support/gc';

const KB = 1024;
const quiet = pino({ level: 'silent' });
const tick = () => new Promise<void>((r) => setImmediate(r));

function newBus(): CoreMediaBus {
  return new CoreMediaBus({ maxGopBytes: 512 * KB, maxQueueBytes: 200 * KB, maxStreamBytes: 1024 * KB, readerDropAfterMs: 30_000 }, quiet, () => 0);
}

/** unit i of a stream: its payload's bytes say which unit it is */
function unit(i: number, key: boolean, size = 2 * KB): AccessUnit {
  const payload = Buffer.alloc(size, i & 0xff);
  payload.writeUInt32BE(i, 0);
  return videoUnit({ codec: 'h264', dts: i * 40, keyframe: key, payload, receivedAt: 1000 + i });
}

function entry(u: AccessUnit, seq: number, src = seq): Entry {
  return { unit: u, seq, src, f0: undefined, more: undefined };
}

/** A format whose forms say which encoder made them and what it had seen: "<encoder>:<units seen>:<unit>". */
function countingFormat(opts: { catchUp: boolean; throwOnCatchUp?: boolean }): { fmt: UnitFormat<string>; made: string[]; catchUps: number[] } {
  const made: string[] = [];
  const catchUps: number[] = [];
  let encoders = 0;
  const create = (name: string): FormatEncoder<string> => {
    let seen = 0;
    const enc: FormatEncoder<string> = {
      encode: (u) => {
        const f = `${name}:${seen++}:${u.payload.readUInt32BE(0)}`;
        made.push(f);
        return f;
      },
    };
    if (opts.catchUp) {
      enc.catchUp = (units) => {
        catchUps.push(units.length);
        if (opts.throwOnCatchUp) throw new Error('cannot');
        const again = create(`${name}'`);
        return units.map((u) => again.encode(u));
      };
    }
    return enc;
  };
  return { fmt: defineFormat<string>(opts.catchUp ? 'catching-up' : 'keeping', () => create(`e${encoders++}`)), made, catchUps };
}

function reader(got: string[]): { write: (u: AccessUnit, f: string) => void } {
  return { write: (_u, f) => got.push(f) };
}

describe('GOP cache as numbers (core/bus/gop-cache.ts)', () => {
  it('gives back every cached unit with the same fields and bytes, numbered as pushed, with no receivedAt', () => {
    const g = new GopCache();
    const pushed: AccessUnit[] = [
      unit(7, true),
      // fractional ms, ticks past 2^31, a duration: what a 90 kHz source and a long stream give
      unitAt({
        kind: 'video',
        codec: 'h265',
        timescale: 90_000,
        dtsTicks: 2 ** 33 + 1,
        ptsTicks: 2 ** 33 + 3001,
        keyframe: false,
        payload: Buffer.from('abc'),
        receivedAt: 5,
      }),
      audioUnit({ codec: 'aac', dts: 1234.5, timescale: 44_100, duration: 1024, payload: Buffer.from([1, 2, 3, 4]) }),
    ];
    // a view into the middle of a larger buffer, as the payload arena hands out
    const big = Buffer.alloc(100, 9);
    pushed.push(videoUnit({ codec: 'h264', dts: 2000, payload: big.subarray(40, 60) }));
    pushed.forEach((u, i) => g.add(entry(u, 100 + i, 50 + i)));
    assert.equal(g.length, 4);
    assert.equal(g.payloadBytes, 2 * KB + 3 + 4 + 20);
    assert.equal(g.firstSrc, 50);
    const back = g.entryList();
    assert.deepEqual(
      back.map((e) => [e.seq, e.src]),
      [
        [100, 50],
        [101, 51],
        [102, 52],
        [103, 53],
      ],
    );
    back.forEach((e, i) => {
      const { receivedAt: _r, ...want } = pushed[i];
      const { receivedAt, ...got } = e.unit;
      assert.equal(receivedAt, undefined);
      assert.deepEqual(got, want, `unit ${i}`);
      assert.notEqual(e.unit, pushed[i], 'a new object over the same bytes');
      assert.equal(e.unit.payload.buffer, pushed[i].payload.buffer);
    });
    g.clear();
    assert.deepEqual([g.length, g.payloadBytes, g.firstSrc, g.entryList().length], [0, 0, undefined, 0]);
  });

  it('keeps no object of a cached unit, and lets go of its payload memory when cleared', async () => {
    const gc = collector();
    const g = new GopCache();
    const units: Array<WeakRef<object>> = [];
    let memory: WeakRef<ArrayBuffer> | undefined;
    (() => {
      for (let i = 0; i < 20; i++) {
        const payload = Buffer.from(new ArrayBuffer(4096), 0, 4096);
        if (i === 5) memory = new WeakRef(payload.buffer as ArrayBuffer);
        const u = videoUnit({ codec: 'h264', dts: i * 40, keyframe: i === 0, payload });
        units.push(new WeakRef(u), new WeakRef(u.payload));
        g.add(entry(u, i));
      }
    })();
    await tick();
    gc();
    assert.equal(units.filter((w) => w.deref() !== undefined).length, 0, 'units and payload views held by the cache');
    assert.ok(memory!.deref() !== undefined, 'the payload memory stays while its unit is cached');
    assert.equal(g.entryList()[5].unit.payload.readUInt8(0), 0);
    g.clear();
    await tick();
    gc();
    assert.equal(memory!.deref(), undefined, 'cleared: the memory is free');
  });

  it('a format with catchUp: the stream keeps no forms, and a late joiner gets the GOP framed by catchUp, then the shared forms', async () => {
    const gc = collector();
    const { fmt, made, catchUps } = countingFormat({ catchUp: true });
    const s = newBus().create('c', 'test');
    const pub = s.attachPublisher();
    const first: string[] = [];
    s.subscribe(reader(first), { format: fmt });
    await tick();
    const refs: Array<WeakRef<object>> = [];
    (() => {
      for (let i = 0; i < 8; i++) {
        const u = unit(i, i === 3);
        refs.push(new WeakRef(u));
        pub.push(u);
      }
    })();
    assert.equal(first.length, 8 - 3, 'the first reader waited for the keyframe');
    await tick();
    gc();
    assert.equal(refs.filter((w) => w.deref() !== undefined).length, 0, 'no unit object outlives its delivery');
    const late: string[] = [];
    s.subscribe(reader(late), { format: fmt });
    pub.push(unit(8, false));
    await tick();
    assert.deepEqual(catchUps, [5]);
    assert.deepEqual(late, ["e0':0:3", "e0':1:4", "e0':2:5", "e0':3:6", "e0':4:7", 'e0:8:8'], "the GOP from catchUp, then the stream encoder's form");
    assert.equal(first.at(-1), 'e0:8:8', 'one form per unit for both');
    assert.equal(made.filter((f) => f.endsWith(':8')).length, 1);
  });

  it("a format without catchUp: its forms are kept with the GOP while it is used; a joiner then gets them, not catchUp's", async () => {
    const withCatchUp = countingFormat({ catchUp: true });
    const keeping = countingFormat({ catchUp: false });
    const s = newBus().create('k', 'test');
    const pub = s.attachPublisher();
    const a: string[] = [];
    s.subscribe(reader(a), { format: withCatchUp.fmt });
    for (let i = 0; i < 5; i++) pub.push(unit(i, i === 1));
    const k1: string[] = [];
    const kSub = s.subscribe(reader(k1), { format: keeping.fmt });
    // the cache keeps Entries from now on: the catching-up format's forms of the GOP were made again into them
    assert.deepEqual(withCatchUp.catchUps, [4]);
    pub.push(unit(5, false));
    const a2: string[] = [];
    const aSub = s.subscribe(reader(a2), { format: withCatchUp.fmt });
    const k2: string[] = [];
    s.subscribe(reader(k2), { format: keeping.fmt });
    await tick();
    assert.deepEqual(withCatchUp.catchUps, [4], 'no catchUp while Entries are kept');
    assert.deepEqual(k1, ['e0:0:1', 'e0:1:2', 'e0:2:3', 'e0:3:4', 'e0:4:5']);
    assert.deepEqual(k2, k1, 'the kept forms');
    assert.deepEqual(a2, ["e0':0:1", "e0':1:2", "e0':2:3", "e0':3:4", 'e0:5:5']);
    aSub.close();
    kSub.close();
    // the keeping format still has a reader: a new catching-up joiner still gets kept forms (made by catchUp when it came back)
    const a3: string[] = [];
    s.subscribe(reader(a3), { format: withCatchUp.fmt });
    await tick();
    assert.equal(a3.length, 5);
    assert.equal(a3[4].endsWith(':5'), true);
  });

  it('stops keeping Entries when the last format without catchUp leaves; joiners are caught up again', async () => {
    const withCatchUp = countingFormat({ catchUp: true });
    const keeping = countingFormat({ catchUp: false });
    const s = newBus().create('d', 'test');
    const pub = s.attachPublisher();
    s.subscribe(reader([]), { format: withCatchUp.fmt });
    const kSub = s.subscribe(reader([]), { format: keeping.fmt });
    for (let i = 0; i < 4; i++) pub.push(unit(i, i === 0));
    kSub.close();
    const late: string[] = [];
    s.subscribe(reader(late), { format: withCatchUp.fmt });
    await tick();
    assert.deepEqual(withCatchUp.catchUps, [4]);
    assert.deepEqual(late, ["e0':0:0", "e0':1:1", "e0':2:2", "e0':3:3"]);
  });

  it('a catchUp that throws: the joiner waits for the next keyframe, the stream and its other readers go on', async () => {
    const { fmt } = countingFormat({ catchUp: true, throwOnCatchUp: true });
    const s = newBus().create('t', 'test');
    const pub = s.attachPublisher();
    const first: string[] = [];
    s.subscribe(reader(first), { format: fmt });
    for (let i = 0; i < 4; i++) pub.push(unit(i, i === 0));
    const late: string[] = [];
    s.subscribe(reader(late), { format: fmt });
    pub.push(unit(4, false));
    pub.push(unit(5, true));
    await tick();
    assert.deepEqual(late, ['e0:5:5']);
    assert.equal(first.length, 6);
  });

  it("a reader without a format gets the cached units' bytes and times", async () => {
    const s = newBus().create('n', 'test');
    const pub = s.attachPublisher();
    const tracks: TrackInfo[] = [{ kind: 'video', codec: 'h264' }];
    pub.setTrack(tracks[0]);
    for (let i = 0; i < 6; i++) pub.push(unit(i, i === 2));
    const got: AccessUnit[] = [];
    s.subscribe({ write: (u) => got.push(u) });
    await tick();
    assert.deepEqual(
      got.map((u) => [u.payload.readUInt32BE(0), u.dts, u.keyframe, u.payload.length]),
      [2, 3, 4, 5].map((i) => [i, i * 40, i === 2, 2 * KB]),
    );
  });
});
