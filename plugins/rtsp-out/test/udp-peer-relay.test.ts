/**
 * UdpPeerRelay: a worker passes the addresses of UDP peers it holds no session for to the other workers, batched and
 * bounded; the worker that holds the peer's session hears of it. Two relays joined by an in-memory broadcast stand
 * for two workers (the real two-worker gateway is test/core/cluster-rtsp.test.ts).
 */
import assert from 'node:assert/strict';
import { ManualClock } from '../../../plugin-sdk/clock';
import type { Workers } from '../../../plugin-sdk/plugin';
import { UdpPeerRelay } from '../src/udp-peer-relay';

interface Seen { heard: string[][]; relayed: number; dropped: number; messages: number }
type Worker = Seen & { relay: UdpPeerRelay };

function cluster(count: number, clock: ManualClock, maxBatch = 8): Worker[] {
  const handlers: Array<(p: unknown) => void> = [];
  const out: Worker[] = [];
  for (let i = 0; i < count; i++) {
    const w: Seen = { heard: [], relayed: 0, dropped: 0, messages: 0 };
    const workers: Workers = {
      count, index: i,
      broadcast: (_topic, payload) => {
        w.messages++;
        // structured clone, as between processes
        handlers.forEach((h, j) => { if (j !== i) h(structuredClone(payload)); });
      },
      on: (_topic, fn) => { handlers[i] = fn; },
    };
    const relay = new UdpPeerRelay({ workers, clock, batchMs: 100, maxBatch, heard: (p) => w.heard.push([...p]),
      relayed: (n) => { w.relayed += n; }, dropped: () => { w.dropped++; } });
    out.push(Object.assign(w, { relay }));
  }
  return out;
}

describe('rtsp-out: UDP peers heard by another worker', () => {
  it('passes unknown peers to the other workers in one message per batch, each peer once', () => {
    const clock = new ManualClock();
    const [a, b, c] = cluster(3, clock);
    for (let i = 0; i < 50; i++) a.relay.unknown('127.0.0.1:5001');
    a.relay.unknown('127.0.0.1:5003');
    assert.deepEqual(b.heard, [], 'nothing before the batch ends');
    clock.advance(100);
    assert.equal(a.messages, 1);
    assert.deepEqual(b.heard, [['127.0.0.1:5001', '127.0.0.1:5003']]);
    assert.deepEqual(c.heard, b.heard);
    assert.deepEqual(a.heard, [], 'not to itself');
    assert.equal(a.relayed, 2);
    // a quiet worker sends nothing; the next unknown peer starts a new batch
    clock.advance(1000);
    assert.equal(a.messages, 1);
    a.relay.unknown('127.0.0.1:5001');
    clock.advance(100);
    assert.equal(a.messages, 2);
    assert.deepEqual(b.heard[1], ['127.0.0.1:5001']);
  });

  it('a flood from made-up addresses costs at most one bounded message per batch', () => {
    const clock = new ManualClock();
    const [a, b] = cluster(2, clock, 8);
    for (let i = 0; i < 10_000; i++) a.relay.unknown(`10.0.${i >> 8}.${i & 255}:${1024 + i}`);
    clock.advance(100);
    assert.equal(a.messages, 1);
    assert.equal(b.heard[0].length, 8);
    assert.equal(a.relayed, 8);
    assert.equal(a.dropped, 10_000 - 8);
  });

  it('does nothing in a single process, and nothing after stop', () => {
    const clock = new ManualClock();
    const [solo] = cluster(1, clock);
    solo.relay.unknown('127.0.0.1:5001');
    clock.advance(1000);
    assert.equal(solo.messages, 0);
    const [a, b] = cluster(2, clock);
    a.relay.unknown('127.0.0.1:5001');
    a.relay.stop();
    clock.advance(1000);
    assert.equal(a.messages, 0);
    assert.deepEqual(b.heard, []);
  });

  it('takes from a sibling only a list of short strings, at most a batch of them', () => {
    const clock = new ManualClock();
    const handlers: Array<(p: unknown) => void> = [];
    const heard: string[][] = [];
    new UdpPeerRelay({
      workers: { count: 2, index: 0, broadcast: () => undefined, on: (_t, fn) => { handlers.push(fn); } },
      clock, batchMs: 100, maxBatch: 4, heard: (p) => heard.push([...p]), relayed: () => undefined, dropped: () => undefined,
    });
    for (const bad of [undefined, null, 42, 'a:1', { 0: 'a:1' }, [], [1, 2], ['x'.repeat(65)]]) handlers[0](bad);
    assert.deepEqual(heard, []);
    handlers[0](['a:1', 7, 'b:2', 'c:3', 'd:4', 'e:5']);
    assert.deepEqual(heard, [['a:1', 'b:2', 'c:3']]);
  });
});
