/**
 * The parsing in the ingest-hls and rtsp benchmarks' readers (support/bench-hls-reader.ts, bench-rtsp-reader.ts):
 * HTTP responses off a raw socket, LL-HLS playlists as hls-out renders them, fMP4 init segments and fragments as
 * hls-out writes them, RTSP responses and interleaved frames, SDP as rtsp-out writes it, RTP sequence checks, and the
 * RTP timestamp alignment the RTSP readers' latency rests on. The gateway's own writers make the inputs where they
 * can, so a change on either side shows here rather than as odd benchmark figures.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import * as http from 'node:http';
import type * as net from 'node:net';
import { fmp4Fragment, fmp4Init } from '../../plugins/hls-out/src/fmp4';
import type { MuxSample, MuxTrack } from '../../plugins/hls-out/src/mux-types';
import { renderPlaylist } from '../../plugins/hls-out/src/playlist';
import type { HlsSegment, Segmenter } from '../../plugins/hls-out/src/segmenter';
import { buildSdp } from '../../plugins/rtsp-out/src/sdp';
import { fixturePath } from '../support/paths';
import {
  HttpConn,
  HttpResponseReader,
  bodyText,
  keptBody,
  nextDirective,
  parseAttributes,
  parseFragment,
  parseInit,
  parseMediaPlaylist,
  pickStart,
  resolveUri,
  sentAtOf,
  type HttpResponse,
} from './support/bench-hls-reader';
import {
  FRAME_HEAD,
  InterleavedReader,
  RtpSequence,
  alignRtp,
  isIdr,
  keyframeTest,
  parseRtpInfo,
  parseSdp,
  resolveControl,
  type ReadFrame,
  type RtspResponse,
} from './support/bench-rtsp-reader';
import { SENT_RING, synthesise } from './support/synth-terminals';

/** feeds `wire` in pieces of `step` bytes */
function feed(push: (b: Buffer) => void, wire: Buffer, step: number): void {
  for (let i = 0; i < wire.length; i += step) push(wire.subarray(i, i + step));
}

