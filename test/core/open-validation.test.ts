import assert from 'node:assert/strict';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';

const valid = () => ({ user: { token: 't1' }, typ: 'live', simNo: '013800138000', chanId: 1 });

describe('POST /strm/open validation (decisions.md order, -7 naming the first bad field)', () => {
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [0] });
    gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }] });
  });
  after(() => gw.stop());

  async function expectInvalid(body: Record<string, unknown>, field: string): Promise<void> {
    const r = await gw.api('POST', '/strm/open', body);
    assert.equal(r.status, 200);
    assert.equal(r.json.errCode, -7, JSON.stringify(r.json));
    assert.match(r.json.message, new RegExp('`' + field.replace('.', '\\.') + '`'), `expected ${field} in ${r.json.message}`);
  }

  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['reqId too short', { reqId: 'abc' }, 'reqId'],
    ['reqId too long', { reqId: 'a'.repeat(41) }, 'reqId'],
    ['reqId bad character', { reqId: 'abcdefgh/' }, 'reqId'],
    ['reqId not a string', { reqId: 12345678 }, 'reqId'],
    ['user missing', { user: undefined }, 'user.token'],
    ['user.token empty', { user: { token: '' } }, 'user.token'],
    ['typ unknown', { typ: 'vod' }, 'typ'],
    ['simNo missing', { simNo: undefined }, 'simNo'],
    ['simNo too long', { simNo: '1'.repeat(21) }, 'simNo'],
    ['simNo bad character', { simNo: '1380/0138' }, 'simNo'],
    ['chanId 0', { chanId: 0 }, 'chanId'],
    ['chanId 256', { chanId: 256 }, 'chanId'],
    ['chanId not integer', { chanId: 1.5 }, 'chanId'],
    ['dataTyp 4 unsupported for live', { dataTyp: 4 }, 'dataTyp'],
    ['dataTyp 5 unsupported for live', { dataTyp: 5 }, 'dataTyp'],
    ['dataTyp 3 for replay', { typ: 'replay', dataTyp: 3 }, 'dataTyp'],
    ['codeStrm 2', { codeStrm: 2 }, 'codeStrm'],
    ['fmt 2', { fmt: 2 }, 'fmt'],
    ['fmt 1 without an HLS plugin on the site', { fmt: 1 }, 'fmt'],
    ['subFmt with fmt 0', { subFmt: 'fmp4' }, 'subFmt'],
    ['scheme rtsp with fmt 0', { scheme: 'rtsp' }, 'scheme'],
    ['scheme unknown', { scheme: 'ftp' }, 'scheme'],
    ['audioCfg.sampleRate', { audioCfg: { sampleRate: 16000, channels: 1 } }, 'audioCfg.sampleRate'],
    ['audioCfg.channels', { audioCfg: { sampleRate: 8000, channels: 7 } }, 'audioCfg.channels'],
    ['keepIntv 14', { keepIntv: 14 }, 'keepIntv'],
    ['keepIntv 601', { keepIntv: 601 }, 'keepIntv'],
    ['cb not a URL', { cb: 'not a url' }, 'cb'],
    ['exclusive not boolean', { exclusive: 'yes' }, 'exclusive'],
  ];
  for (const [title, patch, field] of cases) {
    it(`${title} -> ${field}`, async () => {
      const body: Record<string, unknown> = { ...valid(), ...patch };
      for (const k of Object.keys(patch)) if (patch[k] === undefined) delete body[k];
      await expectInvalid(body, field);
    });
  }

  it('rtspSrc.url must be rtsp:// (checked before keepIntv)', async () => {
    const stub = await gw.api('POST', '/strm/open', { ...valid(), rtspSrc: { url: 'http://x' }, keepIntv: 1 });
    // no rtsp-source plugin here: the site is named as the reason, on the rtspSrc field
    assert.equal(stub.json.errCode, -7);
    assert.match(stub.json.message, /`rtspSrc`/);
  });

  it('record only with fmt 0: a record flag with fmt 4 names fmt first when no RTSP output exists', async () => {
    await expectInvalid({ ...valid(), fmt: 4, record: true }, 'fmt');
  });

  it('reports the first bad field when several are bad, in the rule order', async () => {
    const all = { reqId: 'x', user: {}, typ: 'bad', simNo: '', chanId: 0, dataTyp: 9, codeStrm: 9, fmt: 9, keepIntv: 1 };
    await expectInvalid(all, 'reqId');
    const { reqId: _a, ...noReqId } = all;
    await expectInvalid(noReqId, 'user.token');
    await expectInvalid({ ...noReqId, user: { token: 't' } }, 'typ');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live' }, 'simNo');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live', simNo: '1' }, 'chanId');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live', simNo: '1', chanId: 1 }, 'dataTyp');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live', simNo: '1', chanId: 1, dataTyp: 0 }, 'codeStrm');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live', simNo: '1', chanId: 1, dataTyp: 0, codeStrm: 0 }, 'fmt');
    await expectInvalid({ ...noReqId, user: { token: 't' }, typ: 'live', simNo: '1', chanId: 1, dataTyp: 0, codeStrm: 0, fmt: 0 }, 'keepIntv');
  });

  it('a reqId in use is refused naming reqId', async () => {
    const ok = await gw.api('POST', '/strm/open', { ...valid(), reqId: 'my-req-0001' });
    assert.equal(ok.json.errCode, 0);
    await expectInvalid({ ...valid(), reqId: 'my-req-0001', chanId: 2 }, 'reqId');
    await gw.api('POST', '/strm/close', { reqIds: ['my-req-0001'] });
  });

  it('accepts channelId as an alias and answers a complete OpenStrmResult', async () => {
    const { chanId: _c, ...rest } = valid();
    const r = await gw.api('POST', '/strm/open', { ...rest, channelId: 3, dataTyp: 1, keepIntv: 30 });
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    assert.equal(r.json.count, 1);
    const d = r.json.data[0];
    assert.match(d.reqId, /^[A-Za-z0-9_-]{22}$/, 'generated reqId is 22 chars of base64url');
    assert.equal(d.ctrl, true);
    assert.equal(d.ready, false);
    assert.equal(d.mediaTyp, 'v');
    assert.equal(d.keepIntv, 30);
    assert.equal(d.host, '127.0.0.1');
    assert.deepEqual([d.port, d.tcp, d.port2019, d.tcp2019], [7612, true, 7613, true]);
    assert.match(d.playUrl, /\/live\/13800138000_3_1\?reqId=/);
    assert.equal('recording' in d, false);
    await gw.api('POST', '/strm/close', { reqIds: [d.reqId] });
  });

  it('hostile JSON: arrays, nulls and prototype keys are refused or ignored, never crash', async () => {
    for (const body of ['[]', 'null', '"x"', '{"__proto__":{"admin":true},"typ":"live"}', '{"user":{"token":{"$gt":""}}}']) {
      const r = await gw.api('POST', '/strm/open', body);
      assert.ok([-13, -7].includes(r.json.errCode), `${body} -> ${JSON.stringify(r.json)}`);
    }
  });
});
