/**
 * A real browser player for the browser tests: Debian's Chromium (headless, driven by playwright-core) opening a
 * tiny page, served from 127.0.0.1, that plays FLV streams with mpegts.js from node_modules. The page keeps, per
 * player, what mpegts.js reported (events, errors) and what the <video> element shows (size, clock, decoded
 * frames); the tests read that back with snapshot(). A player can also be listened to (listen(), hear()): its sound
 * through a Web Audio analyser, for its level and spectrum. Never a browser build downloaded by a test tool.
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

/** What a listener of one player hears: the element's audio through a Web Audio analyser (see listen()). */
export interface AudioSnapshot {
  /** the element's webkitAudioDecodedByteCount: bytes of compressed audio its decoder has taken */
  decodedAudioBytes: number;
  muted: boolean;
  volume: number;
  /** mpegts.js's media info: the stream's codec (mp4a.40.x, as its AudioSpecificConfig says), rate and channels */
  audioCodec?: string;
  audioSampleRate?: number;
  audioChannelCount?: number;
  mimeType?: string;
  /** the types mpegts.js created the element's SourceBuffers with (what the browser was asked to decode) */
  sourceBufferTypes: string[];
  /** the page's AudioContext: 'running' when its graph is being rendered */
  contextState: string;
  /** its clock, s (advances only while it renders) */
  contextTime: number;
  sampleRate: number;
  /** the analyser's frequency resolution, Hz */
  binHz: number;
  /** the strongest component in the band asked for (between bins), Hz, and its level, dB */
  peakHz: number;
  peakDb: number;
  /** the strongest component more than 50 Hz away from it, and the median level of the band without it, dB */
  nextHz: number;
  nextDb: number;
  floorDb: number;
  /** RMS of the analyser's last window of samples (full scale 1) */
  rms: number;
  /** performance.now() when read, ms */
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
// The types mpegts.js gives MediaSource for its SourceBuffers (its media info names the stream's codec, which is not
// always what it asks the browser to decode), kept per MediaSource and found again from the element it plays in.
const sourceBufferTypes = new WeakMap();
const mediaSourceByUrl = new Map();
const nativeAddSourceBuffer = MediaSource.prototype.addSourceBuffer;
MediaSource.prototype.addSourceBuffer = function (type) {
  if (!sourceBufferTypes.has(this)) sourceBufferTypes.set(this, []);
  sourceBufferTypes.get(this).push(type);
  return nativeAddSourceBuffer.call(this, type);
};
const nativeCreateObjectURL = URL.createObjectURL;
URL.createObjectURL = function (obj) {
  const url = nativeCreateObjectURL.call(URL, obj);
  if (obj instanceof MediaSource) mediaSourceByUrl.set(url, obj);
  return url;
};
const sourceBufferTypesOf = (video) => {
  const ms = video.srcObject instanceof MediaSource ? video.srcObject : mediaSourceByUrl.get(video.src);
  return (ms && sourceBufferTypes.get(ms)) || [];
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
// Listening: the element's sound routed through Web Audio to an analyser. With --disable-audio-output the
// AudioContext renders into Chromium's fake output, on a timer at its real rate, and a MediaElementAudioSourceNode
// hands it what the element decoded, resampled to the context's rate: the analyser gets what a listener would hear.
let audioCtx = null;
window.listen = async (id, fftSize) => {
  const rec = window.players[id];
  if (!rec) throw new Error('no player ' + id);
  audioCtx = audioCtx || new AudioContext();
  // a muted element feeds silence to the graph too: a listener needs it unmuted (the autoplay policy flag lets it)
  rec.video.muted = false;
  rec.video.volume = 1;
  rec.source = audioCtx.createMediaElementSource(rec.video);
  rec.analyser = audioCtx.createAnalyser();
  rec.analyser.fftSize = fftSize;
  // each reading is one window on its own, not averaged with earlier ones (a reading before the sound came would linger)
  rec.analyser.smoothingTimeConstant = 0;
  rec.source.connect(rec.analyser);
  rec.analyser.connect(audioCtx.destination);
  await audioCtx.resume();
  return { state: audioCtx.state, sampleRate: audioCtx.sampleRate };
};
window.hear = (id, band) => {
  const rec = window.players[id];
  if (!rec) return null;
  const v = rec.video;
  const mi = rec.player && rec.player.mediaInfo;
  const out = {
    decodedAudioBytes: v.webkitAudioDecodedByteCount, muted: v.muted, volume: v.volume,
    audioCodec: mi ? mi.audioCodec : undefined, audioSampleRate: mi ? mi.audioSampleRate : undefined,
    audioChannelCount: mi ? mi.audioChannelCount : undefined, mimeType: mi ? mi.mimeType : undefined,
    sourceBufferTypes: sourceBufferTypesOf(v),
    contextState: audioCtx ? audioCtx.state : 'none', contextTime: audioCtx ? audioCtx.currentTime : 0,
    sampleRate: audioCtx ? audioCtx.sampleRate : 0, binHz: 0, peakHz: 0, peakDb: -Infinity, nextDb: -Infinity, nextHz: 0,
    floorDb: -Infinity, rms: 0, at: performance.now(),
  };
  const an = rec.analyser;
  if (!an) return out;
  const time = new Float32Array(an.fftSize);
  an.getFloatTimeDomainData(time);
  let sq = 0;
  for (const x of time) sq += x * x;
  out.rms = Math.sqrt(sq / time.length);
  const db = new Float32Array(an.frequencyBinCount);
  an.getFloatFrequencyData(db);
  const binHz = audioCtx.sampleRate / an.fftSize;
  out.binHz = binHz;
  // only the band the source can carry (the terminal sends 8 kHz audio): above it there is nothing to compare with
  const lo = Math.max(1, Math.ceil(band[0] / binHz));
  const hi = Math.min(db.length - 2, Math.floor(band[1] / binHz));
  let k = lo;
  for (let i = lo; i <= hi; i++) if (db[i] > db[k]) k = i;
  // the peak between bins: a parabola through the peak bin and its neighbours (in dB)
  const a = db[k - 1], b = db[k], c = db[k + 1];
  const d = a - 2 * b + c;
  const off = Number.isFinite(d) && d < 0 ? (0.5 * (a - c)) / d : 0;
  out.peakHz = (k + off) * binHz;
  out.peakDb = b;
  // the strongest component away from the peak (a window's skirt is a few bins wide: 50 Hz is well clear of it)
  const away = Math.ceil(50 / binHz);
  const rest = [];
  for (let i = lo; i <= hi; i++) {
    if (Math.abs(i - k) <= away) continue;
    rest.push(db[i]);
    if (db[i] > out.nextDb) { out.nextDb = db[i]; out.nextHz = i * binHz; }
  }
  rest.sort((x, y) => x - y);
  out.floorDb = rest.length ? rest[rest.length >> 1] : -Infinity;
  return out;
};
window.stop = (id) => {
  const rec = window.players[id];
  if (!rec || !rec.player) return;
  if (rec.source) rec.source.disconnect();
  if (rec.analyser) rec.analyser.disconnect();
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
  private constructor(
    private readonly server: http.Server,
    private readonly browser: Browser,
    readonly page: Page,
    readonly origin: string,
  ) {}

  static async start(): Promise<BrowserPlayer> {
    if (!fs.existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is missing at ${CHROMIUM}: install Debian's 'chromium' package (apt-get install -y chromium); test/support/install-tools.sh does this`,
      );
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
    await within(
      'the page server to listen',
      5_000,
      new Promise<void>((resolve, reject) => {
        server.once('listening', resolve);
        server.once('error', reject);
      }),
    );
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        timeout: 30_000,
        args: [
          // players start without a click, unmuted too (listen() unmutes them)
          '--autoplay-policy=no-user-gesture-required',
          // Chromium's fake audio output (FakeAudioManager, as its own browser tests use): streams are consumed on a
          // timer at their real rate, so media clocks and Web Audio run as with a sound card, on any machine, with
          // no sound card, PulseAudio server or ALSA device needed (this one has none) and none played through
          '--disable-audio-output',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          // this machine's network is closed: no background connections to be refused
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
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
    return within(
      'MediaSource.isTypeSupported in the page',
      5_000,
      this.page.evaluate(() => (globalThis as any).h264Supported() as boolean),
    );
  }

  /** mpegts.js's own feature check for live FLV over MSE. */
  async mpegtsFeatures(): Promise<Record<string, unknown>> {
    return within(
      'mpegts.getFeatureList in the page',
      5_000,
      this.page.evaluate(() => (globalThis as any).mpegts.getFeatureList() as Record<string, unknown>),
    );
  }

  /** Starts an mpegts.js player of `url`; `source` adds MediaDataSource fields (e.g. `{ hasAudio: false }`). */
  play(id: string, url: string, source: Record<string, unknown> = {}): Promise<void> {
    return within(
      `starting player '${id}' in the page`,
      5_000,
      this.page.evaluate(([i, u, src]) => (globalThis as any).play(i, u, src), [id, url, source] as const),
    );
  }

  async snapshot(id: string): Promise<PlayerSnapshot> {
    const s = await within(
      `reading player '${id}' from the page`,
      5_000,
      this.page.evaluate((i) => (globalThis as any).snapshot(i) as PlayerSnapshot | null, id),
    );
    if (!s) throw new Error(`no player '${id}' in the page`);
    return s;
  }

  /**
   * Unmutes the player's element and routes its sound through Web Audio to an analyser of `fftSize` samples; returns
   * the AudioContext's state (it must be 'running') and rate.
   */
  listen(id: string, fftSize = 32768): Promise<{ state: string; sampleRate: number }> {
    return within(
      `listening to player '${id}' in the page`,
      5_000,
      this.page.evaluate(([i, n]) => (globalThis as any).listen(i, n) as Promise<{ state: string; sampleRate: number }>, [id, fftSize] as const),
    );
  }

  /** What the analyser of a listened player hears now, its spectrum searched within band ([lowHz, highHz]). */
  async hear(id: string, band: [number, number] = [50, 4000]): Promise<AudioSnapshot> {
    const s = await within(
      `reading player '${id}'s sound in the page`,
      5_000,
      this.page.evaluate(([i, b]) => (globalThis as any).hear(i, b) as AudioSnapshot | null, [id, band] as const),
    );
    if (!s) throw new Error(`no player '${id}' in the page`);
    return s;
  }

  stopPlayer(id: string): Promise<void> {
    return within(
      `stopping player '${id}' in the page`,
      5_000,
      this.page.evaluate((i) => (globalThis as any).stop(i), id),
    );
  }

  /** Polls the player until check returns true; fails after timeoutMs with `what`, the last snapshot and the page's console. */
  async waitUntil(id: string, what: string, check: (s: PlayerSnapshot) => boolean, timeoutMs: number): Promise<PlayerSnapshot> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.snapshot(id);
      if (check(s)) return s;
      if (Date.now() > deadline) {
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; player '${id}': ${JSON.stringify(s)}; page console: ${this.console.slice(-20).join(' | ') || '(empty)'}`,
        );
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
