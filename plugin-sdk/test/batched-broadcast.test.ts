/**
 * BatchedBroadcast: items gathered for a batch and told to the other workers in one message, bounded, each checked
 * on arrival. In-memory workers joined by a broadcast that clones as IPC would stand in for processes here; the real
 * two-worker gateway runs in test/core/cluster-rtsp.test.ts (rtsp-out's UDP peers) and cluster-login.test.ts (the
 * login brake).
 */
import assert from 'node:assert/strict';
import { BatchedBroadcast, type BatchedBroadcastOptions } from '../batched-broadcast';
import { ManualClock } from '../clock';
import type { Workers } from '../plugin';

interface Seen {
  received: string[][];
  sent: number;
  dropped: number;
  messages: number;
}
type Worker = Seen & { batch: BatchedBroadcast };

function cluster(count: number, clock: ManualClock, o: Partial<BatchedBroadcastOptions> = {}): Worker[] {
  const handlers: Array<(p: unknown) => void> = [];
  const out: Worker[] = [];
  for (let i = 0; i < count; i++) {
    const w: Seen = { received: [], sent: 0, dropped: 0, messages: 0 };
    const workers: Workers = {
      count,
      index: i,
      broadcast: (_topic, payload) => {
        w.messages++;
        handlers.forEach((h, j) => {
          if (j !== i) h(structuredClone(payload));
        });
      },
      on: (_topic, fn) => {
        handlers[i] = fn;
      },
    };
    const batch = new BatchedBroadcast({
      workers,
      topic: 't',
      clock,
      batchMs: 100,
      maxBatch: 8,
      maxItemLength: 64,
      received: (items) => w.received.push([...items]),
      sent: (n) => {
        w.sent += n;
      },
      dropped: () => {
        w.dropped++;
      },
      ...o,
    });
    out.push(Object.assign(w, { batch }));
  }
  return out;
}

describe('BatchedBroadcast: state told to the other workers', () => {
  it('sends what a batch gathered as one message to every other worker', () => {
    const clock = new ManualClock();
    const [a, b, c] = cluster(3, clock);
    for (let i = 0; i < 3; i++) a.batch.add('10.0.0.1');
    a.batch.add('10.0.0.2');
    assert.deepEqual(b.received, [], 'nothing before the batch ends');
    clock.advance(100);
    assert.equal(a.messages, 1);
    assert.deepEqual(b.received, [['10.0.0.1', '10.0.0.1', '10.0.0.1', '10.0.0.2']], 'events: repeats count');
    assert.deepEqual(c.received, b.received);
    assert.deepEqual(a.received, [], 'not to itself');
    assert.equal(a.sent, 4);
    // a quiet worker sends nothing; the next item starts a new batch
    clock.advance(1000);
    assert.equal(a.messages, 1);
    a.batch.add('10.0.0.1');
    clock.advance(100);
    assert.equal(a.messages, 2);
    assert.deepEqual(b.received[1], ['10.0.0.1']);
  });

  it('distinct: each item once a batch', () => {
    const clock = new ManualClock();
    const [a, b] = cluster(2, clock, { distinct: true });
    for (let i = 0; i < 50; i++) a.batch.add('127.0.0.1:5001');
    a.batch.add('127.0.0.1:5003');
    clock.advance(100);
    assert.deepEqual(b.received, [['127.0.0.1:5001', '127.0.0.1:5003']]);
    a.batch.add('127.0.0.1:5001');
    clock.advance(100);
    assert.deepEqual(b.received[1], ['127.0.0.1:5001'], 'a new batch takes it again');
  });

  it('a flood costs at most one bounded message per batch', () => {
    const clock = new ManualClock();
    const [a, b] = cluster(2, clock, { distinct: true });
    for (let i = 0; i < 10_000; i++) a.batch.add(`10.0.${i >> 8}.${i & 255}:${1024 + i}`);
    clock.advance(100);
    assert.equal(a.messages, 1);
    assert.equal(b.received[0].length, 8);
    assert.equal(a.sent, 8);
    assert.equal(a.dropped, 10_000 - 8);
  });

  it('does nothing in a single process, and nothing after stop', () => {
    const clock = new ManualClock();
    const [solo] = cluster(1, clock);
    solo.batch.add('x');
    clock.advance(1000);
    assert.equal(solo.messages, 0);
    const [a, b] = cluster(2, clock);
    a.batch.add('x');
    a.batch.stop();
    clock.advance(1000);
    assert.equal(a.messages, 0);
    assert.deepEqual(b.received, []);
  });

  it('takes from a sibling only a list of short strings, at most a batch of them', () => {
    const clock = new ManualClock();
    const handlers: Array<(p: unknown) => void> = [];
    const received: string[][] = [];
    new BatchedBroadcast({
      workers: {
        count: 2,
        index: 0,
        broadcast: () => undefined,
        on: (_t, fn) => {
          handlers.push(fn);
        },
      },
      topic: 't',
      clock,
      batchMs: 100,
      maxBatch: 4,
      maxItemLength: 64,
      received: (p) => received.push([...p]),
    });
    for (const bad of [undefined, null, 42, 'a:1', { 0: 'a:1' }, [], [1, 2], ['x'.repeat(65)]]) handlers[0](bad);
    assert.deepEqual(received, []);
    handlers[0](['a:1', 7, 'b:2', 'c:3', 'd:4', 'e:5']);
    assert.deepEqual(received, [['a:1', 'b:2', 'c:3']]);
  });
});
