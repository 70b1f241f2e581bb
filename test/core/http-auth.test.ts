import assert from 'node:assert/strict';
import * as net from 'node:net';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';
import { videoUnit } from '../../plugin-sdk/media';
import { kernelOf } from '../support/kernel-of';

describe('HTTP API: auth, envelope, limits', () => {
  let gw: TestGateway;
  before(async () => {
    const stub = stubMediaPlugin();
    gw = await startTestGateway({ plugins: [{ name: stub.name, def: stub.def }], captureLogs: true });
  });
  after(() => gw.stop());

  const open = { user: { token: 't1' }, typ: 'live', simNo: '13800138000', chanId: 1 };

  for (const [title, auth] of [
    ['no Authorization header', null],
    ['wrong password', 'demo:nope'],
    ['unknown user', 'mallory:demo'],
  ] as const) {
    it(`401 with WWW-Authenticate and -9: ${title}`, async () => {
      const r = await gw.api('POST', '/strm/open', open, auth);
      assert.equal(r.status, 401);
      assert.match(r.headers.get('www-authenticate') ?? '', /^Basic /);
      assert.equal(r.json.errCode, -9);
      assert.equal(r.json.data, undefined);
    });
  }

  it('401 for malformed Authorization headers', async () => {
    for (const h of ['Bearer abc', 'Basic', 'Basic !!!', 'Basic ' + Buffer.from('nocolon').toString('base64')]) {
      const res = await fetch(gw.baseUrl + '/strm/status', { headers: { authorization: h } });
      assert.equal(res.status, 401, h);
      assert.equal(((await res.json()) as { errCode: number }).errCode, -9);
    }
  });

  it('logs the failure reason, never the password', async () => {
    await gw.api('GET', '/strm/status', undefined, 'demo:s3cr3t-pass');
    const line = gw.logs.find((l) => l.msg === 'authentication failed' && l.reason === 'bad-password');
    assert.ok(line, 'a log line names the reason');
    assert.ok(!gw.logText().includes('s3cr3t-pass'));
  });

  it('GET /healthz needs no credentials', async () => {
    const res = await fetch(gw.baseUrl + '/healthz');
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { status: string }).status, 'ok');
  });

  it('GET /metrics is Prometheus text with process metrics', async () => {
    const text = await (await fetch(gw.baseUrl + '/metrics')).text();
    assert.match(text, /^# HELP gw_process_/m);
    assert.match(text, /gw_core_requests_open /);
  });

  it('GET /metrics says how much frame payload the bus holds, in GOP caches and in queues of readers that cannot take it', async () => {
    const held = async () => {
      const text = await (await fetch(gw.baseUrl + '/metrics')).text();
      const of = (holder: string) => Number(new RegExp(`^gw_core_bus_held_bytes\\{holder="${holder}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
      return { gop: of('gop'), queue: of('queue'), streams: Number(/^gw_core_bus_streams (\d+)$/m.exec(text)?.[1]) };
    };
    const before = await held();
    const s = kernelOf(gw).bus.create('held-bytes-test', 'test');
    const pub = s.attachPublisher();
    const push = (dts: number, keyframe: boolean, size: number) => pub.push(videoUnit({ codec: 'h264', dts, keyframe, payload: Buffer.alloc(size) }));
    push(0, true, 5000);
    push(40, false, 1000);
    s.subscribe({ write: () => undefined, writable: () => false });
    push(80, false, 700);
    const during = await held();
    assert.equal(during.streams, before.streams + 1);
    assert.equal(during.gop - before.gop, 6700);
    // the reader joined at the keyframe and took nothing: the GOP and the unit after it wait in its queue
    assert.equal(during.queue - before.queue, 6700);
    s.close('test over');
    assert.deepEqual(await held(), before);
  });

  it('GET /metrics counts streams whose payload memory is not reused, by the reader that keeps it so; the log names it once', async () => {
    const off = async () => {
      const text = await (await fetch(gw.baseUrl + '/metrics')).text();
      assert.match(text, /^# TYPE gw_core_bus_payload_reuse_off_streams gauge$/m);
      return [...text.matchAll(/^gw_core_bus_payload_reuse_off_streams\{reader="([^"]*)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]).sort();
    };
    assert.deepEqual(await off(), []);
    const streams = ['reuse-off-a', 'reuse-off-b'].map((name) => {
      const s = kernelOf(gw).bus.create(name, 'test');
      const pub = s.attachPublisher();
      pub.push(videoUnit({ codec: 'h264', dts: 0, keyframe: true, payload: pub.alloc(1000) }));
      return s;
    });
    // a sink with no holdsPayloads: taken to hold everything it gets
    streams[0].subscribe({ write: () => undefined }, { reader: 'metrics test keeper' });
    streams[1].subscribe({ write: () => undefined });
    assert.deepEqual(await off(), [
      ['http-auth.test', 1],
      ['metrics test keeper', 1],
    ]);
    const lines = gw.logs.filter((l) => String(l.msg).startsWith('payload memory of this stream is not reused'));
    assert.deepEqual(
      lines.map((l) => [l.stream, l.reader]),
      [
        ['reuse-off-a', 'metrics test keeper'],
        ['reuse-off-b', 'http-auth.test'],
      ],
    );
    for (const s of streams) s.close('test over');
    assert.deepEqual(await off(), [], 'a reader that is gone is no longer a label');
  });

  it('unknown route: 404, errCode -8', async () => {
    const r = await gw.api('GET', '/strm/nothing-here');
    assert.equal(r.status, 404);
    assert.equal(r.json.errCode, -8);
  });

  it('unparseable JSON: 400, errCode -13; non-object JSON too', async () => {
    for (const body of ['{"user":', '[1,2]', '42']) {
      const r = await gw.api('POST', '/strm/open', body);
      assert.equal(r.status, 400, body);
      assert.equal(r.json.errCode, -13);
    }
  });

  it('body over 64 KiB: 413', async () => {
    const r = await gw.api('POST', '/strm/open', { ...open, pad: 'x'.repeat(70 * 1024) });
    assert.equal(r.status, 413);
  });

  it('413 also when the body streams without Content-Length', async () => {
    const port = gw.ports['gateway.httpPort'];
    const reply = await new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.write(
          'POST /strm/open HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ZGVtbzpkZW1v\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
        );
        const chunk = 'y'.repeat(16 * 1024);
        for (let i = 0; i < 6; i++) s.write(chunk.length.toString(16) + '\r\n' + chunk + '\r\n');
      });
      let got = '';
      s.on('data', (d) => {
        got += d.toString();
      });
      s.on('close', () => resolve(got));
      s.on('error', () => resolve(got));
    });
    assert.match(reply, /^HTTP\/1\.1 413/);
  });

  it('replies never contain a stack trace', async () => {
    const r = await gw.api('POST', '/strm/keep', { reqIds: 'not-an-array' });
    assert.equal(r.json.errCode, -7);
    assert.ok(!/at .*\(.*:\d+:\d+\)/.test(JSON.stringify(r.json)));
  });
});
