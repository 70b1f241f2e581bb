import assert from 'node:assert/strict';
import { parseRange } from '../src/range';

describe('HTTP Range for record files', () => {
  const SIZE = 1000;

  it('serves the whole file without a Range header', () => {
    assert.deepEqual(parseRange(undefined, SIZE), { status: 200 });
    assert.deepEqual(parseRange(null, SIZE), { status: 200 });
  });

  it('bytes=a-b serves that slice, clamped to the file', () => {
    assert.deepEqual(parseRange('bytes=0-99', SIZE), { status: 206, start: 0, end: 99, contentRange: 'bytes 0-99/1000' });
    assert.deepEqual(parseRange('bytes=500-5000', SIZE), { status: 206, start: 500, end: 999, contentRange: 'bytes 500-999/1000' });
    assert.deepEqual(parseRange('bytes=999-999', SIZE), { status: 206, start: 999, end: 999, contentRange: 'bytes 999-999/1000' });
    assert.deepEqual(parseRange('Bytes = 10 - 19', SIZE), { status: 206, start: 10, end: 19, contentRange: 'bytes 10-19/1000' });
  });

  it('bytes=a- serves from a to the end', () => {
    assert.deepEqual(parseRange('bytes=900-', SIZE), { status: 206, start: 900, end: 999, contentRange: 'bytes 900-999/1000' });
  });

  it('bytes=-n serves the last n bytes (all of a shorter file)', () => {
    assert.deepEqual(parseRange('bytes=-100', SIZE), { status: 206, start: 900, end: 999, contentRange: 'bytes 900-999/1000' });
    assert.deepEqual(parseRange('bytes=-5000', SIZE), { status: 206, start: 0, end: 999, contentRange: 'bytes 0-999/1000' });
  });

  it('answers 416 with bytes */size when nothing can be served', () => {
    const unsat = { status: 416, contentRange: 'bytes */1000' };
    assert.deepEqual(parseRange('bytes=1000-', SIZE), unsat);
    assert.deepEqual(parseRange('bytes=1000-2000', SIZE), unsat);
    assert.deepEqual(parseRange('bytes=-0', SIZE), unsat);
    assert.deepEqual(parseRange('bytes=0-', 0), { status: 416, contentRange: 'bytes */0' });
    assert.deepEqual(parseRange('bytes=-10', 0), { status: 416, contentRange: 'bytes */0' });
  });

  it('serves the whole file for several ranges (multipart is not offered)', () => {
    assert.deepEqual(parseRange('bytes=0-9,20-29', SIZE), { status: 200 });
    assert.deepEqual(parseRange('bytes=0-9, -5', SIZE), { status: 200 });
  });

  it('ignores a header it cannot read, as RFC 9110 allows', () => {
    for (const h of ['items=0-9', 'bytes=', 'bytes=-', 'bytes=9-0', 'bytes=a-b', 'bytes=1.5-2', 'bytes 0-9', 'bytes=99999999999999999999-']) {
      assert.deepEqual(parseRange(h, SIZE), { status: 200 }, h);
    }
  });

  it('rejects a nonsensical file size', () => {
    assert.throws(() => parseRange('bytes=0-1', -1), RangeError);
  });
});
