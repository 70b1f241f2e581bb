import assert from 'node:assert/strict';
import { parseQueryTime, parseRecordQuery, type RecordQueryByRange, type RecordQueryByReqId, type RecordQueryParse } from '../src/query-params';

const NOW = new Date('2024-06-15T12:00:00Z');
const SH = { now: NOW, timeZone: 'Asia/Shanghai' };
const DAY = 86_400_000;

const q = (params: Record<string, string>, opts = SH): RecordQueryParse => parseRecordQuery(new URLSearchParams(params), opts);
function range(r: RecordQueryParse): RecordQueryByRange {
  assert.ok(r.ok, `expected a valid query, got invalid ${(r as { field: string }).field}`);
  assert.equal(r.query.mode, 'range');
  return r.query as RecordQueryByRange;
}
const invalid = (r: RecordQueryParse, field: string): void => assert.deepEqual(r, { ok: false, field });

describe('GET /strm/record query parameters', () => {
  describe('query mode', () => {
    it('reqId alone selects the by-reqId mode with default paging; range parameters are then ignored', () => {
      const r = q({ reqId: 'H2ssGFUHHchafxX2x1Bniw', startTm: 'not a time', simNo: 'bad/sim' });
      assert.ok(r.ok);
      assert.deepEqual(r.query as RecordQueryByReqId, { mode: 'reqId', reqId: 'H2ssGFUHHchafxX2x1Bniw', page: 1, limit: 20 });
    });

    it('reqId mode keeps the appId filter', () => {
      const r = q({ reqId: 'abc_def-1$.~', appId: 'demo' });
      assert.ok(r.ok);
      assert.equal((r.query as RecordQueryByReqId).appIdFilter, 'demo');
    });

    it("reqId outside the open call's id rules is invalid", () => {
      invalid(q({ reqId: 'short' }), 'reqId');
      invalid(q({ reqId: 'x'.repeat(41) }), 'reqId');
      invalid(q({ reqId: '../../etc/passwd' }), 'reqId');
    });

    it('without reqId, startTm is required', () => {
      invalid(q({}), 'startTm');
      invalid(q({ endTm: '2024-06-01 00:00:00', simNo: '1' }), 'startTm');
    });

    it('an empty value counts as absent', () => {
      invalid(q({ reqId: '', startTm: '' }), 'startTm');
      const r = range(q({ reqId: '', startTm: '2024-06-10 00:00:00', endTm: '', __page: '', __limit: '' }));
      assert.deepEqual(r.end, NOW);
      assert.equal(r.page, 1);
      assert.equal(r.limit, 20);
    });

    it('a parameter given twice is invalid', () => {
      const p = new URLSearchParams('startTm=2024-06-10+00:00:00&__limit=5&__limit=6');
      assert.deepEqual(parseRecordQuery(p, SH), { ok: false, field: '__limit' });
      assert.deepEqual(parseRecordQuery({ reqId: ['H2ssGFUHHchafxX2x1Bniw', 'H2ssGFUHHchafxX2x1Bnix'] }, SH), { ok: false, field: 'reqId' });
    });

    it('accepts a plain object as parsed by a router', () => {
      const r = parseRecordQuery({ startTm: '2024-06-10T00:00:00Z', __limit: ['7'], other: 'ignored' }, SH);
      assert.ok(r.ok);
      assert.equal(r.query.limit, 7);
    });
  });

  describe('times', () => {
    it("`yyyy-mm-dd HH:mm:ss` is in the server's time zone", () => {
      assert.deepEqual(range(q({ startTm: '2024-06-10 08:00:00' })).start, new Date('2024-06-10T00:00:00Z'));
      const ny = range(q({ startTm: '2024-06-10 08:00:00' }, { now: NOW, timeZone: 'America/New_York' }));
      assert.deepEqual(ny.start, new Date('2024-06-10T12:00:00Z'));
    });

    it("without a configured zone, the process's local zone applies", () => {
      const r = range(parseRecordQuery({ startTm: '2024-06-10 08:00:00' }, { now: NOW }));
      assert.deepEqual(r.start, new Date(2024, 5, 10, 8, 0, 0));
    });

    it('`yyyy-mm-ddTHH:mm:ssZ` is UTC; numeric offsets are honoured', () => {
      const at = new Date('2024-06-10T00:00:00Z');
      assert.deepEqual(range(q({ startTm: '2024-06-10T00:00:00Z' })).start, at);
      assert.deepEqual(range(q({ startTm: '2024-06-10T08:00:00+08:00' })).start, at);
      assert.deepEqual(range(q({ startTm: '2024-06-10T08:00:00+0800' })).start, at);
      assert.deepEqual(range(q({ startTm: '2024-06-09T19:00:00-05:00' })).start, at);
      assert.deepEqual(range(q({ startTm: '2024-06-10T00:00:00.000Z' })).start, at);
      assert.deepEqual(range(q({ startTm: '2024-06-10t00:00:00z' })).start, at);
    });

    it('a `+` that the query string decoded to a space still reads as an offset sign', () => {
      // startTm=2024-06-10T08:00:00+08:00 sent unencoded arrives as "...08:00:00 08:00".
      const r = range(parseRecordQuery(new URLSearchParams('startTm=2024-06-10T08:00:00+08:00'), SH));
      assert.deepEqual(r.start, new Date('2024-06-10T00:00:00Z'));
    });

    it('an unreadable or impossible startTm is invalid', () => {
      for (const bad of [
        'yesterday',
        '2024-06-10',
        '2024-13-01 00:00:00',
        '2024-02-30 00:00:00',
        '2024-06-10 24:00:00',
        '2024-06-10 12:60:00',
        '2024-06-10T00:00:00+25:00',
        '24-06-10 00:00:00',
        '2024-06-10 00:00:00 extra',
      ]) {
        invalid(q({ startTm: bad }), 'startTm');
      }
    });

    it('an unreadable endTm is invalid', () => {
      invalid(q({ startTm: '2024-06-10 00:00:00', endTm: '2024-06-31 00:00:00' }), 'endTm');
    });

    it('endTm defaults to now', () => {
      assert.deepEqual(range(q({ startTm: '2024-06-10 00:00:00' })).end, NOW);
    });

    it('an endTm given to the second covers that whole second', () => {
      const r = range(q({ startTm: '2024-06-10T00:00:00Z', endTm: '2024-06-11T00:00:00Z' }));
      assert.deepEqual(r.end, new Date('2024-06-11T00:00:00.999Z'));
      const exact = range(q({ startTm: '2024-06-10T00:00:00Z', endTm: '2024-06-11T00:00:00.250Z' }));
      assert.deepEqual(exact.end, new Date('2024-06-11T00:00:00.250Z'));
    });

    it('end before start is invalid: endTm when given, startTm when end defaulted to now', () => {
      invalid(q({ startTm: '2024-06-10T00:00:01Z', endTm: '2024-06-10T00:00:00Z' }), 'endTm');
      invalid(q({ startTm: '2024-06-16T00:00:00Z' }), 'startTm');
      assert.ok(q({ startTm: '2024-06-10T00:00:00Z', endTm: '2024-06-10T00:00:00Z' }).ok);
    });

    it('a span over 100 days is invalid; exactly 100 days is fine', () => {
      const start = new Date('2024-01-01T00:00:00Z');
      const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');
      assert.ok(q({ startTm: iso(start.getTime()), endTm: iso(start.getTime() + 100 * DAY) }).ok);
      invalid(q({ startTm: iso(start.getTime()), endTm: iso(start.getTime() + 100 * DAY + 1000) }), 'endTm');
      invalid(q({ startTm: iso(NOW.getTime() - 100 * DAY - 1000) }), 'startTm');
      assert.ok(q({ startTm: iso(NOW.getTime() - 100 * DAY) }).ok);
    });

    it('parseQueryTime reports whether a whole second was named', () => {
      assert.equal(parseQueryTime('2024-06-10 00:00:00')!.wholeSecond, true);
      assert.equal(parseQueryTime('2024-06-10T00:00:00.5Z')!.wholeSecond, false);
      assert.deepEqual(parseQueryTime('2024-06-10T00:00:00.5Z')!.at, new Date('2024-06-10T00:00:00.500Z'));
      assert.equal(parseQueryTime('2024-06-10'), null);
    });
  });

  describe('filters and paging', () => {
    const START = { startTm: '2024-06-10 00:00:00' };

    it('appId becomes a filter; an absurdly long one is invalid', () => {
      assert.equal(range(q({ ...START, appId: 'demo' })).appIdFilter, 'demo');
      assert.equal('appIdFilter' in range(q(START)), false);
      invalid(q({ ...START, appId: 'a'.repeat(129) }), 'appId');
    });

    it('simNo is normalised; characters the open call refuses are invalid', () => {
      assert.equal(range(q({ ...START, simNo: '013800001111' })).simNo, '13800001111');
      assert.equal(range(q({ ...START, simNo: 'ab-01' })).simNo, 'ab-01');
      invalid(q({ ...START, simNo: '138/0000' }), 'simNo');
      invalid(q({ ...START, simNo: '1'.repeat(21) }), 'simNo');
    });

    it('__page counts from 1 (default 1)', () => {
      assert.equal(range(q(START)).page, 1);
      assert.equal(range(q({ ...START, __page: '500' })).page, 500);
      for (const bad of ['0', '-1', '1.5', 'abc', ' 2', '1e3']) invalid(q({ ...START, __page: bad }), '__page');
    });

    it('__limit is 1..2000 (default 20)', () => {
      assert.equal(range(q(START)).limit, 20);
      assert.equal(range(q({ ...START, __limit: '1' })).limit, 1);
      assert.equal(range(q({ ...START, __limit: '2000' })).limit, 2000);
      for (const bad of ['0', '2001', '-5', 'ten']) invalid(q({ ...START, __limit: bad }), '__limit');
    });

    it('reports the first bad field in order: reqId/startTm/endTm, appId, simNo, __page, __limit', () => {
      invalid(q({ startTm: 'x', endTm: 'y', simNo: '/', __page: '0', __limit: '0' }), 'startTm');
      invalid(q({ ...START, endTm: 'y', appId: 'a'.repeat(200), __limit: '0' }), 'endTm');
      invalid(q({ ...START, appId: 'a'.repeat(200), simNo: '/', __page: '0' }), 'appId');
      invalid(q({ ...START, simNo: '/', __page: '0', __limit: '0' }), 'simNo');
      invalid(q({ ...START, __page: '0', __limit: '0' }), '__page');
      invalid(q({ reqId: 'H2ssGFUHHchafxX2x1Bniw', __limit: '9999' }), '__limit');
    });
  });
});
