/**
 * The playlists and what they name, checked over real HTTP: RFC 8216 rules, LL-HLS (parts, preload hint, blocking
 * reload), tokens on every URL, unknown streams, CORS, early players, discontinuities, players counted and let go,
 * and memory per stream bounded.
 */
import assert from 'node:assert/strict';
import { ManualClock } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import hlsOut from '../index';
import { checkRfc, get, parsePlaylist, resolveUri, startHlsGateway, waitPlaylist, type ParsedPlaylist } from './helpers';

function withQuery(url: string, set: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(set)) u.searchParams.set(k, v);
  return u.toString();
}

async function metric(gw: TestGateway, name: string): Promise<number> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `metric ${name} exported`);
  return Number(line.split(' ')[1]);
}

async function status(gw: TestGateway, reqId: string): Promise<Record<string, any>> {
  return (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0];
}

describe('hls-out: playlists, LL-HLS and the HTTP side', function () {
  this.timeout(60_000);

  describe('one live stream', () => {
    let gw: TestGateway;
    let url: string;
    let reqId: string;
    let stop: () => void;
    before(async () => {
      gw = await startHlsGateway();
      const open = await gw.openStream({ simNo: '13900000021', chanId: 1, fmt: 1 });
      url = open.playUrl;
      reqId = open.reqId;
      stop = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true }).stop;
      await waitPlaylist(url, (p) => p.segments.length >= 2);
    });
    after(async () => {
      stop();
      await gw.stop();
    });

    it('keeps RFC 8216 rules over reloads: segments within the target, media sequence and msn consistent, dated by the wall clock', async () => {
      let prev: ParsedPlaylist | undefined;
      for (let i = 0; i < 6; i++) {
        const p = parsePlaylist((await get(url)).text);
        checkRfc(p, 'fmp4');
        // a video form may cut inside a long GOP, so it never promises independent segments (parts say it)
        assert.equal(p.independentSegments, false);
        if (prev) {
          assert.ok(p.mediaSequence >= prev.mediaSequence, 'media sequence never goes back');
          // a segment keeps its number, URI and duration from one reload to the next
          for (const s of p.segments) {
            const same: ParsedPlaylist['segments'][number] | undefined = prev.segments.find((x) => x.msn === s.msn);
            if (same) assert.deepEqual({ uri: same.uri, duration: same.duration }, { uri: s.uri, duration: s.duration });
          }
        }
        for (let k = 1; k < p.segments.length; k++) {
          const a = p.segments[k - 1];
          const b = p.segments[k];
          assert.equal(b.msn, a.msn + 1);
          // the wall clock maps the stream's timeline: consecutive dates differ by the first one's duration
          assert.ok(
            Math.abs(b.programDateTime! - a.programDateTime! - a.duration * 1000) <= 1,
            `dates ${a.programDateTime} -> ${b.programDateTime} for ${a.duration} s`,
          );
        }
        prev = p;
        await new Promise((r) => setTimeout(r, 400));
      }
    });

    it('lists parts of about 1/3 s with a preload hint and server control; parts joined are the segment', async () => {
      const p = parsePlaylist((await get(url)).text);
      assert.equal(p.partTarget, 0.333);
      assert.equal(p.serverControl?.['CAN-BLOCK-RELOAD'], 'YES');
      assert.ok(p.preloadHint, 'EXT-X-PRELOAD-HINT');
      const seg = p.segments[p.segments.length - 1];
      assert.ok(seg.parts.length >= 6, `parts of the last segment: ${seg.parts.length}`);
      assert.equal(seg.parts[0].independent, true, 'a segment starts at a keyframe');
      const total = seg.parts.reduce((n, x) => n + x.duration, 0);
      assert.ok(Math.abs(total - seg.duration) < 0.002, `parts add up to the segment (${total} vs ${seg.duration})`);
      for (const part of seg.parts.slice(0, -1))
        assert.ok(part.duration >= 0.85 * p.partTarget!, `a part of ${part.duration} s is at least 85 % of the target`);
      const bodies = await Promise.all(seg.parts.map((x) => get(resolveUri(url, x.uri))));
      for (const b of bodies) {
        assert.equal(b.status, 200);
        assert.equal(b.body.toString('latin1', 4, 8), 'moof');
      }
      const whole = await get(resolveUri(url, seg.uri));
      assert.ok(Buffer.concat(bodies.map((b) => b.body)).equals(whole.body), 'the segment is its parts, byte for byte');
    });

    it('blocking reload: a playlist asked for the next part comes back once that part exists, and lists it', async () => {
      const p = parsePlaylist((await get(url)).text);
      const hint = /part-(\d+)\.(\d+)\.m4s/.exec(p.preloadHint!)!;
      const [msn, part] = [hint[1], hint[2]];
      const r = await get(withQuery(url, { _HLS_msn: msn, _HLS_part: part }));
      assert.equal(r.status, 200);
      const q = parsePlaylist(r.text);
      const uris = [...q.segments.flatMap((s) => s.parts), ...q.trailingParts].map((x) => x.uri);
      assert.ok(
        uris.some((u) => u.startsWith(`part-${msn}.${part}.m4s?`) || u.startsWith(`part-${Number(msn) + 1}.0.m4s?`)),
        `the part asked for is listed:\n${r.text}`,
      );
      // and the hinted part, fetched before it exists, is answered when it does
      const h2 = parsePlaylist((await get(url)).text).preloadHint!;
      const partBody = await get(resolveUri(url, h2));
      assert.equal(partBody.status, 200);
      assert.equal(partBody.body.toString('latin1', 4, 8), 'moof');
    });

    it('answers 400 for a media sequence number far past the live edge', async () => {
      const p = parsePlaylist((await get(url)).text);
      const r = await get(withQuery(url, { _HLS_msn: String(p.mediaSequence + p.segments.length + 5) }));
      assert.equal(r.status, 400);
    });

    it('401 for a wrong token on the playlist, init segment, segment and part; 404 for a stream not open or a name never made', async () => {
      const p = parsePlaylist((await get(url)).text);
      const seg = p.segments[p.segments.length - 1];
      const urls = [url, resolveUri(url, seg.map!), resolveUri(url, seg.uri), resolveUri(url, seg.parts[0].uri)];
      for (const u of urls) {
        assert.equal((await get(u)).status, 200, u);
        assert.equal((await get(withQuery(u, { token: 'wrong' }))).status, 401, `wrong token: ${u}`);
        assert.equal((await get(withQuery(u, { reqId: 'nosuchrequest1' }))).status, 401, `unknown reqId: ${u}`);
      }
      assert.equal((await get(url.replace('13900000021_1_1', '13900000099_1_1'))).status, 404);
      assert.equal((await get(url.replace('index.m3u8', 'nothing.txt'))).status, 404);
      assert.equal((await get(resolveUri(url, seg.uri).replace(/seg-\d+/, 'seg-999999'))).status, 404);
    });

    it('CORS: every answer allows any origin; OPTIONS is a preflight', async () => {
      const p = parsePlaylist((await get(url)).text);
      for (const u of [url, resolveUri(url, p.segments[0].uri), withQuery(url, { token: 'wrong' })]) {
        assert.equal((await get(u)).headers.get('access-control-allow-origin'), '*', u);
      }
      const pre = await fetch(url, { method: 'OPTIONS', headers: { Origin: 'http://elsewhere.example', 'Access-Control-Request-Method': 'GET' } });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get('access-control-allow-origin'), '*');
      assert.match(pre.headers.get('access-control-allow-methods') ?? '', /GET/);
    });

    it('counts the fetching client as a player of its request, with the bytes it was sent', async () => {
      const st = await status(gw, reqId);
      assert.equal(st.consumed, true);
      assert.equal(st.players, 1, 'one client at one address is one player');
      assert.ok(st.bytesOut > 0);
    });
  });

  describe('requests and streams coming and going', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startHlsGateway();
    });
    after(() => gw.stop());

    it('an early player: a playlist asked for before any media is answered once the first segment exists', async () => {
      const open = await gw.openStream({ simNo: '13900000031', chanId: 1, fmt: 1 });
      const pending = get(open.playUrl);
      await new Promise((r) => setTimeout(r, 300));
      const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
      const r = await pending;
      assert.equal(r.status, 200);
      const p = parsePlaylist(r.text);
      assert.ok(p.segments.length >= 1, 'it names a complete segment');
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it("a closed request's URLs answer 401 or 404", async () => {
      const open = await gw.openStream({ simNo: '13900000032', chanId: 1, fmt: 1 });
      const other = await gw.openStream({ simNo: '13900000032', chanId: 1, fmt: 1, token: 'other-token' });
      const pub = gw.publish(open.streamName, testClip({ seconds: 2 }), { loop: true });
      const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 1);
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
      // the stream lives on for the other request: this one's URLs are refused
      assert.equal((await get(open.playUrl)).status, 401);
      assert.equal((await get(resolveUri(open.playUrl, p.segments[0].uri))).status, 401);
      assert.equal((await get(other.playUrl)).status, 200);
      await gw.api('POST', '/strm/close', { reqIds: [other.reqId] });
      assert.ok([401, 404].includes((await get(other.playUrl)).status));
      pub.stop();
    });

    it('a new publisher (terminal reconnect) starts a segment after EXT-X-DISCONTINUITY', async () => {
      const open = await gw.openStream({ simNo: '13900000033', chanId: 1, fmt: 1, dataTyp: 1 });
      const clip = testClip({ seconds: 2 });
      await gw.publish(open.streamName, clip, { loop: 2, realtime: false }).done;
      await gw.publish(open.streamName, clip, { loop: 2, realtime: false }).done;
      const p = parsePlaylist((await get(open.playUrl)).text);
      checkRfc(p, 'fmp4');
      const breaks = p.segments.filter((s) => s.discontinuity);
      assert.equal(breaks.length, 1, p.segments.map((s) => `${s.msn}${s.discontinuity ? ' (discontinuity)' : ''}`).join(', '));
      assert.equal(breaks[0].parts[0]?.independent ?? true, true);
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });

    it('mpegts requests get no parts, blocking or hint (LL-HLS is for fMP4)', async () => {
      const open = await gw.openStream({ simNo: '13900000034', chanId: 1, fmt: 1, extra: { subFmt: 'mpegts' } });
      await gw.publish(open.streamName, testClip({ seconds: 2 }), { loop: 3, realtime: false }).done;
      const p = await waitPlaylist(open.playUrl, (x) => x.segments.length >= 2);
      assert.equal(p.partTarget, undefined);
      assert.equal((await get(open.playUrl.replace('index.m3u8', 'part-0.0.m4s'))).status, 404);
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  });

  describe('bounds', () => {
    it('memory per stream stays within maxStreamBytes: old segments go first, counted', async () => {
      const max = 256 * 1024;
      const gw = await startHlsGateway({ hls: { maxStreamBytes: max, windowSegments: 6 } });
      try {
        const open = await gw.openStream({ simNo: '13900000041', chanId: 1, fmt: 1, dataTyp: 1 });
        const clip = testClip({ seconds: 2, size: '1280x720', gopFrames: 5 });
        const clipBytes = clip.units.reduce((n, u) => n + u.payload.length, 0);
        assert.ok(clipBytes * 8 > max * 2, `the window would hold ${clipBytes * 8} bytes without the bound`);
        await gw.publish(open.streamName, clip, { loop: 10, realtime: false }).done;
        const largest = await metric(gw, 'gw_hls_out_largest_stream_bytes');
        assert.ok(largest > 0 && largest <= max, `largest stream window ${largest} <= ${max}`);
        assert.ok((await metric(gw, 'gw_hls_out_memory_drops_total')) > 0, 'segments dropped for memory are counted');
        const p = parsePlaylist((await get(open.playUrl)).text);
        checkRfc(p, 'fmp4');
        assert.ok(p.segments.length >= 1 && p.segments.length < 6, `fewer segments than the window: ${p.segments.length}`);
        await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
        assert.equal(await metric(gw, 'gw_hls_out_memory_bytes'), 0, "a closed request's window is freed");
      } finally {
        await gw.stop();
      }
    });

    it('a player that stops fetching is let go after playerIdleSec; the request then counts none', async () => {
      const clock = new ManualClock();
      const stub = stubMediaPlugin();
      const gw = await startTestGateway({
        clock,
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'hls-out', def: hlsOut, config: { playerIdleSec: 10 } },
        ],
      });
      try {
        const open = await gw.openStream({ simNo: '13900000042', chanId: 1, fmt: 1, dataTyp: 1 });
        await gw.publish(open.streamName, testClip({ seconds: 2 }), { loop: 3, realtime: false }).done;
        assert.equal((await get(open.playUrl)).status, 200);
        assert.equal((await status(gw, open.reqId)).players, 1);
        clock.advance(9_000);
        assert.equal((await status(gw, open.reqId)).players, 1, 'still within playerIdleSec');
        clock.advance(2_000);
        assert.equal((await status(gw, open.reqId)).players, 0, 'let go once idle');
        assert.equal((await status(gw, open.reqId)).consumed, true);
        await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
      } finally {
        await gw.stop();
      }
    });
  });
});
