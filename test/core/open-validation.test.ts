import assert from 'node:assert/strict';
import { definePlugin } from '../../plugin-sdk';
import { parseCallbackUrl } from '../../plugin-sdk/callback-url';
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

  it('rtspSrc on a site without an RTSP ingest names rtspSrc at rule 10: after every earlier bad field, before keepIntv', async () => {
    const rtspSrc = { url: 'rtsp://cam.example.com/stream' };
    const r = await gw.api('POST', '/strm/open', { ...valid(), rtspSrc, keepIntv: 1 });
    // no rtsp-source plugin here: the site is named as the reason, on the rtspSrc field
    assert.equal(r.json.errCode, -7);
    assert.match(r.json.message, /`rtspSrc`\. No ingest plugin on this site serves it\./);
    await expectInvalid({ ...valid(), simNo: 'bad/sim', rtspSrc }, 'simNo');
    await expectInvalid({ ...valid(), chanId: 0, rtspSrc }, 'chanId');
    await expectInvalid({ ...valid(), fmt: 1, rtspSrc }, 'fmt');
    await expectInvalid({ ...valid(), scheme: 'rtsp', rtspSrc }, 'scheme');
    await expectInvalid({ ...valid(), audioCfg: { sampleRate: 1, channels: 1 }, rtspSrc }, 'audioCfg.sampleRate');
    await expectInvalid({ ...valid(), rtspSrc: { url: 'http://x' } }, 'rtspSrc');
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

  it('reports the first bad field in the rule order for the later rules too: subFmt, scheme, audioCfg, rtspSrc, keepIntv, record', async () => {
    const steps: Array<[string, Record<string, unknown>]> = [
      ['subFmt', { subFmt: 'fmp4' }],
      ['scheme', { scheme: 'rtsp' }],
      ['audioCfg.sampleRate', { audioCfg: { sampleRate: 16000, channels: 1 } }],
      ['rtspSrc', { rtspSrc: { url: 'rtsp://cam.example.com/s' } }],
      ['keepIntv', { keepIntv: 1 }],
      ['record', { record: 'yes' }],
    ];
    // all bad at once; each round removes the field reported, and the next one in the rule order must come up
    const body: Record<string, unknown> = { ...valid(), ...Object.assign({}, ...steps.map(([, patch]) => patch)) };
    for (const [field, patch] of steps) {
      await expectInvalid(body, field);
      for (const k of Object.keys(patch)) delete body[k];
    }
    const r = await gw.api('POST', '/strm/open', body);
    assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
    await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] });
  });

  describe('cb: refused at open exactly when the callback notifier could not use it', () => {
    const refused: Array<[string, unknown, RegExp]> = [
      ['a raw trailing ?', 'http://cb.example.com/base?', /must not contain a query/],
      ['a query', 'http://cb.example.com/base?k=v', /must not contain a query/],
      ['a fragment', 'http://cb.example.com/base#f', /must not contain a fragment/],
      ['an empty fragment', 'http://cb.example.com/base#', /must not contain a fragment/],
      ['a leading blank', ' http://cb.example.com/base', /spaces or control characters/],
      ['a trailing blank', 'http://cb.example.com/base ', /spaces or control characters/],
      ['a trailing newline', 'http://cb.example.com/base\n', /spaces or control characters/],
      ['a tab in the host', 'http://cb.exa\tmple.com/base', /spaces or control characters/],
      ['a space in the path', 'http://cb.example.com/my base', /spaces or control characters/],
      ['a control character', 'http://cb.example.com/ba\u0001se', /spaces or control characters/],
      ['a DEL character', 'http://cb.example.com/base\u007f', /spaces or control characters/],
      ['a space in the user info', 'http://u:p w@cb.example.com/base', /spaces or control characters/],
      ['bad percent-encoding in the password', 'http://u:p%zz@cb.example.com/base', /not valid percent-encoding/],
      ['bad percent-encoding in the user', 'http://u%zz:p@cb.example.com/base', /not valid percent-encoding/],
      ['a colon in the user name', 'http://a%3Ab:p@cb.example.com/base', /user name must not contain a colon/],
      ['another scheme', 'ftp://cb.example.com/base', /scheme must be http or https, not ftp/],
      ['no scheme', 'cb.example.com/base', /not a valid absolute URL/],
      ['the empty string', '', /non-empty string/],
      ['a number', 42, /non-empty string/],
      ['more than 2048 characters', 'http://cb.example.com/' + 'a'.repeat(2048), /longer than 2048 characters/],
    ];
    for (const [title, cb, why] of refused) {
      it(`${title} -> -7 naming cb, saying why, never quoting it`, async () => {
        const r = await gw.api('POST', '/strm/open', { ...valid(), cb });
        assert.equal(r.json.errCode, -7, JSON.stringify(r.json));
        assert.match(r.json.message, /^Invalid parameter `cb`\. The cb /);
        assert.match(r.json.message, why);
        if (typeof cb === 'string' && cb.length > 0) assert.ok(!r.json.message.includes(cb.trim()), 'the message does not echo the cb');
        // the notifier's parser says the same: the open refuses nothing it would deliver to
        assert.equal(parseCallbackUrl(cb).ok, false);
      });
    }

    it('accepts what the notifier delivers to: credentials, IPv6 literals, ports, trailing slashes', async () => {
      for (const cb of ['https://us%40er:p%3Ass@cb.example.com:8443/base/', 'http://[::1]:8080/x', 'http://alice@10.1.2.3/notify', 'http://cb.example.com']) {
        assert.equal(parseCallbackUrl(cb).ok, true, cb);
        const r = await gw.api('POST', '/strm/open', { ...valid(), chanId: 9, cb });
        assert.equal(r.json.errCode, 0, `${cb}: ${JSON.stringify(r.json)}`);
        await gw.api('POST', '/strm/close', { reqIds: [r.json.data[0].reqId] });
      }
    });
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

describe('POST /strm/open validation of rtspSrc on a site with an RTSP ingest (rule 10)', () => {
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin({ fmts: [0] });
    // what an RTSP-pulling ingest registers; it pulls nothing here, the open result is all this test reads
    const rtspIngest = definePlugin({
      name: 'rtsp-stub',
      setup(ctx) {
        ctx.sessions.registerIngest({
          name: 'rtsp-stub',
          source: 'rtsp',
          pushAddress: () => ({ host: ctx.site.publicHost, port: 0, tcp: true, port2019: 0, tcp2019: true }),
        });
      },
    });
    gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'rtsp-stub', def: rtspIngest },
      ],
    });
  });
  after(() => gw.stop());

  async function openWith(
    rtspSrc: unknown,
    extra: Record<string, unknown> = {},
  ): Promise<{ errCode: number; message: string; data?: Array<Record<string, unknown>> }> {
    const r = await gw.api('POST', '/strm/open', { ...valid(), rtspSrc, ...extra });
    assert.equal(r.status, 200);
    return r.json;
  }

  for (const [title, rtspSrc] of [
    ['url missing', {}],
    ['url empty', { url: '' }],
    ['url not a string', { url: 42 }],
    ['rtspSrc not an object', 'rtsp://cam.example.com/s'],
    ['an http:// url', { url: 'http://cam.example.com/stream' }],
    ['an https:// url', { url: 'https://cam.example.com/stream' }],
    ['no host', { url: 'rtsp:///stream' }],
  ] as Array<[string, unknown]>) {
    it(`${title} -> -7 naming rtspSrc.url`, async () => {
      const j = await openWith(rtspSrc);
      assert.equal(j.errCode, -7, JSON.stringify(j));
      assert.match(j.message, /`rtspSrc\.url`/);
    });
  }

  it('names fields of earlier rules first, and rtspSrc.url before keepIntv and record', async () => {
    const bad = { url: 'http://cam.example.com/stream' };
    for (const [extra, field] of [
      [{ simNo: 'bad/sim' }, 'simNo'],
      [{ scheme: 'rtsp' }, 'scheme'],
      [{ audioCfg: { sampleRate: 8000, channels: 7 } }, 'audioCfg.channels'],
      [{ keepIntv: 1, record: 'yes' }, 'rtspSrc.url'],
    ] as Array<[Record<string, unknown>, string]>) {
      const j = await openWith(bad, extra);
      assert.equal(j.errCode, -7, JSON.stringify(j));
      assert.ok(j.message.includes('`' + field + '`'), `expected ${field} in ${j.message}`);
    }
    const j = await openWith({ url: 'rtsp://cam.example.com/s' }, { keepIntv: 1 });
    assert.match(j.message, /`keepIntv`/);
  });

  it('accepts rtsp:// and rtsps:// urls, with credentials beside them', async () => {
    for (const [i, rtspSrc] of [
      { url: 'rtsp://cam.example.com:554/stream1' },
      { url: 'rtsps://cam.example.com/stream1', user: 'admin', pwd: 'secret' },
      { url: 'RTSP://10.0.0.7/ch1' },
    ].entries()) {
      const j = await openWith(rtspSrc, { chanId: i + 1 });
      assert.equal(j.errCode, 0, `${JSON.stringify(rtspSrc)}: ${JSON.stringify(j)}`);
      await gw.api('POST', '/strm/close', { reqIds: [j.data![0].reqId] });
    }
  });

  it('rtspSrc user and pwd must be strings', async () => {
    assert.match((await openWith({ url: 'rtsp://cam.example.com/s', user: 1 })).message, /`rtspSrc\.user`/);
    assert.match((await openWith({ url: 'rtsp://cam.example.com/s', pwd: {} })).message, /`rtspSrc\.pwd`/);
  });

  it('rtspSrc.transport is auto, tcp or udp when given (null: absent); anything else -7 naming it', async () => {
    for (const transport of ['quic', 'UDP', 1, '']) {
      const j = await openWith({ url: 'rtsp://cam.example.com/s', transport });
      assert.equal(j.errCode, -7, JSON.stringify(j));
      assert.match(j.message, /`rtspSrc\.transport`\. Use auto, tcp or udp\./);
    }
    for (const [i, transport] of ['auto', 'tcp', 'udp', null].entries()) {
      const j = await openWith({ url: 'rtsp://cam.example.com/s', transport }, { chanId: 10 + i });
      assert.equal(j.errCode, 0, `${transport}: ${JSON.stringify(j)}`);
      await gw.api('POST', '/strm/close', { reqIds: [j.data![0].reqId] });
    }
  });
});
