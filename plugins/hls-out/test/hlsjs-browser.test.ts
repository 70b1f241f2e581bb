/**
 * hls.js (pinned in devDependencies, served from node_modules by a tiny page on 127.0.0.1) plays the play URL in
 * Debian's headless Chromium, driven by playwright-core as the other browser tests do: LL-HLS fMP4 with AAC audio,
 * and MPEG-TS. Checked from the <video> element: the picture's size, the clock advancing, frames decoded, audio
 * decoded, no fatal hls.js error. How far behind live it plays is measured and reported (never asserted): from
 * hls.js's playingDate (EXT-X-PROGRAM-DATE-TIME of the playhead, i.e. the gateway's clock when the frame arrived) to
 * the page's clock, on the same machine.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { testClip, type TestGateway } from '../../../plugin-sdk/testkit';
import { CHROMIUM, within } from '../../../test/browser/page';
import { repoRoot } from '../../../test/support/paths';
import { startHlsGateway } from './helpers';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>hls.js player</title></head>
<body>
<script src="/hls.js"></script>
<script>
'use strict';
window.players = {};
window.play = (id, url, lowLatency, extra) => {
  const video = document.createElement('video');
  video.muted = true;
  video.autoplay = true;
  video.playsInline = true;
  document.body.appendChild(video);
  const hls = new Hls({ lowLatencyMode: lowLatency, ...(extra || {}) });
  const rec = { video, hls, errors: [], details: null };
  window.players[id] = rec;
  // with where the playhead and the buffer were: a stall names its place
  const ranges = () => Array.from({ length: video.buffered.length }, (_, i) => video.buffered.start(i).toFixed(3) + '-' + video.buffered.end(i).toFixed(3)).join(',');
  hls.on(Hls.Events.ERROR, (_e, d) => rec.errors.push({ type: d.type, details: d.details, fatal: d.fatal, at: video.currentTime.toFixed(3), buffered: ranges() }));
  hls.on(Hls.Events.LEVEL_LOADED, (_e, d) => {
    rec.details = { live: d.details.live, partTarget: d.details.partTarget, canBlockReload: d.details.canBlockReload, targetduration: d.details.targetduration };
  });
  hls.loadSource(url);
  hls.attachMedia(video);
  video.play().catch(() => undefined);
};
window.snapshot = (id) => {
  const rec = window.players[id];
  if (!rec) return null;
  const v = rec.video;
  const q = v.getVideoPlaybackQuality();
  const pd = rec.hls.playingDate;
  return {
    errors: rec.errors, details: rec.details, videoWidth: v.videoWidth, videoHeight: v.videoHeight, currentTime: v.currentTime,
    totalVideoFrames: q.totalVideoFrames, audioBytes: v.webkitAudioDecodedByteCount, paused: v.paused,
    latency: rec.hls.latency, behindLiveMs: pd ? Date.now() - pd.getTime() : null, lowLatencyMode: rec.hls.lowLatencyMode,
  };
};
</script></body></html>`;

interface Snapshot {
  errors: Array<{ type: string; details: string; fatal: boolean; at: string; buffered: string }>;
  details: { live: boolean; partTarget: number; canBlockReload: boolean; targetduration: number } | null;
  videoWidth: number;
  videoHeight: number;
  currentTime: number;
  totalVideoFrames: number;
  audioBytes: number;
  paused: boolean;
  /** hls.js's own estimate, s */
  latency: number;
  /** page clock minus the playhead's program date, ms */
  behindLiveMs: number | null;
}

class HlsPage {
  private constructor(
    private readonly server: http.Server,
    private readonly browser: Browser,
    readonly page: Page,
  ) {}

