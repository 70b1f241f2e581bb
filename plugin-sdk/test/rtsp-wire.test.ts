import assert from 'node:assert/strict';
import { RtspReader, cseqOf, parseSessionHeader, parseTransports, serializeRequest, serializeResponse, type RtspItem } from '../rtsp';

const show = (items: RtspItem[]): string[] =>
  items.map((i) => {
    switch (i.kind) {
      case 'request':
        return `req ${i.request.method} ${i.request.headers.get('cseq')}`;
      case 'response':
        return `res ${i.response.status} ${i.response.headers.get('cseq')} ${i.response.body.toString()}`;
      case 'interleaved':
        return `$${i.channel}:${i.data.length}`;
      case 'error':
        return `error ${i.status}`;
      case 'skipped':
        return 'skipped';
    }
  });

describe('SDK RTSP wire module (shared by rtsp-out and rtsp-source)', () => {
  const junkThenResponse = Buffer.concat([Buffer.from('\x01\x02garbage'), Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 4\r\nContent-Length: 2\r\n\r\nok')]);

  it('strict (a server reading clients) answers the first malformed message and reads nothing after it', () => {
    const r = new RtspReader({ mode: 'strict', requestsOnly: true });
    assert.deepEqual(show(r.push(junkThenResponse)), ['error 400']);
    assert.deepEqual(r.push(Buffer.from('OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n')), []);
    assert.deepEqual(show(new RtspReader({ mode: 'strict', requestsOnly: true }).push(Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n'))), ['error 400']);
    assert.deepEqual(show(new RtspReader({ mode: 'strict' }).push(Buffer.from('GET /x HTTP/1.1\r\nHost: a\r\n\r\n'))), ['error 505']);
    assert.deepEqual(
      show(new RtspReader({ mode: 'strict', maxBodyBytes: 4 }).push(Buffer.from('SET_PARAMETER * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: 5\r\n\r\n'))),
      ['error 413'],
    );
  });

  it('resync (a client reading a camera) skips what is no message and goes on, a byte at a time too', () => {
    const all = Buffer.concat([
      junkThenResponse,
      Buffer.from([0x24, 1, 0, 2, 7, 7]),
      Buffer.from('NOT A START LINE\r\n\r\n'),
      Buffer.from('GET_PARAMETER rtsp://cam/ RTSP/1.0\r\nCSeq: 5\r\n\r\n'),
    ]);
    const whole = show(new RtspReader({ mode: 'resync' }).push(all)).filter((x) => x !== 'skipped');
    assert.deepEqual(whole, ['res 200 4 ok', '$1:2', 'req GET_PARAMETER 5']);
    const r = new RtspReader({ mode: 'resync' });
    const got: RtspItem[] = [];
    for (let i = 0; i < all.length; i++) got.push(...r.push(all.subarray(i, i + 1)));
    assert.deepEqual(
      show(got).filter((x) => x !== 'skipped'),
      whole,
    );
    assert.ok(got.some((x) => x.kind === 'skipped'));
    assert.equal(r.buffered, 0);
  });

  it('resync is linear on a hostile stream (64 KiB runs of capitals, no line end)', () => {
    const r = new RtspReader({ mode: 'resync' });
    const junk = Buffer.alloc(256 * 1024, 0x41);
    let skipped = 0;
    for (let i = 0; i < junk.length; i += 8192) skipped += r.push(junk.subarray(i, i + 8192)).filter((x) => x.kind === 'skipped').length;
    assert.ok(skipped >= 1 && skipped < 64, `skipped ${skipped} times`);
    assert.ok(r.buffered <= 64 * 1024);
    assert.deepEqual(
      show(r.push(Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n'))).filter((x) => x !== 'skipped'),
      ['res 200 1 '],
    );
  });

  it('keeps every value of a repeated header and folds continuation lines', () => {
    const [it] = new RtspReader({ mode: 'resync' }).push(
      Buffer.from('RTSP/1.0 401 Unauthorized\r\nCSeq: 2\r\nWWW-Authenticate: Basic realm="a"\r\nWWW-Authenticate: Digest realm="a",\r\n nonce="n"\r\n\r\n'),
    );
    assert.equal(it.kind, 'response');
    if (it.kind !== 'response') return;
    assert.deepEqual(it.response.headers.all('www-authenticate'), ['Basic realm="a"', 'Digest realm="a", nonce="n"']);
    assert.equal(it.response.headers.get('WWW-Authenticate'), 'Basic realm="a"');
  });

  it('never writes a line a peer or a URL could inject', () => {
    const [it] = new RtspReader({ mode: 'resync' }).push(Buffer.from('OPTIONS * RTSP/1.0\r\nCSeq: 1 Injected: yes\r\n\r\n'));
    assert.equal(it.kind === 'request' ? cseqOf(it.request) : 'x', undefined);
    assert.doesNotMatch(
      serializeResponse(200, [
        ['CSeq', '1'],
        ['X', 'a\r\nInjected: yes'],
      ]).toString(),
      /Injected/,
    );
    assert.throws(() => serializeRequest('DESCRIBE', 'rtsp://cam/a b', []), /whitespace/);
    assert.equal(
      serializeRequest('SET_PARAMETER', 'rtsp://cam/', [['CSeq', '3']], 'a: b\r\n').toString(),
      'SET_PARAMETER rtsp://cam/ RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 6\r\n\r\na: b\r\n',
    );
  });

  it('reads Transport (server_port of an answer too) and Session', () => {
    assert.deepEqual(parseTransports('RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971'), [
      { lower: 'udp', multicast: false, record: false, clientPort: [5000, 5001], serverPort: [6970, 6971] },
    ]);
    assert.deepEqual(parseSessionHeader('ABCD1234;timeout=65'), { id: 'ABCD1234', timeoutSec: 65 });
    assert.equal(parseSessionHeader(';timeout=1'), undefined);
  });
});
