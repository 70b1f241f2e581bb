/**
 * `format=mp4` of record files over real HTTP on loopback, from a real recording (an open with record: true fed
 * with real H.264): ffprobe reads the MP4, its top-level boxes are ftyp, moov, mdat in that order, and it lasts what
 * the FLV lasts; Range (206 slices of the whole, 416, HEAD, If-Range); the FLV's errors for another application's
 * file and for path tricks, -7 for an unknown format; a torn and a corrupt file on disk; a recording still being
 * written; signed links (GET /strm/record/link) that a <video> element can use without credentials.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { A, B, closeReq, openRecorded, publisherFor, queryReq, recordClip, startGateway, testClip } from './harness';
import { rawRequest, waitFor, type RawReply } from './helpers';
import { unitAt } from './fixtures/h264-clip';
import { framesOf, probe, topBoxes } from './mp4-media';

describe('recorder: record files as MP4 (format=mp4)', function () {
  this.timeout(90_000);
  let dataDir: string;
  let tmp: string;
  let gw: TestGateway;
  let reqId: string;
  let filePath: string;
  let mp4: Buffer;
  let flv: Buffer;

  const get = (p: string, auth: string | null = A, headers: Record<string, string> = {}, method = 'GET'): Promise<RawReply> =>
    rawRequest(gw.baseUrl, method, p, auth, headers);
  const json = (r: RawReply): { errCode: number; message: string } => JSON.parse(r.body.toString('utf8'));

  before(async () => {
    testClip();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-gw-'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-out-'));
    gw = await startGateway(dataDir);
    // 12 s (300 frames): ffprobe takes an FLV's last timestamp for its length, one frame short of the MP4's
    reqId = await recordClip({ gw, dataDir }, A, { chanId: 1, frames: 300 });
    const [rec] = await queryReq({ gw, dataDir }, A, reqId);
    filePath = new URL(rec.url).pathname;
  });
  after(async () => {
    await gw?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("answers an MP4 ffprobe reads: moov before mdat, every frame, the FLV's duration within 1 %", async () => {
    const r = await get(`${filePath}?format=mp4`);
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'video/mp4');
    assert.equal(r.headers['accept-ranges'], 'bytes');
    assert.equal(Number(r.headers['content-length']), r.body.length);
    assert.match(String(r.headers['content-disposition']), new RegExp(`filename="${reqId}\\.mp4"`));
    mp4 = r.body;
    assert.deepEqual(topBoxes(mp4), ['ftyp', 'moov', 'mdat']);
    const f = await get(filePath);
    assert.equal(f.headers['content-type'], 'video/x-flv');
    flv = f.body;
    assert.ok((await get(`${filePath}?format=flv`)).body.equals(flv), 'format=flv is the file as stored');
    fs.writeFileSync(path.join(tmp, 'r.mp4'), mp4);
    fs.writeFileSync(path.join(tmp, 'r.flv'), flv);
    const m = probe(path.join(tmp, 'r.mp4'));
    const v = probe(path.join(tmp, 'r.flv'));
    assert.deepEqual(
      m.streams.map((s) => [s.codec_name, s.codec_tag_string, s.width, s.height]),
      [['h264', 'avc1', 320, 240]],
    );
    assert.equal(framesOf(m, 'video'), 300);
    assert.equal(framesOf(m, 'video'), framesOf(v, 'video'));
    assert.ok(Math.abs(m.duration - v.duration) <= v.duration * 0.01, `MP4 ${m.duration} s, FLV ${v.duration} s`);
    assert.equal(m.stderr, '');
  });

  it('serves byte ranges of it: 206 slices equal the whole, suffix ranges, 416, HEAD with the length', async () => {
    const total = mp4.length;
    for (const [spec, a, b] of [
      ['bytes=0-99', 0, 99],
      ['bytes=1000-', 1000, total - 1],
      ['bytes=-500', total - 500, total - 1],
      [`bytes=${total - 1}-${total + 10}`, total - 1, total - 1],
    ] as const) {
      const r = await get(`${filePath}?format=mp4`, A, { Range: spec });
      assert.equal(r.status, 206, spec);
      assert.equal(r.headers['content-range'], `bytes ${a}-${b}/${total}`);
      assert.ok(r.body.equals(mp4.subarray(a, b + 1)), spec);
    }
    const past = await get(`${filePath}?format=mp4`, A, { Range: `bytes=${total}-` });
    assert.equal(past.status, 416);
    assert.equal(past.headers['content-range'], `bytes */${total}`);
    const head = await get(`${filePath}?format=mp4`, A, {}, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(Number(head.headers['content-length']), total);
    assert.equal(head.body.length, 0);
    // a range asked against another version of the file gets the whole file
    const etag = String(head.headers.etag);
    assert.equal((await get(`${filePath}?format=mp4`, A, { Range: 'bytes=0-9', 'If-Range': etag })).status, 206);
    const stale = await get(`${filePath}?format=mp4`, A, { Range: 'bytes=0-9', 'If-Range': '"mp4-other"' });
    assert.equal(stale.status, 200);
    assert.equal(stale.body.length, total);
  });

  it('answers another application, path tricks and unknown files as it does for the FLV; an unknown format -7', async () => {
    const foreignFlv = await get(filePath, B);
    const foreignMp4 = await get(`${filePath}?format=mp4`, B);
    assert.equal(foreignMp4.status, 404);
    assert.deepEqual(json(foreignMp4), json(foreignFlv));
    assert.equal(json(foreignMp4).errCode, -8);
    const dir = filePath.slice(0, filePath.lastIndexOf('/'));
    for (const trick of [
      `${dir}/..%2f..%2f${reqId}.flv`,
      `${dir}/../${reqId}.flv`,
      `${dir}/%2e%2e/x.flv`,
      `${dir}/${reqId}.mp4`,
      `${dir}/${reqId}.flv%00`,
      '/strm/record/file/records.sqlite',
    ]) {
      const r = await get(`${trick}?format=mp4`);
      const plain = await get(trick);
      assert.equal(r.status, plain.status, trick);
      assert.equal(r.status, 404, trick);
      assert.equal(json(r).errCode, -8, trick);
    }
    for (const bad of ['webm', 'MP4', '', 'mp4&format=flv']) {
      const r = await get(`${filePath}?format=${bad}`);
      assert.equal(r.status, 400, bad);
      assert.equal(json(r).errCode, -7);
      assert.match(json(r).message, /`format`/);
    }
    // no credentials: as for the FLV
    assert.equal((await get(`${filePath}?format=mp4`, null)).status, 401);
  });

  it('a recording still being written answers the MP4 of what is there so far', async () => {
    const live = await openRecorded({ gw, dataDir }, A, { chanId: 2 });
    const { pub } = publisherFor('13800138000', 2);
    for (let i = 0; i < 100; i++) pub.push(unitAt(testClip(), i));
    const [rec] = await waitFor(async () => {
      const rows = await queryReq({ gw, dataDir }, A, live);
      return rows.length && rows[0].sz > 0 ? rows : undefined;
    }, "the recording's row");
    const url = new URL(rec.url).pathname;
    const file = path.join(tmp, 'live.mp4');
    const r = await waitFor(async () => {
      const x = await get(`${url}?format=mp4`);
      return x.status === 200 ? x : undefined;
    }, 'the first samples on disk');
    fs.writeFileSync(file, r.body);
    const frames = framesOf(probe(file), 'video');
    assert.ok(frames > 0 && frames <= 100, `${frames} frames`);
    await closeReq({ gw, dataDir }, A, live);
  });

  it('a torn file (a crash mid-tag) and a corrupt tag on disk: the MP4 of what is whole, and a log line for the corrupt one', async () => {
    const stored = path.join(dataDir, 'records', ...decodeURIComponent(filePath.replace('/strm/record/file/', '')).split('/'));
    const whole = fs.readFileSync(stored);
    try {
      fs.writeFileSync(stored, whole.subarray(0, Math.floor(whole.length / 2) + 5));
      const torn = await get(`${filePath}?format=mp4`);
      assert.equal(torn.status, 200);
      fs.writeFileSync(path.join(tmp, 'torn.mp4'), torn.body);
      const p = probe(path.join(tmp, 'torn.mp4'));
      const frames = framesOf(p, 'video');
      assert.ok(frames > 100 && frames < 300, `${frames} frames`);
      assert.equal(p.stderr, '');

      let at = whole.readUInt32BE(5) + 4;
      while (at < whole.length / 3) at += 11 + whole.readUIntBE(at + 1, 3) + 4;
      const bad = Buffer.from(whole);
      bad.writeUInt32BE(0xdeadbeef, at + 11 + whole.readUIntBE(at + 1, 3)); // its PreviousTagSize names another size
      fs.writeFileSync(stored, bad);
      const corrupt = await get(`${filePath}?format=mp4`);
      assert.equal(corrupt.status, 200);
      fs.writeFileSync(path.join(tmp, 'corrupt.mp4'), corrupt.body);
      const cf = framesOf(probe(path.join(tmp, 'corrupt.mp4')), 'video');
      assert.ok(cf > 0 && cf < 150, `${cf} frames`);
      await waitFor(
        () => gw.logs.some((l) => l.reqId === reqId && /does not parse/.test(String(l.msg)) && String(l.stopped).includes(`byte ${at}`)),
        'the log line',
      );
    } finally {
      fs.writeFileSync(stored, whole);
    }
  });

  it('gives signed links a <video> element can use without credentials, for the owner only', async () => {
    const link = await gw.api('GET', `/strm/record/link?reqId=${reqId}&format=mp4`, undefined, A);
    assert.equal(link.json.errCode, 0, JSON.stringify(link.json));
    const { url, expiresAt } = link.json.data[0];
    assert.ok(Date.parse(expiresAt) > Date.now());
    const u = new URL(url);
    assert.match(u.pathname, /^\/strm\/record\/signed\//);
    const signed = await get(u.pathname + u.search, null);
    assert.equal(signed.status, 200);
    assert.equal(signed.headers['content-type'], 'video/mp4');
    assert.ok(signed.body.equals(mp4));
    const part = await get(u.pathname + u.search, null, { Range: 'bytes=100-199' });
    assert.equal(part.status, 206);
    assert.ok(part.body.equals(mp4.subarray(100, 200)));
    // the FLV through a link of its own
    const flvLink = (await gw.api('GET', `/strm/record/link?reqId=${reqId}&format=flv`, undefined, A)).json.data[0].url as string;
    assert.ok((await get(new URL(flvLink).pathname + new URL(flvLink).search, null)).body.equals(flv));
    // a changed signature, application, expiry or path is refused
    const tamper = (k: string, v: string): string => {
      const q = new URLSearchParams(u.search);
      q.set(k, v);
      return `${u.pathname}?${q}`;
    };
    for (const p of [tamper('sig', 'A'.repeat(43)), tamper('app', 'B'), tamper('exp', String(Number(u.searchParams.get('exp')) + 60)), tamper('exp', '1')]) {
      const r = await get(p, null);
      assert.equal(r.status, 403, p);
      assert.equal(json(r).errCode, -10);
    }
    const other = await get(u.pathname.replace(/[^/]+\.flv$/, 'AAAAAAAAAAAA.flv') + u.search, null);
    assert.equal(other.status, 403);
    // another application gets no link to this record
    const foreign = await gw.api('GET', `/strm/record/link?reqId=${reqId}`, undefined, B);
    assert.equal(foreign.json.errCode, -8);
    assert.equal((await gw.api('GET', `/strm/record/link?reqId=${reqId}&format=avi`, undefined, A)).json.errCode, -7);
  });
});