async function withServer(handler: http.RequestListener, fn: (port: number, sockets: Set<net.Socket>) => Promise<void>): Promise<void> {
  const server = http.createServer(handler);
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => sockets.add(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    await fn((server.address() as { port: number }).port, sockets);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
}

describe('bench readers: HTTP responses (HLS)', () => {
  it('reads Content-Length, chunked and empty responses back to back, however the bytes are cut', () => {
    const wire = Buffer.from(
      'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello' +
        'HTTP/1.1 100 Continue\r\n\r\n' +
        'HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n' +
        'HTTP/1.1 204 No Content\r\n\r\n' +
        'HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
      'latin1',
    );
    for (const step of [wire.length, 13, 7, 2, 1]) {
      const got: HttpResponse[] = [];
      const r = new HttpResponseReader((x) => got.push(x));
      feed((b) => r.push(b), wire, step);
      r.end();
      assert.equal(r.error, undefined, `step ${step}`);
      assert.deepEqual(
        got.map((x) => [x.status, bodyText(x)]),
        [
          [200, 'hello'],
          [404, 'abc0123456789'],
          [204, ''],
          [200, ''],
        ],
        `step ${step}`,
      );
      assert.equal(got[3].headers.get('connection'), 'close');
    }
  });

  it('reads a body that runs to the end of the connection, and fails on what is not HTTP or ends early', () => {
    const got: HttpResponse[] = [];
    const r = new HttpResponseReader((x) => got.push(x));
    r.push(Buffer.from('HTTP/1.1 200 OK\r\n\r\nto the'));
    r.push(Buffer.from(' end'));
    assert.equal(got.length, 0);
    r.end();
    assert.equal(bodyText(got[0]), 'to the end');

    const bad = new HttpResponseReader(() => assert.fail('no response expected'));
    bad.push(Buffer.from('RTSP/1.0 200 OK\r\n\r\n'));
    assert.match(bad.error ?? '', /bad status line/);

    const chunk = new HttpResponseReader(() => assert.fail('no response expected'));
    chunk.push(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'));
    assert.match(chunk.error ?? '', /bad chunk size/);

    const short = new HttpResponseReader(() => assert.fail('no response expected'));
    short.push(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
    short.end();
    assert.match(short.error ?? '', /closed in the middle/);
  });

  it('keeps nothing of a pushed chunk past the call, and of a body only the bytes asked for', () => {
    const body = Buffer.alloc(100_000, 0);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7 + (i >> 8)) & 0xff;
    const wire = Buffer.concat([
      Buffer.from(`HTTP/1.1 200 OK\r\nX-Long: ${'h'.repeat(300)}\r\nContent-Length: ${body.length}\r\n\r\n`, 'latin1'),
      body,
      Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n', 'latin1'),
    ]);
    for (const keep of [4096, Infinity]) {
      const got: HttpResponse[] = [];
      const r = new HttpResponseReader((x) => {
        got.push(x);
        r.keep = Infinity; // the next request's limit, as HttpConn sets it
      });
      r.keep = keep;
      // every push from one buffer, overwritten after each call (as sockets reading into a shared buffer do);
      // 97-byte steps cut the header block across pushes
      const shared = Buffer.alloc(97);
      for (let off = 0; off < wire.length; off += 97) {
        const n = wire.copy(shared, 0, off, off + 97);
        r.push(shared.subarray(0, n));
        shared.fill(0xee);
      }
      assert.equal(r.error, undefined);
      assert.equal(got.length, 2);
      assert.equal(got[0].headers.get('x-long'), 'h'.repeat(300));
      assert.equal(got[0].bodyBytes, body.length);
      const kept = keptBody(got[0]);
      assert.equal(kept.length, Math.min(keep, body.length), `keep ${keep}`);
      assert.ok(kept.equals(body.subarray(0, kept.length)), `keep ${keep}: the kept bytes are the body's first`);
      assert.equal(bodyText(got[1]), 'abc');
    }
    const notFound: HttpResponse[] = [];
    const short = new HttpResponseReader((x) => notFound.push(x));
    short.keep = 3;
    short.push(Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Length: 11\r\n\r\nno'));
    short.push(Buffer.from('t found!!'));
    assert.deepEqual([bodyText(notFound[0]), notFound[0].bodyBytes], ['not', 11], 'the text of what was kept, not padded to the length');
  });

  it('HttpConn keeps one connection alive across requests and opens another after Connection: close', async () => {
    let n = 0;
    await withServer(
      (req, res) => {
        n++;
        const body = `#${n} ${req.url}`;
        // the third answer closes its connection; the fourth request must come on a new one
        res.writeHead(200, { 'Content-Length': Buffer.byteLength(body), ...(n === 3 ? { Connection: 'close' } : {}) });
        if (n === 2) {
          res.write(body.slice(0, 2)); // a body in two writes
          setTimeout(() => res.end(body.slice(2)), 5);
        } else res.end(body);
      },
      async (port, sockets) => {
        const c = new HttpConn(port, `127.0.0.1:${port}`);
        try {
          const texts: string[] = [];
          for (const p of ['/a?x=1', '/b', '/c']) texts.push(bodyText(await c.get(p)));
          assert.deepEqual(texts, ['#1 /a?x=1', '#2 /b', '#3 /c']);
          assert.equal(sockets.size, 1, 'three requests on one keep-alive connection');
          assert.equal(bodyText(await c.get('/d')), '#4 /d');
          assert.equal(sockets.size, 2, 'a new connection after Connection: close');
          assert.ok(c.bytes > 4 * 20);
          const head = await c.get('/e', 3);
          assert.deepEqual([Buffer.concat(head.body).toString(), head.bodyBytes], ['#5 ', '#5 /e'.length]);
          await assert.rejects(Promise.all([c.get('/f'), c.get('/g')]), /already in flight/);
        } finally {
          c.close();
        }
        await assert.rejects(c.get('/h'), /closed/);
      },
    );
  });
});

// ------------------------------------------------------------------------------------------------------------

function hlsPart(
  index: number,
  duration: number,
  independent: boolean,
): { index: number; duration: number; independent: boolean; data: Buffer[]; bytes: number } {
  return { index, duration, independent, data: [], bytes: 0 };
}

function hlsSegment(msn: number, parts: number, complete: boolean, version = 0, discontinuity = false): HlsSegment {
  return {
    msn,
    parts: Array.from({ length: parts }, (_x, i) => hlsPart(i, i === 5 ? 0.32 : 0.333, i === 0)),
    duration: complete ? 1.985 : 0,
    bytes: 0,
    complete,
    discontinuity,
    init: { version, data: undefined },
    programDateTime: Date.UTC(2026, 0, 1, 0, 0, 2 * msn),
    startDts: 2000 * msn,
  };
}

/** just what renderPlaylist reads of a segmenter */
function fakeSegmenter(segments: HlsSegment[], current: HlsSegment | undefined): Segmenter {
  const s = {
    segments,
    current,
    discontinuitiesGone: 0,
    // the window as hls-out's listedFrom makes it of six 2 s segments at most
    listedFrom: Math.max(0, segments.length - 6),
    targetDuration: 2,
    partTarget: 0.333,
    audioOnly: false,
    get lastMsn() {
      return current?.msn ?? segments[segments.length - 1]?.msn ?? -1;
    },
  };
  return s as unknown as Segmenter;
}

describe('bench readers: LL-HLS playlists as hls-out renders them', () => {
  const query = '?reqId=r%201&token=t';

  it('reads segments, parts, maps, dates, server control and the hint; the next directive is the part after the last listed', () => {
    const segs = [10, 11, 12, 13, 14, 15, 16].map((m) => hlsSegment(m, 6, true, m >= 15 ? 1 : 0, m === 15));
    const text = renderPlaylist(fakeSegmenter(segs, hlsSegment(17, 2, false, 1)), { container: 'fmp4', lowLatency: true, query });
    const pl = parseMediaPlaylist(text);
    assert.equal(pl.targetDuration, 2);
    assert.equal(pl.mediaSequence, 11);
    assert.equal(pl.partTarget, 0.333);
    assert.equal(pl.partHoldBack, 0.999);
    assert.equal(pl.canBlockReload, true);
    assert.deepEqual(
      pl.segments.map((s) => [s.msn, s.complete, s.parts.length]),
      [
        [11, true, 0],
        [12, true, 0],
        [13, true, 0],
        [14, true, 0],
        [15, true, 6],
        [16, true, 6],
        [17, false, 2],
      ],
    );
    const s16 = pl.segments[5];
    assert.equal(s16.uri, `seg-16.m4s${query}`);
    assert.equal(s16.duration, 1.985);
    assert.equal(s16.map, `init-1.mp4${query}`);
    assert.equal(pl.segments[0].map, `init-0.mp4${query}`);
    assert.deepEqual(
      pl.segments.map((s) => s.discontinuity),
      [false, false, false, false, true, false, false],
    );
    assert.equal(s16.programDateTime, Date.UTC(2026, 0, 1, 0, 0, 32));
    assert.deepEqual(
      s16.parts.map((p) => [p.msn, p.index, p.independent, p.duration]),
      [
        [16, 0, true, 0.333],
        [16, 1, false, 0.333],
        [16, 2, false, 0.333],
        [16, 3, false, 0.333],
        [16, 4, false, 0.333],
        [16, 5, false, 0.32],
      ],
    );
    assert.equal(s16.parts[2].uri, `part-16.2.m4s${query}`);
    assert.equal(pl.preloadHint, `part-17.2.m4s${query}`);
    assert.deepEqual(nextDirective(pl), { msn: 17, part: 2 });
    // hold back 0.999 s from the end (17.1 ends the list) lands in 16.4: the independent part at or before it is 16.0
    // (17.0 starts after it), as hls.js picks
    assert.deepEqual([pickStart(pl)?.msn, pickStart(pl)?.index], [16, 0]);
    const later = parseMediaPlaylist(renderPlaylist(fakeSegmenter(segs, hlsSegment(17, 5, false, 1)), { container: 'fmp4', lowLatency: true, query }));
    assert.deepEqual([pickStart(later)?.msn, pickStart(later)?.index], [17, 0], 'three parts later, 17.0 is within the hold-back');

    // no segment being made: the next directive is the next segment's first part (what the hint says too)
    const done = parseMediaPlaylist(renderPlaylist(fakeSegmenter(segs, undefined), { container: 'fmp4', lowLatency: true, query }));
    assert.deepEqual(nextDirective(done), { msn: 17, part: 0 });
    assert.equal(done.preloadHint, `part-17.0.m4s${query}`);
    // the end is 16.5's; one second back is inside 16: its independent part 16.0
    assert.deepEqual([pickStart(done)?.msn, pickStart(done)?.index], [16, 0]);
  });

  it('reads a classic playlist (no parts) and refuses what a player could not use', () => {
    const pl = parseMediaPlaylist(renderPlaylist(fakeSegmenter([hlsSegment(3, 6, true)], undefined), { container: 'mpegts', lowLatency: false, query: '' }));
    assert.equal(pl.canBlockReload, false);
    assert.deepEqual(
      pl.segments.map((s) => [s.msn, s.uri, s.parts.length]),
      [[3, 'seg-3.ts', 0]],
    );
    assert.equal(pickStart(pl), undefined);
    assert.throws(() => parseMediaPlaylist('#EXT-X-TARGETDURATION:2\n'), /#EXTM3U/);
    assert.throws(() => parseMediaPlaylist('#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\n'), /without its URI/);
    assert.throws(() => parseMediaPlaylist('#EXTM3U\n#EXT-X-TARGETDURATION:2\nseg.ts\n'), /without #EXTINF/);
    assert.throws(() => parseMediaPlaylist('#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PART:DURATION=0.3\n'), /without URI/);
    assert.deepEqual(
      [...parseAttributes('A=1,URI="x,y=2",INDEPENDENT=YES')],
      [
        ['A', '1'],
        ['URI', 'x,y=2'],
        ['INDEPENDENT', 'YES'],
      ],
    );
  });

  it('resolves playlist URIs against the playlist path', () => {
    const base = '/hls/139_1_1/index.m3u8?reqId=a&token=b';
    assert.equal(resolveUri(base, 'part-1.0.m4s?reqId=a&token=b'), '/hls/139_1_1/part-1.0.m4s?reqId=a&token=b');
    assert.equal(resolveUri(base, '/other/x.m4s'), '/other/x.m4s');
    assert.equal(resolveUri(base, 'http://127.0.0.1:7080/hls/x/seg-1.m4s?q=1'), '/hls/x/seg-1.m4s?q=1');
  });
});

// ------------------------------------------------------------------------------------------------------------

function sample(dts: number, duration: number, size: number, sync: boolean): MuxSample {
  return {
    unit: undefined as never,
    dts,
    cto: 0,
    duration,
    sync,
    size,
    bytes: Buffer.alloc(size, sync ? 1 : 2),
  };
}

describe('bench readers: fMP4 as hls-out writes it', () => {
  const video: MuxTrack = {
    id: 1,
    kind: 'video',
    codec: 'h264',
    timescale: 90000,
    width: 352,
    height: 288,
    config: Buffer.from([1, 0x42, 0, 0x1e, 0xff, 0xe0, 0]),
  };
  const audio: MuxTrack = { id: 2, kind: 'audio', codec: 'aac', timescale: 8000, sampleRate: 8000, channels: 1, config: Buffer.from([0x15, 0x88]) };

  it('finds the tracks of an init segment', () => {
    assert.deepEqual(parseInit(fmp4Init([video, audio])), [
      { id: 1, timescale: 90000, handler: 'vide' },
      { id: 2, timescale: 8000, handler: 'soun' },
    ]);
    assert.throws(() => parseInit(Buffer.concat([Buffer.from([0, 0, 0, 12]), Buffer.from('ftypiso6')])), /without moov/);
    assert.throws(() => parseInit(Buffer.concat([Buffer.from([0, 0, 0, 99]), Buffer.from('moovxxxx')])), /runs past/);
  });

  it('reads a part: sequence, base time, last and end decode times, sync flag, sizes', () => {
    const v = [sample(9000, 3600, 1000, true), sample(12600, 3690, 300, false), sample(16290, 3510, 250, false)];
    const a = [sample(800, 1024, 40, true), sample(1824, 1024, 41, true)];
    const frag = Buffer.concat(
      fmp4Fragment(7, [
        { track: video, baseTime: 9000, samples: v },
        { track: audio, baseTime: 800, samples: a },
      ]),
    );
    const info = parseFragment(frag, frag.length);
    assert.equal(info.sequence, 7);
    assert.equal(info.moofBytes + info.mdatBytes, frag.length);
    assert.deepEqual(
      info.tracks.map((t) => [t.trackId, t.baseTime, t.samples, t.lastDts, t.endDts, t.firstSync]),
      [
        [1, 9000, 3, 16290, 19800, true],
        [2, 800, 2, 1824, 2848, true],
      ],
    );
    // only the head given (as the reader does for parts): the same answer
    assert.deepEqual(parseFragment(frag.subarray(0, info.moofBytes + 8), frag.length), info);
    const p = Buffer.concat(fmp4Fragment(8, [{ track: video, baseTime: 19800, samples: [sample(19800, 3600, 10, false)] }]));
    assert.equal(parseFragment(p, p.length).tracks[0].firstSync, false);
    // a segment is its parts joined: timing over both
    const seg = Buffer.concat([frag, p]);
    const s = parseFragment(seg, seg.length);
    assert.deepEqual(
      s.tracks.map((t) => [t.trackId, t.baseTime, t.samples, t.lastDts, t.endDts]),
      [
        [1, 9000, 4, 19800, 23400],
        [2, 800, 2, 1824, 2848],
      ],
    );
  });

  it('refuses a body that the boxes do not fill exactly', () => {
    const frag = Buffer.concat(fmp4Fragment(1, [{ track: video, baseTime: 0, samples: [sample(0, 3600, 100, true)] }]));
    assert.throws(() => parseFragment(frag, frag.length + 10), /too short/);
    assert.throws(() => parseFragment(frag.subarray(0, frag.length - 1), frag.length - 1), /runs past/);
    assert.throws(() => parseFragment(Buffer.from('00000008free', 'latin1').subarray(0, 8), 8), /expected moof/);
  });

  it('finds when the terminal wrote the frame at a media time', () => {
    const term = { sentT: new Float64Array(SENT_RING), sentAt: new Float64Array(SENT_RING), sentCount: 0 };
    for (let i = 0; i < SENT_RING + 10; i++) {
      term.sentT[i % SENT_RING] = i * 40;
      term.sentAt[i % SENT_RING] = 1000 + i * 40 + 0.5;
      term.sentCount++;
    }
    assert.equal(sentAtOf(term, 40 * (SENT_RING + 5)), 1000 + 40 * (SENT_RING + 5) + 0.5);
    assert.ok(Number.isNaN(sentAtOf(term, 40 * 5)), 'lapped out of the ring');
    assert.ok(Number.isNaN(sentAtOf(term, 40 * (SENT_RING + 5) + 20)), 'no frame at that time');
  });
});

// ------------------------------------------------------------------------------------------------------------

function frame(channel: number, payload: Buffer): Buffer {
  const h = Buffer.from([0x24, channel, 0, 0]);
  h.writeUInt16BE(payload.length, 2);
  return Buffer.concat([h, payload]);
}

function rtp(seq: number, ts: number, marker: boolean, payload: Buffer, pt = 96, ssrc = 0x11223344): Buffer {
  const b = Buffer.alloc(12);
  b[0] = 0x80;
  b[1] = (marker ? 0x80 : 0) | pt;
  b.writeUInt16BE(seq, 2);
  b.writeUInt32BE(ts, 4);
  b.writeUInt32BE(ssrc, 8);
  return Buffer.concat([b, payload]);
}

describe('bench readers: RTSP interleaved connection', () => {
  it('splits responses and $ frames however the bytes are cut, handing over each frame head', () => {
    const sdp = 'v=0\r\nm=video 0 RTP/AVP 96\r\n';
    const p1 = rtp(1, 90000, false, Buffer.from([0x7c, 0x85, 1, 2, 3]));
    const p2 = rtp(2, 90000, true, Buffer.alloc(3000, 9));
    const rtcp = Buffer.from([0x80, 200, 0, 6, ...Buffer.alloc(24)]);
    const wire = Buffer.concat([
      Buffer.from(`RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Type: application/sdp\r\nContent-Length: ${sdp.length}\r\n\r\n${sdp}`),
      frame(0, p1),
      frame(1, rtcp),
      frame(0, p2),
      frame(2, Buffer.from([1, 2, 3])),
      Buffer.from('RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: abc\r\n\r\n'),
    ]);
    for (const step of [wire.length, 100, 13, 5, 1]) {
      const responses: RtspResponse[] = [];
      const frames: Array<[number, number, string]> = [];
      const r = new InterleavedReader({
        onResponse: (x) => responses.push(x),
        onFrame: (ch, len, buf, off) => frames.push([ch, len, buf.toString('hex', off, off + Math.min(len, FRAME_HEAD))]),
      });
      feed((b) => r.push(b), wire, step);
      assert.equal(r.error, undefined, `step ${step}`);
      assert.deepEqual(
        responses.map((x) => [x.status, x.headers.get('cseq'), x.body]),
        [
          [200, '2', sdp],
          [200, '3', ''],
        ],
        `step ${step}`,
      );
      assert.deepEqual(
        frames,
        [
          [0, p1.length, p1.toString('hex', 0, FRAME_HEAD)],
          [1, rtcp.length, rtcp.toString('hex', 0, FRAME_HEAD)],
          [0, p2.length, p2.toString('hex', 0, FRAME_HEAD)],
          [2, 3, '010203'],
        ],
        `step ${step}`,
      );
    }
    const bad = new InterleavedReader({ onResponse: () => assert.fail(), onFrame: () => assert.fail() });
    bad.push(Buffer.from([0x00, 0x24]));
    assert.match(bad.error ?? '', /unexpected byte 0x0/);
  });

  it('reads the SDP rtsp-out writes: tracks, payload types, absolute and relative controls', () => {
    const base = 'rtsp://127.0.0.1:7554/live/139_1_1?reqId=r&token=t';
    const sdp = buildSdp(
      {
        video: { kind: 'video', codec: 'h264', width: 352, height: 288, sps: Buffer.from([0x67, 0x42, 0, 0x1e]), pps: Buffer.from([0x68, 0xce]) },
        audio: { kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 } as never,
      },
      { stream: '139_1_1', sessionId: '1', control: (t) => `rtsp://127.0.0.1:7554/live/139_1_1/trackID=${t}?reqId=r&token=t` },
    );
    const tracks = parseSdp(sdp, base);
    assert.deepEqual(
      tracks.map((t) => [t.media, t.payloadType, t.rtpmap, t.control]),
      [
        ['video', 96, 'H264/90000', 'rtsp://127.0.0.1:7554/live/139_1_1/trackID=0?reqId=r&token=t'],
        ['audio', 8, 'PCMA/8000', 'rtsp://127.0.0.1:7554/live/139_1_1/trackID=1?reqId=r&token=t'],
      ],
    );
    assert.equal(resolveControl('rtsp://h/live/x', 'trackID=0'), 'rtsp://h/live/x/trackID=0');
    assert.equal(resolveControl('rtsp://h/live/x/', 'trackID=0'), 'rtsp://h/live/x/trackID=0');
    assert.equal(resolveControl('rtsp://h/live/x', '*'), 'rtsp://h/live/x');
    assert.deepEqual(parseRtpInfo('url=rtsp://h/a/trackID=0?q=1;seq=17;rtptime=123, url=rtsp://h/a/trackID=1;seq=5'), [
      { url: 'rtsp://h/a/trackID=0?q=1', seq: 17, rtptime: 123 },
      { url: 'rtsp://h/a/trackID=1', seq: 5 },
    ]);
  });

  it('counts lost packets across the sequence wrap, and packets going back or changing source', () => {
    const s = new RtpSequence();
    assert.deepEqual(
      [65533, 65534, 65535, 0, 3, 4].map((q) => s.add(q, 1)),
      [0, 0, 0, 0, 2, 0],
    );
    assert.equal(s.lost, 2);
    assert.equal(s.add(4, 1), 0);
    assert.equal(s.add(2, 1), 0);
    assert.equal(s.backwards, 2);
    assert.equal(s.add(5, 1), 0, 'back on track after the strays');
    assert.equal(s.add(100, 2), 0, 'a new source starts a new count');
    assert.equal(s.ssrcChanges, 1);
    assert.equal(s.packets, 10);
  });

  it('tells IDR slices in single NAL units and FU-A start fragments', () => {
    assert.equal(isIdr(0x65, 0), true);
    assert.equal(isIdr(0x41, 0), false);
    assert.equal(isIdr(0x7c, 0x85), true);
    assert.equal(isIdr(0x7c, 0x05), false, 'a middle fragment');
    assert.equal(isIdr(0x7c, 0x81), false, 'a P slice');
    assert.equal(isIdr(0x78, 0x85), false, 'STAP-A');
  });
});

describe('bench readers: RTP timestamps against the terminal sends', () => {
  // the benchmark's own stream: glaciall padded to 1 Mbit/s, started at one of its I frames
  const stream = synthesise(fixturePath('jt1078/glaciall-cif-h264-2013.bin'), 1, 950);
  const first = stream.keyframes[7];
  const isKey = keyframeTest(stream, first);
  // what a terminal started at `first` sends over two passes: media times from its first frame, I frames
  const t0 = stream.frames[first].t;
  const sentT: number[] = [];
  const sentKey: boolean[] = [];
  for (let pass = 0; pass < 2; pass++) {
    stream.frames.forEach((f, i) => {
      if (!f.video || (pass === 0 && i < first)) return;
      sentT.push(pass * stream.loopMs + f.t - t0);
      sentKey.push(f.key);
    });
  }
  const sentAt = sentT.map((t) => 5000 + t);
  const OFFSET = 0xfff00000; // wraps within the run

  function readFrames(from: number, n: number, latencyMs: number): ReadFrame[] {
    return sentT.slice(from, from + n).map((t, i) => ({ ts: (OFFSET + t * 90) >>> 0, key: sentKey[from + i], at: sentAt[from + i] + latencyMs }));
  }

  function ringAt(readUntil: number): { t: number[]; key: boolean[]; at: number[] } {
    let hi = 0;
    while (hi < sentAt.length && sentAt[hi] <= readUntil) hi++;
    const lo = Math.max(0, hi - SENT_RING);
    return { t: sentT.slice(lo, hi), key: sentKey.slice(lo, hi), at: sentAt.slice(lo, hi) };
  }

  it("knows which of the terminal's frames are I frames", () => {
    assert.deepEqual(sentT.map(isKey), sentKey);
    assert.ok(sentKey.filter(Boolean).length > 100);
  });

  it('finds the offset at low and high latency, where spacing alone matches many runs', () => {
    let checked = 0;
    for (let from = 700; from + 96 < sentT.length; from += 97) {
      for (const latency of [1, 45, 300, 1500]) {
        const frames = readFrames(from, 96, latency);
        assert.equal(alignRtp(frames, ringAt(frames[95].at)), OFFSET, `from ${from}, latency ${latency}`);
        checked++;
      }
    }
    assert.ok(checked > 100);
    // where spacing alone matches several runs (a regular stretch), the I frames still pick the right one, also at
    // a latency above one frame interval (which reading order alone could not rule out)
    let ambiguous = 0;
    for (let from = 600; from + 48 < sentT.length; from += 11) {
      const frames = readFrames(from, 48, 45);
      const ring = ringAt(frames[47].at);
      let matches = 0;
      for (let j = 0; j + 48 <= ring.t.length; j++) {
        if (frames.every((f, i) => Math.abs(((f.ts - frames[0].ts) >>> 0) - (ring.t[j + i] - ring.t[j]) * 90) <= 45 && ring.at[j + i] <= f.at)) matches++;
      }
      if (matches < 2 || !frames.some((f) => f.key)) continue;
      ambiguous++;
      assert.equal(alignRtp(frames, ring), OFFSET, `from ${from}: ${matches} runs match by spacing and reading order`);
    }
    assert.ok(ambiguous > 10, `${ambiguous} ambiguous windows checked`);
  });

  it('gives up without an I frame among the frames, or when the frames do not follow the sends', () => {
    const noKey = readFrames(1000, 40, 1);
    assert.equal(
      noKey.some((f) => f.key),
      true,
      'precondition: the test window holds an I frame',
    );
    assert.equal(
      alignRtp(
        noKey.map((f) => ({ ...f, key: false })),
        ringAt(noKey[39].at),
      ),
      undefined,
    );
    const skewed = readFrames(1000, 40, 1).map((f, i) => ({ ...f, ts: (f.ts + (i === 20 ? 900 : 0)) >>> 0 }));
    assert.equal(alignRtp(skewed, ringAt(skewed[39].at)), undefined, 'one frame 10 ms off');
    const early = readFrames(1000, 40, 1).map((f) => ({ ...f, at: f.at - 2 }));
    assert.equal(alignRtp(early, ringAt(early[39].at + 2)), undefined, 'read before written: no run qualifies');
  });
});
