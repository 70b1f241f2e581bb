/**
 * `audio` of the MP4 form over real HTTP on loopback, from a real recording with G.711A audio (an open with
 * record: true fed H.264 and A-law): by default (`aac`) ffprobe finds an AAC stream (8000 Hz, mono) that decodes
 * without an error and lasts what the FLV's audio lasts; `audio=as-is` is pcm_alaw as recorded; Range slices equal the
 * whole, each form with its own ETag; -7 for a bad `audio` (file, signed and link routes); signed links carry the
 * choice; a recording still being written answers AAC of what is on disk.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { testClip as clipWithAudio } from '../../../plugin-sdk/testkit';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { A, closeReq, NORM_SIM, openRecorded, probeCtx, queryReq, startGateway } from './harness';
import { rawRequest, waitFor, type RawReply } from './helpers';
import { audioSpan, framesOf, probe, topBoxes } from './mp4-media';

describe('recorder: G.711 record files as MP4 with AAC (audio=aac|as-is)', function () {
  this.timeout(90_000);
  let dataDir: string;
  let tmp: string;
  let gw: TestGateway;
  let reqId: string;
  let filePath: string;
  let mp4: Buffer;
  // 14 s: one AAC frame (128 ms) is under 1 % of it
  const clip = clipWithAudio({ seconds: 14, audio: true });

  const get = (p: string, auth: string | null = A, headers: Record<string, string> = {}, method = 'GET'): Promise<RawReply> =>
    rawRequest(gw.baseUrl, method, p, auth, headers);
  const json = (r: RawReply): { errCode: number; message: string } => JSON.parse(r.body.toString('utf8'));
  const save = (name: string, b: Buffer): string => {
    const f = path.join(tmp, name);
    fs.writeFileSync(f, b);
    return f;
  };

  /** opens a recorded request on `chanId` and pushes `units` of the clip (video and G.711A) into it */
  async function record(chanId: number, count: number): Promise<string> {
    const id = await openRecorded({ gw, dataDir }, A, { chanId });
    const s = probeCtx().sessions.findStream(NORM_SIM, chanId, 'live')!;
    const pub = s.media.attachPublisher();
    for (const t of clip.tracks) pub.setTrack(t);
    for (const u of clip.units.slice(0, count)) pub.push(u);
    return id;
  }

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-aac-gw-'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-mp4-aac-out-'));
    gw = await startGateway(dataDir);
    reqId = await record(1, clip.units.length);
    await closeReq({ gw, dataDir }, A, reqId);
    const [rec] = await queryReq({ gw, dataDir }, A, reqId);
    filePath = new URL(rec.url).pathname;
  });
  after(async () => {
    await gw?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("format=mp4 carries the G.711A as AAC by default: 8000 Hz mono, decoded without errors, the FLV audio's duration within 1 %", async () => {
    const r = await get(`${filePath}?format=mp4`);
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-type'], 'video/mp4');
    assert.equal(Number(r.headers['content-length']), r.body.length);
    mp4 = r.body;
    assert.deepEqual(topBoxes(mp4), ['ftyp', 'moov', 'mdat']);
    assert.ok((await get(`${filePath}?format=mp4&audio=aac`)).body.equals(mp4), 'audio=aac is the default');
    const m = probe(save('r.mp4', mp4));
    const flvFile = save('r.flv', (await get(filePath)).body);
    assert.deepEqual(
      m.streams.map((s) => [s.codec_type, s.codec_name, s.codec_tag_string]),
      [
        ['video', 'h264', 'avc1'],
        ['audio', 'aac', 'mp4a'],
      ],
    );
    assert.equal(m.streams[1]!.sample_rate, '8000');
    assert.equal(m.streams[1]!.channels, 1);
    assert.equal(m.stderr, '', 'ffprobe -count_frames decodes every frame without an error');
    assert.ok(framesOf(m, 'audio') > 100);
    const flvAudio = audioSpan(flvFile);
    const mp4Audio = audioSpan(path.join(tmp, 'r.mp4'));
    assert.ok(Math.abs(mp4Audio.seconds - flvAudio.seconds) <= flvAudio.seconds * 0.01, `MP4 audio ${mp4Audio.seconds} s, FLV audio ${flvAudio.seconds} s`);
    assert.ok(Math.abs(mp4Audio.start - flvAudio.start) < 0.01, `audio starts at ${mp4Audio.start} s in the MP4, ${flvAudio.start} s in the FLV`);
    const v = probe(flvFile);
    assert.ok(Math.abs(m.duration - v.duration) <= v.duration * 0.01, `MP4 ${m.duration} s, FLV ${v.duration} s`);
    assert.ok(
      gw.logs.some((l) => l.reqId === reqId && l.msg === 'record MP4: G.711 audio encoded as AAC'),
      'the encode is logged',
    );
  });

  it('audio=as-is keeps pcm_alaw; the two forms have their own ETags; FLV ignores audio', async () => {
    const r = await get(`${filePath}?format=mp4&audio=as-is`);
    assert.equal(r.status, 200);
    const p = probe(save('as-is.mp4', r.body));
    assert.deepEqual(
      p.streams.map((s) => `${s.codec_name}:${s.codec_tag_string}`),
      ['h264:avc1', 'pcm_alaw:alaw'],
    );
    const aacHead = await get(`${filePath}?format=mp4`, A, {}, 'HEAD');
    const rawHead = await get(`${filePath}?format=mp4&audio=as-is`, A, {}, 'HEAD');
    assert.equal(Number(aacHead.headers['content-length']), mp4.length);
    assert.notEqual(aacHead.headers.etag, rawHead.headers.etag);
    // a range asked against the other form gets the whole file, never a splice of the two
    const cross = await get(`${filePath}?format=mp4`, A, { Range: 'bytes=0-9', 'If-Range': String(rawHead.headers.etag) });
    assert.equal(cross.status, 200);
    assert.ok(cross.body.equals(mp4));
    assert.ok((await get(`${filePath}?audio=aac`)).body.equals((await get(filePath)).body));
  });

  it("Range slices of the AAC form equal the whole body's bytes", async () => {
    const total = mp4.length;
    const specs: Array<[string, number, number]> = [
      ['bytes=0-99', 0, 99],
      ['bytes=1000-', 1000, total - 1],
      ['bytes=-500', total - 500, total - 1],
    ];
    for (let i = 0; i < 12; i++) {
      const a = Math.floor(Math.random() * total);
      const b = Math.min(total - 1, a + Math.floor(Math.random() * 200_000));
      specs.push([`bytes=${a}-${b}`, a, b]);
    }
    for (const [spec, a, b] of specs) {
      const r = await get(`${filePath}?format=mp4`, A, { Range: spec });
      assert.equal(r.status, 206, spec);
      assert.equal(r.headers['content-range'], `bytes ${a}-${b}/${total}`);
      assert.ok(r.body.equals(mp4.subarray(a, b + 1)), spec);
    }
  });

  it('a bad audio answers 400 / -7 naming `audio`, on the file, signed and link routes', async () => {
    for (const bad of ['mp3', 'AAC', '', 'aac&audio=as-is']) {
      const r = await get(`${filePath}?format=mp4&audio=${bad}`);
      assert.equal(r.status, 400, bad);
      assert.equal(json(r).errCode, -7);
      assert.match(json(r).message, /`audio`/);
    }
    const link = await gw.api('GET', `/strm/record/link?reqId=${reqId}&audio=mp3`, undefined, A);
    assert.equal(link.json.errCode, -7);
    assert.match(link.json.message, /`audio`/);
    const good = new URL((await gw.api('GET', `/strm/record/link?reqId=${reqId}`, undefined, A)).json.data[0].url);
    const r = await get(`${good.pathname}${good.search}&audio=ogg`, null);
    assert.equal(r.status, 400);
    assert.equal(json(r).errCode, -7);
  });

  it('signed links carry the choice (unsigned, like format): default AAC, audio=as-is pcm_alaw', async () => {
    const plain = new URL((await gw.api('GET', `/strm/record/link?reqId=${reqId}`, undefined, A)).json.data[0].url);
    assert.equal(plain.searchParams.get('audio'), null);
    assert.ok((await get(plain.pathname + plain.search, null)).body.equals(mp4));
    const asIs = new URL((await gw.api('GET', `/strm/record/link?reqId=${reqId}&audio=as-is`, undefined, A)).json.data[0].url);
    assert.equal(asIs.searchParams.get('audio'), 'as-is');
    const r = await get(asIs.pathname + asIs.search, null);
    assert.equal(r.status, 200);
    assert.deepEqual(
      probe(save('signed-as-is.mp4', r.body)).streams.map((s) => s.codec_name),
      ['h264', 'pcm_alaw'],
    );
    // the same signature with the other choice: the same file in its other form, still for this application only
    const swapped = new URLSearchParams(asIs.search);
    swapped.set('audio', 'aac');
    assert.ok((await get(`${asIs.pathname}?${swapped}`, null)).body.equals(mp4));
  });

  it('a recording still being written answers AAC of the audio on disk', async () => {
    const live = await record(2, Math.floor(clip.units.length / 2));
    const [rec] = await waitFor(async () => {
      const rows = await queryReq({ gw, dataDir }, A, live);
      return rows.length && rows[0].sz > 0 ? rows : undefined;
    }, "the recording's row");
    const url = new URL(rec.url).pathname;
    const r = await waitFor(async () => {
      const x = await get(`${url}?format=mp4`);
      return x.status === 200 ? x : undefined;
    }, 'the first samples on disk');
    const p = probe(save('live.mp4', r.body));
    assert.deepEqual(
      p.streams.map((s) => s.codec_name),
      ['h264', 'aac'],
    );
    assert.equal(p.stderr, '');
    assert.ok(framesOf(p, 'audio') > 0);
    await closeReq({ gw, dataDir }, A, live);
  });
});