  static async start(): Promise<HlsPage> {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: install Debian's 'chromium' package`);
    const hlsJs = fs.readFileSync(path.join(repoRoot, 'node_modules', 'hls.js', 'dist', 'hls.js'));
    const server = http.createServer((req, res) => {
      const url = (req.url ?? '/').split('?')[0];
      const [type, body] = url === '/' ? ['text/html', PAGE] : url === '/hls.js' ? ['text/javascript', hlsJs] : ['text/plain', 'not found\n'];
      res.writeHead(body === 'not found\n' ? 404 : 200, { 'Content-Type': `${type}; charset=utf-8`, 'Cache-Control': 'no-store' });
      res.end(body);
    });
    server.listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      timeout: 30_000,
      args: [
        '--autoplay-policy=no-user-gesture-required',
        '--disable-audio-output',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    await page.goto(origin + '/');
    await page.waitForFunction(() => typeof (globalThis as any).Hls === 'function');
    return new HlsPage(server, browser, page);
  }

  play(id: string, url: string, lowLatency: boolean, extra: Record<string, unknown> = {}): Promise<void> {
    return within(
      `starting ${id}`,
      5_000,
      this.page.evaluate(([i, u, ll, x]) => (globalThis as any).play(i, u, ll, x), [id, url, lowLatency, extra] as const),
    );
  }

  async snapshot(id: string): Promise<Snapshot> {
    const s = await within(
      `reading ${id}`,
      5_000,
      this.page.evaluate((i) => (globalThis as any).snapshot(i) as Snapshot | null, id),
    );
    if (!s) throw new Error(`no player ${id}`);
    return s;
  }

  async close(): Promise<void> {
    await this.browser.close().catch(() => undefined);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

describe('browser: hls.js in headless Chromium plays the HLS play URL', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  let page: HlsPage | undefined;
  const report: string[] = [];
  before(async function () {
    this.timeout(45_000);
    gw = await startHlsGateway();
    page = await HlsPage.start();
  });
  after(async () => {
    await page?.close();
    await gw?.stop();
    if (report.length) console.log(report.map((l) => `      ${l}`).join('\n'));
  });

  async function watch(
    id: string,
    url: string,
    lowLatency: boolean,
    extra: Record<string, unknown> = {},
  ): Promise<{ first: Snapshot; last: Snapshot; behind: number[] }> {
    const p = page!;
    await p.play(id, url, lowLatency, extra);
    // playing: the clock has moved past a second
    const deadline = Date.now() + 20_000;
    let first = await p.snapshot(id);
    while (first.currentTime < 1 && Date.now() < deadline) {
      assert.deepEqual(
        first.errors.filter((e) => e.fatal),
        [],
        'no fatal hls.js error',
      );
      await sleep(200);
      first = await p.snapshot(id);
    }
    assert.ok(first.currentTime >= 1, `hls.js started playing: ${JSON.stringify(first)}`);
    const behind: number[] = [];
    let last = first;
    for (let i = 0; i < 16; i++) {
      await sleep(250);
      last = await p.snapshot(id);
      if (i >= 4 && last.behindLiveMs !== null) behind.push(last.behindLiveMs);
    }
    return { first, last, behind };
  }

  it('LL-HLS fMP4 with AAC: video and audio play, and the latency behind live is reported', async () => {
    const open = await gw.openStream({ simNo: '13900000051', chanId: 1, fmt: 1 });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
    try {
      const { first, last, behind } = await watch('ll', open.playUrl, true);
      assert.equal(`${last.videoWidth}x${last.videoHeight}`, '320x240');
      assert.ok(last.currentTime >= first.currentTime + 3, `the clock advanced: ${first.currentTime} -> ${last.currentTime}`);
      assert.ok(last.totalVideoFrames > first.totalVideoFrames + 50, `frames decoded: ${first.totalVideoFrames} -> ${last.totalVideoFrames}`);
      assert.ok(last.audioBytes > 0, 'AAC decoded');
      assert.equal(last.details?.canBlockReload, true, 'hls.js sees blocking reload');
      assert.ok(last.details?.partTarget, 'hls.js sees parts');
      assert.deepEqual(
        last.errors.filter((e) => e.fatal),
        [],
      );
      // a part whose audio ends before its video does makes hls.js load it again and again (bufferAppendNoProgress)
      assert.deepEqual(
        last.errors.filter((e) => e.details === 'bufferAppendNoProgress'),
        [],
        'every part holds the audio up to its end',
      );
      assert.ok(behind.length > 0, "hls.js reports the playhead's program date");
      report.push(
        `hls.js LL-HLS (fMP4, parts ${last.details?.partTarget} s): behind live median ${median(behind)} ms (min ${Math.min(...behind)}, max ${Math.max(...behind)}); hls.js latency ${last.latency.toFixed(2)} s; hls.js errors (none fatal): ${JSON.stringify(last.errors)}`,
      );
    } finally {
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    }
  });

  it('LL-HLS fMP4, video only (dataTyp 1): plays, and its latency is reported (no wait for audio)', async () => {
    const open = await gw.openStream({ simNo: '13900000053', chanId: 1, fmt: 1, dataTyp: 1 });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
    try {
      const { first, last, behind } = await watch('llv', open.playUrl, true);
      assert.equal(`${last.videoWidth}x${last.videoHeight}`, '320x240');
      assert.ok(last.currentTime >= first.currentTime + 3, `the clock advanced: ${first.currentTime} -> ${last.currentTime}`);
      assert.ok(last.totalVideoFrames > first.totalVideoFrames + 50);
      assert.equal(last.audioBytes, 0, 'no audio');
      assert.deepEqual(
        last.errors.filter((e) => e.fatal),
        [],
      );
      report.push(`hls.js LL-HLS video only: behind live median ${behind.length ? median(behind) : 'n/a'} ms; hls.js latency ${last.latency.toFixed(2)} s`);
    } finally {
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    }
  });

  it('MPEG-TS (subFmt mpegts) with AAC: video and audio play', async () => {
    const open = await gw.openStream({ simNo: '13900000052', chanId: 1, fmt: 1, extra: { subFmt: 'mpegts' } });
    const pub = gw.publish(open.streamName, testClip({ seconds: 2, audio: true }), { loop: true });
    try {
      const { first, last, behind } = await watch('ts', open.playUrl, true);
      assert.equal(`${last.videoWidth}x${last.videoHeight}`, '320x240');
      assert.ok(last.currentTime >= first.currentTime + 3, `the clock advanced: ${first.currentTime} -> ${last.currentTime}`);
      assert.ok(last.totalVideoFrames > first.totalVideoFrames + 50);
      assert.ok(last.audioBytes > 0, 'AAC decoded');
      assert.deepEqual(
        last.errors.filter((e) => e.fatal),
        [],
      );
      report.push(
        `hls.js MPEG-TS (2 s segments): behind live median ${behind.length ? median(behind) : 'n/a'} ms; hls.js latency ${last.latency.toFixed(2)} s`,
      );
    } finally {
      pub.stop();
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    }
  });
});
