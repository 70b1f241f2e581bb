/**
 * A real browser player for the browser tests: Debian's Chromium (headless, driven by playwright-core) opening a
 * tiny page, served from 127.0.0.1, that plays FLV streams with mpegts.js from node_modules. The page keeps, per
 * player, what mpegts.js reported (events, errors) and what the <video> element shows (size, clock, decoded
 * frames); the tests read that back with snapshot(). Never a browser build downloaded by a test tool.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { repoRoot } from '../support/paths';

/** Where Debian's chromium package puts its launcher (test/support/install-tools.sh installs it). */
export const CHROMIUM = process.env.GW_CHROMIUM ?? '/usr/bin/chromium';

/** What one player in the page has seen so far. */
export interface PlayerSnapshot {
  /** mpegts.js ERROR events: [errorType, errorDetail, errorInfo] */
  errors: Array<{ type: string; detail: string; info: unknown }>;
  /** names of the other mpegts.js events seen (media_info, loading_complete, ...) */
  events: string[];
  /** mpegts.js MEDIA_INFO, when it came */
  mediaInfo?: { videoCodec?: string; width?: number; height?: number; fps?: number; hasAudio?: boolean; mimeType?: string };
  /** close codes of the WebSockets the page opened for this player (seen by a wrapper around WebSocket) */
  wsCloseCodes: number[];
  /** the <video> element */
  videoWidth: number;
  videoHeight: number;
  currentTime: number;
  readyState: number;
  paused: boolean;
  /** MediaError code of the element, 0 for none */
  mediaError: number;
  totalVideoFrames: number;
  droppedVideoFrames: number;
  corruptedVideoFrames: number;
  /** end of the last buffered range, s */
  bufferedEnd: number;
  /** the page's clock (performance.now()) when this was read, ms */
  at: number;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>mpegts.js player</title></head>
<body>
<script src="/mpegts.js"></script>
<script>
'use strict';
window.players = {};
// The close codes of the WebSockets the page opens, by URL (mpegts.js opens its own once MediaSource is open, and
// does not tell the code): a wrapper around WebSocket records them.
window.wsCloseCodes = {};
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(url, ...rest) {
    super(url, ...rest);
    const key = String(url);
    this.addEventListener('close', (e) => (window.wsCloseCodes[key] = window.wsCloseCodes[key] || []).push(e.code));
  }
};
window.h264Supported = () => MediaSource.isTypeSupported('video/mp4; codecs="avc1.42E01E"');
window.play = (id, url, source) => {
  const video = document.createElement('video');
  video.muted = true;
  video.autoplay = true;
  video.playsInline = true;
  document.body.appendChild(video);
  const rec = { url, video, player: null, errors: [], events: [], mediaInfo: undefined };
  window.players[id] = rec;
  const player = mpegts.createPlayer({ type: 'flv', isLive: true, url, ...(source || {}) }, { enableWorker: false, enableStashBuffer: false });
  rec.player = player;
  player.on(mpegts.Events.ERROR, (type, detail, info) => rec.errors.push({ type, detail, info: info === undefined ? null : JSON.parse(JSON.stringify(info)) }));
  player.on(mpegts.Events.MEDIA_INFO, (mi) => {
    rec.events.push('media_info');
    rec.mediaInfo = { videoCodec: mi.videoCodec, width: mi.width, height: mi.height, fps: mi.fps, hasAudio: mi.hasAudio, mimeType: mi.mimeType };
  });
  for (const ev of [mpegts.Events.LOADING_COMPLETE, mpegts.Events.RECOVERED_EARLY_EOF]) player.on(ev, () => rec.events.push(ev));
  player.attachMediaElement(video);
  player.load();
  const p = player.play();
  if (p && p.catch) p.catch((e) => rec.events.push('play() rejected: ' + e));
};
window.snapshot = (id) => {
  const rec = window.players[id];
  if (!rec) return null;
  const v = rec.video;
  const q = v.getVideoPlaybackQuality();
  return {
    errors: rec.errors, events: rec.events, mediaInfo: rec.mediaInfo, wsCloseCodes: window.wsCloseCodes[rec.url] || [],
    videoWidth: v.videoWidth, videoHeight: v.videoHeight, currentTime: v.currentTime, readyState: v.readyState,
    paused: v.paused, mediaError: v.error ? v.error.code : 0,
    totalVideoFrames: q.totalVideoFrames, droppedVideoFrames: q.droppedVideoFrames, corruptedVideoFrames: q.corruptedVideoFrames,
    bufferedEnd: v.buffered.length ? v.buffered.end(v.buffered.length - 1) : 0,
    at: performance.now(),
  };
};
window.stop = (id) => {
  const rec = window.players[id];
  if (!rec || !rec.player) return;
  rec.player.pause();
  rec.player.unload();
  rec.player.detachMediaElement();
  rec.player.destroy();
  rec.player = null;
  rec.video.remove();
};
</script>
</body></html>
`;

/** Bounds a promise: fails with `what` after ms (a broken browser must fail the test, never hang it). */
export async function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The page's server, Chromium and the page, started together and stopped together. */
export class BrowserPlayer {
  /** what the page printed to its console and any uncaught error there (for failure messages) */
  readonly console: string[] = [];
  private constructor(private readonly server: http.Server, private readonly browser: Browser, readonly page: Page, readonly origin: string) {}

  static async start(): Promise<BrowserPlayer> {
    if (!fs.existsSync(CHROMIUM)) {
      throw new Error(`Chromium is missing at ${CHROMIUM}: install Debian's 'chromium' package (apt-get install -y chromium); test/support/install-tools.sh does this`);
    }
    const mpegtsJs = fs.readFileSync(path.join(repoRoot, 'node_modules', 'mpegts.js', 'dist', 'mpegts.js'));
    const server = http.createServer((req, res) => {
      const url = (req.url ?? '/').split('?')[0];
      if (url === '/') {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(PAGE);
      } else if (url === '/mpegts.js') {
        res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(mpegtsJs);
      } else {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('not found\n');
      }
    });
    server.listen(0, '127.0.0.1');
    await within('the page server to listen', 5_000, new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    }));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        timeout: 30_000,
        args: [
          '--autoplay-policy=no-user-gesture-required',
          '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
          // this machine's network is closed: no background connections to be refused
          '--disable-background-networking', '--disable-component-update', '--disable-sync',
        ],
      });
      const page = await browser.newPage();
      const bp = new BrowserPlayer(server, browser, page, origin);
      page.on('console', (m) => bp.console.push(`[${m.type()}] ${m.text()}`));
      page.on('pageerror', (e) => bp.console.push(`[pageerror] ${e.message}`));
      page.setDefaultTimeout(10_000);
      await page.goto(origin + '/', { timeout: 10_000 });
      await page.waitForFunction(() => typeof (globalThis as any).mpegts?.createPlayer === 'function', undefined, { timeout: 10_000 });
      return bp;
    } catch (err) {
      await browser?.close().catch(() => undefined);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw err;
    }
  }

  /** MediaSource's answer for H.264 Constrained Baseline in MP4 (what mpegts.js remuxes FLV into). */
  h264Supported(): Promise<boolean> {
    return within('MediaSource.isTypeSupported in the page', 5_000, this.page.evaluate(() => (globalThis as any).h264Supported() as boolean));
  }

  /** mpegts.js's own feature check for live FLV over MSE. */
  async mpegtsFeatures(): Promise<Record<string, unknown>> {
    return within('mpegts.getFeatureList in the page', 5_000, this.page.evaluate(() => (globalThis as any).mpegts.getFeatureList() as Record<string, unknown>));
  }

  /** Starts an mpegts.js player of `url`; `source` adds MediaDataSource fields (e.g. `{ hasAudio: false }`). */
  play(id: string, url: string, source: Record<string, unknown> = {}): Promise<void> {
    return within(`starting player '${id}' in the page`, 5_000,
      this.page.evaluate(([i, u, src]) => (globalThis as any).play(i, u, src), [id, url, source] as const));
  }

  async snapshot(id: string): Promise<PlayerSnapshot> {
    const s = await within(`reading player '${id}' from the page`, 5_000, this.page.evaluate((i) => (globalThis as any).snapshot(i) as PlayerSnapshot | null, id));
    if (!s) throw new Error(`no player '${id}' in the page`);
    return s;
  }

  stopPlayer(id: string): Promise<void> {
    return within(`stopping player '${id}' in the page`, 5_000, this.page.evaluate((i) => (globalThis as any).stop(i), id));
  }

  /** Polls the player until check returns true; fails after timeoutMs with `what`, the last snapshot and the page's console. */
  async waitUntil(id: string, what: string, check: (s: PlayerSnapshot) => boolean, timeoutMs: number): Promise<PlayerSnapshot> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.snapshot(id);
      if (check(s)) return s;
      if (Date.now() > deadline) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; player '${id}': ${JSON.stringify(s)}; page console: ${this.console.slice(-20).join(' | ') || '(empty)'}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async close(): Promise<void> {
    await within('Chromium to close', 10_000, this.browser.close()).catch(() => undefined);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
