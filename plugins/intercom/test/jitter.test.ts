import assert from 'node:assert/strict';
import { JitterBuffer } from '../src/jitter';
import { decodeClient, encodeClient, parseClientFormat } from '../src/client-format';

const ramp = (n: number, from = 0): Int16Array => Int16Array.from({ length: n }, (_, i) => from + i);

describe('intercom: jitter buffer', () => {
  it('waits for its prebuffer, then gives whole frames in order', () => {
    const j = new JitterBuffer(800, 320);
    const out = new Int16Array(160);
    j.write(ramp(200), 0);
    assert.equal(j.take(out), undefined, 'under the prebuffer');
    j.write(ramp(200, 200), 5);
    assert.deepEqual(j.take(out), { arrivedAt: 0 });
    assert.deepEqual([...out.subarray(0, 3)], [0, 1, 2]);
    assert.deepEqual(j.take(out), { arrivedAt: 0 }, 'samples 160..319: the oldest came at 0');
    assert.equal(out[0], 160);
    assert.deepEqual(j.take(out), { arrivedAt: 5 });
    assert.equal(out[0], 320);
    assert.deepEqual([...out.subarray(78, 82)], [398, 399, 0, 0], 'ran dry mid-frame: the rest is silence');
    assert.equal(j.stats.underruns, 1);
    assert.equal(j.buffered, 0);
  });

  it('is bounded: what does not fit is dropped and counted, never queued', () => {
    const j = new JitterBuffer(800, 160);
    assert.equal(j.write(ramp(700), 0), 0);
    assert.equal(j.write(ramp(500, 700), 1), 400);
    assert.equal(j.buffered, 800);
    assert.deepEqual(j.stats, { accepted: 800, dropped: 400, underruns: 0 });
    const out = new Int16Array(160);
    for (let i = 0; i < 5; i++) assert.ok(j.take(out));
    assert.equal(out[159], 799, 'the newest kept sample is the last that fitted');
    assert.equal(j.take(out), undefined);
  });

  it('a pause leaves a gap: after running dry it waits for the prebuffer again, with nothing owed', () => {
    const j = new JitterBuffer(1600, 320);
    const out = new Int16Array(160);
    j.write(ramp(320), 0);
    assert.ok(j.take(out));
    assert.ok(j.take(out));
    // the client pauses: slots pass with nothing to send
    for (let i = 0; i < 10; i++) assert.equal(j.take(out), undefined);
    j.write(ramp(160, 1000), 500);
    assert.equal(j.take(out), undefined, 'one frame is under the prebuffer: the next spurt waits');
    j.write(ramp(160, 1160), 520);
    assert.deepEqual(j.take(out), { arrivedAt: 500 });
    assert.equal(out[0], 1000);
  });
});

describe('intercom: client formats', () => {
  it('decodes PCM16 LE and G.711, refuses half samples, and encodes back', () => {
    assert.equal(parseClientFormat(null), 'pcm16');
    assert.equal(parseClientFormat('g711u'), 'g711u');
    assert.equal(parseClientFormat('opus'), undefined);
    const b = Buffer.from([0x01, 0x00, 0xff, 0xff, 0x00, 0x80]);
    assert.deepEqual([...(decodeClient('pcm16', b) as Int16Array)], [1, -1, -32768]);
    assert.match(decodeClient('pcm16', Buffer.alloc(3)) as string, /odd length/);
    assert.ok(encodeClient('pcm16', decodeClient('pcm16', b) as Int16Array).equals(b));
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    assert.ok(encodeClient('g711a', decodeClient('g711a', all) as Int16Array).equals(all), 'A-law round trip of every code');
    // µ-law has two zeros (0x7f, 0xff): every other code comes back as itself
    const u = encodeClient('g711u', decodeClient('g711u', all) as Int16Array);
    for (let i = 0; i < 256; i++) assert.equal(u[i], i === 0x7f ? 0xff : i);
  });
});
