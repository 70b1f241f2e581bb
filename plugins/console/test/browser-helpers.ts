/**
 * What the console's browser tests share: Debian's Chromium launched as test/browser/page.ts does, the page's
 * <video> read back, and waiting for it to play.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM, within } from '../../../test/browser/page';
import { waitFor } from '../../../test/e2e/helpers';
import { repoRoot, scratchDir } from '../../../test/support/paths';

// browser globals inside page.evaluate callbacks (the project's lib is ES2022 without DOM; this stays in this module)
declare const document: any;

let shots: string | undefined;

/**
 * Where the console tests' screenshots go: with GW_UPDATE_SCREENSHOTS=1, plugins/console/screenshots/ (the README
 * shows them); otherwise a scratch folder removed when the process exits, so a test run leaves the checkout as it
 * found it.
 */
export function screenshotDir(): string {
  if (shots) return shots;
  if (process.env.GW_UPDATE_SCREENSHOTS === '1') {
    shots = path.join(repoRoot, 'plugins', 'console', 'screenshots');
    fs.mkdirSync(shots, { recursive: true });
  } else {
    shots = scratchDir('console-shots');
  }
  return shots;
}

export async function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: apt-get install -y chromium (test/support/install-tools.sh)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    // as test/browser/page.ts: autoplay without a click, Chromium's fake audio output (no sound card here), and no
    // background connections on this closed network
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
      ...extraArgs,
    ],
  });
}

export interface VideoState {
  time: number;
  frames: number;
  width: number;
  height: number;
  audioBytes: number;
  paused: boolean;
  error: number;
}

/** what the page's <video> shows now */
export function videoState(page: Page): Promise<VideoState> {
  return within(
    'reading the video element',
    5_000,
    page.evaluate(() => {
      const v = document.getElementById('video');
      return {
        time: v.currentTime,
        frames: v.getVideoPlaybackQuality().totalVideoFrames,
        width: v.videoWidth,
        height: v.videoHeight,
        audioBytes: v.webkitAudioDecodedByteCount ?? 0,
        paused: v.paused,
        error: v.error ? v.error.code : 0,
      };
    }),
  );
}

/** waits until the video has played `seconds` past where it was when first seen playing */
export async function seePlaying(page: Page, what: string, seconds: number, timeoutMs: number): Promise<{ first: VideoState; last: VideoState }> {
  const first = await waitFor(
    `${what}: the video to start`,
    async () => {
      const s = await videoState(page);
      assert.equal(s.error, 0, `${what}: media error ${s.error}`);
      return s.frames > 0 && s.time > 0 ? s : undefined;
    },
    timeoutMs,
    200,
  );
  const last = await waitFor(
    `${what}: ${seconds} s of playback`,
    async () => {
      const s = await videoState(page);
      return s.time >= first.time + seconds ? s : undefined;
    },
    timeoutMs,
    200,
  );
  return { first, last };
}

/** logs in through the page's form */
export async function logIn(page: Page, baseUrl: string, user: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/console/`);
  await page.fill('#login-user', user);
  await page.fill('#login-password', password);
  await page.click('#login-submit');
  await page.waitForSelector('#app', { state: 'visible' });
}
