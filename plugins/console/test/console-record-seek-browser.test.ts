/**
 * A recording played from the console in headless Chromium with a seek bar: a real recording (an open with
 * record: true fed by the simulator replaying a G.711A capture as a terminal), found in the page, played as MP4
 * through its signed link, sought to 80 % of its duration: the element's clock is there and frames are decoded
 * after the seek. The screenshot goes to a temporary folder (GW_SHOT_DIR to keep it; plugins/recorder/docs/ holds
 * the one the README shows).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { within } from '../../../test/browser/page';
import { CAPTURES, closeReq, openLive, useE2eGateway, waitFor } from '../../../test/e2e/helpers';
import { fixturePath } from '../../../test/support/paths';
import { launchChromium, logIn, seePlaying, videoState } from './browser-helpers';

// browser globals inside page.evaluate callbacks (the project's lib is ES2022 without DOM; this stays in this module)
declare const document: any;

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;

describe('console in headless Chromium: a recording plays as MP4 and seeks', function () {
  this.timeout(120_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'audio-aac' }, { name: 'recorder' }, { name: 'console' }]);
  let browser: Browser | undefined;
  let page: Page;
  const pageLog: string[] = [];
  const shots = process.env.GW_SHOT_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'console-seek-'));
  let reqId = '';

  before(async function () {
    this.timeout(60_000);
    // about 8 s of the terminal's media, recorded
    const open = await openLive(e.gw, CAP.sim, CAP.channel, { record: true });
    reqId = open.reqId;
    const ac = new AbortController();
    const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, loop: true, signal: ac.signal }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 8_000));
    await closeReq(e.gw, reqId);
    ac.abort();
    await within('the simulator to stop', 10_000, run);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (err) => pageLog.push(`[pageerror] ${err.message}`));
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    if (!process.env.GW_SHOT_DIR) fs.rmSync(shots, { recursive: true, force: true });
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(`      page console:\n        ${pageLog.slice(-30).join('\n        ')}`);
  });

  it('plays the recording, seeks to 80 % and decodes frames there', async () => {
    await logIn(page, e.gw.baseUrl, 'demo', 'demo');
    await page.fill('#records-sim', CAP.sim);
    const row = `#records tbody tr[data-reqid="${reqId}"]`;
    await waitFor(
      'the recording to be listed',
      async () => {
        await page.click('#records-submit');
        await page.waitForFunction(
          () => document.getElementById('records-empty').textContent !== '' || document.getElementById('records-error').textContent !== '',
        );
        return (await page.$(row)) ? true : undefined;
      },
      15_000,
      500,
    );
    await page.click(`${row} button.play-record`);
    await seePlaying(page, 'record', 1, 30_000);

    const duration: number = await page.evaluate(() => document.getElementById('video').duration);
    assert.ok(Number.isFinite(duration) && duration > 5, `duration ${duration}`);
    const before = await videoState(page);
    const target = duration * 0.8;
    // seek as the native seek bar does, then count the frames the element presents from there
    const after = await within(
      'the seek',
      20_000,
      page.evaluate(async (to: number) => {
        const v = document.getElementById('video');
        const presented: number[] = [];
        await new Promise<void>((resolve, reject) => {
          v.addEventListener('seeked', () => resolve(), { once: true });
          v.addEventListener('error', () => reject(new Error(`media error ${v.error?.code}`)), { once: true });
          v.currentTime = to;
        });
        const seekedAt = v.currentTime;
        await new Promise<void>((resolve) => {
          const onFrame = (_now: number, meta: { mediaTime: number }): void => {
            presented.push(meta.mediaTime);
            if (presented.length >= 5) resolve();
            else v.requestVideoFrameCallback(onFrame);
          };
          v.requestVideoFrameCallback(onFrame);
          void v.play();
        });
        return { seekedAt, presented, frames: v.getVideoPlaybackQuality().totalVideoFrames, time: v.currentTime, error: v.error ? v.error.code : 0 };
      }, target),
    );
    assert.equal(after.error, 0);
    assert.ok(Math.abs(after.seekedAt - target) < 1, `seeked to ${after.seekedAt} s for ${target} s`);
    assert.ok(
      after.presented.every((t) => t >= target - 1),
      `frames presented from ${after.presented.join(', ')}`,
    );
    assert.ok(after.frames > before.frames, `frames decoded after the seek (${before.frames} -> ${after.frames})`);
    // the element's clock goes on from there
    let seen: unknown;
    await waitFor(
      'playback after the seek',
      async () => {
        const s = await videoState(page);
        seen = { ...s, after, ended: await page.evaluate(() => document.getElementById('video').ended) };
        return s.time > after.seekedAt + 0.5 || (seen as { ended: boolean }).ended ? s : undefined;
      },
      15_000,
      200,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(seen)}`);
    });
    await page.evaluate(() => document.getElementById('video').pause());
    await page.screenshot({ path: path.join(shots, 'record-mp4-seek.png'), fullPage: true });
    assert.ok(fs.statSync(path.join(shots, 'record-mp4-seek.png')).size > 0);
    assert.deepEqual(
      pageLog.filter((l) => /Content Security Policy|Refused to/i.test(l)),
      [],
    );
  });
});
