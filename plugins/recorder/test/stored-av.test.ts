import assert from 'node:assert/strict';
import type { StoredRecord } from '../src/catalog';
import { recordFileUrl, toStoredAv } from '../src/stored-av';

const rec = (over: Partial<StoredRecord> = {}): StoredRecord => ({
  reqId: 'H2ssGFUHHchafxX2x1Bniw',
  appId: 'demo',
  simNo: '13800001111',
  chan: 2,
  live: true,
  reqTm: new Date('2024-04-30T16:30:05.678Z'),
  path: '2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
  ext: 'flv',
  sz: 5_000_000_123,
  mediaTyp: 'av',
  state: 'done',
  endTm: new Date('2024-04-30T17:00:00Z'),
  error: null,
  apiBase: null,
  ...over,
});

describe('StoredAv JSON', () => {
  it("carries exactly the spec fields in the spec order, reqTm with the server zone's numeric offset", () => {
    const av = toStoredAv(rec(), 'http://gw.example:7080', { timeZone: 'Asia/Shanghai' });
    assert.equal(
      JSON.stringify(av),
      JSON.stringify({
        reqId: 'H2ssGFUHHchafxX2x1Bniw',
        reqTm: '2024-05-01T00:30:05+08:00',
        appId: 'demo',
        simNo: '13800001111',
        chan: 2,
        live: true,
        path: '2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
        ext: 'flv',
        sz: 5000000123,
        url: 'http://gw.example:7080/strm/record/file/2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
        mediaTyp: 'av',
      }),
    );
  });

  it('omits mediaTyp when the type was not recognised, and leaves out catalog-only fields', () => {
    const av = toStoredAv(rec({ mediaTyp: null, live: false }), 'http://h', { timeZone: 'UTC' });
    assert.equal('mediaTyp' in av, false);
    assert.equal(av.live, false);
    assert.deepEqual(Object.keys(av), ['reqId', 'reqTm', 'appId', 'simNo', 'chan', 'live', 'path', 'ext', 'sz', 'url']);
  });

  it('writes negative and non-whole-hour offsets, and follows daylight saving', () => {
    const at = (iso: string, tz: string): string => toStoredAv(rec({ reqTm: new Date(iso) }), 'http://h', { timeZone: tz }).reqTm;
    assert.equal(at('2024-07-01T12:00:00Z', 'America/New_York'), '2024-07-01T08:00:00-04:00');
    assert.equal(at('2024-01-01T12:00:00Z', 'America/New_York'), '2024-01-01T07:00:00-05:00');
    assert.equal(at('2024-01-01T12:00:00Z', 'Asia/Kolkata'), '2024-01-01T17:30:00+05:30');
    assert.equal(at('2024-01-01T12:00:00Z', 'America/St_Johns'), '2024-01-01T08:30:00-03:30');
    assert.equal(at('2024-01-01T12:00:00Z', 'UTC'), '2024-01-01T12:00:00+00:00');
  });

  it('by default uses the process zone, and the text names the same instant (to the second)', () => {
    const r = rec();
    const av = toStoredAv(r, 'http://h');
    assert.match(av.reqTm, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/);
    assert.equal(Date.parse(av.reqTm), Math.floor(r.reqTm.getTime() / 1000) * 1000);
  });

  it("the url names the node that recorded the row; a row without one takes the given (querying node's) apiBase", () => {
    assert.equal(
      toStoredAv(rec({ apiBase: 'http://node-b:7080' }), 'http://node-c:7080').url,
      'http://node-b:7080/strm/record/file/2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
    );
    assert.equal(
      toStoredAv(rec({ apiBase: null }), 'http://node-c:7080').url,
      'http://node-c:7080/strm/record/file/2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
    );
  });

  it('builds url from the API base without doubling slashes', () => {
    assert.equal(recordFileUrl('https://gw/api/', '2024/05/1/abc.flv'), 'https://gw/api/strm/record/file/2024/05/1/abc.flv');
    assert.equal(recordFileUrl('https://gw', '2024/05/1/a$b~c.flv'), 'https://gw/strm/record/file/2024/05/1/a$b~c.flv');
  });
});
