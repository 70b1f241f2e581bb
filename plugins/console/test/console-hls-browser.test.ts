/**
 * The console's HLS path in headless Chromium: with hls-out on the site, a channel opened from the page's form with
 * fmt 1 plays through hls.js (served by the console from node_modules) under the console's CSP: the element's clock
 * and decoded frames advance at the capture's size, with audio decoded; the RTSP-style copy box shows the play URL.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { within } from '../../../test/browser/page';
import { CAPTURES, useE2eGateway } from '../../../test/e2e/helpers';
import { fixturePath } from '../../../test/support/paths';
import { launchChromium, logIn, screenshotDir, seePlaying } from './browser-helpers';

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;

describe('console in headless Chromium: HLS (fmt 1) through hls.js', function () {
  this.timeout(120_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'audio-aac' }, { name: 'hls-out' }, { name: 'console' }]);
  let browser: Browser | undefined;
  let page: Page;
  const pageLog: string[] = [];
  let stopTerminal: (() => Promise<void>) | undefined;

  before(async function () {
    this.timeout(45_000);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (err) => pageLog.push(`[pageerror] ${err.message}`));
  });

  after(async () => {
    await stopTerminal?.().catch(() => undefined);
    await browser?.close().catch(() => undefined);
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(`      page console:\n        ${pageLog.slice(-30).join('\n        ')}`);
  });

  it('opens with fmt 1 and plays it with hls.js: video advancing, audio decoded, no CSP violation', async () => {
    await logIn(page, e.gw.baseUrl, 'demo', 'demo');
    await page.fill('#open-sim', CAP.sim);
    await page.fill('#open-chan', String(CAP.channel));
    await page.selectOption('#open-fmt', '1');
    await page.click('#open-submit');
    await page.waitForSelector('#streams tbody tr[data-reqid]');
    assert.equal(await page.textContent('#open-error'), '');
    const ac = new AbortController();
    const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, loop: true, signal: ac.signal });
    stopTerminal = async () => {
      ac.abort();
      await within('the simulator to stop', 10_000, run);
    };

    // HLS starts a segment or two behind live: a longer wait than FLV's
    const { first, last } = await seePlaying(page, 'hls', 3, 45_000);
    assert.equal(last.height, CAP.height);
    assert.ok(last.frames > first.frames, `frames advance (${first.frames} -> ${last.frames})`);
    assert.ok(last.audioBytes > 0, 'the element decodes audio');
    assert.match(await page.inputValue('#copy-url-text'), /^http:\/\/.+\/index\.m3u8\?/);
    assert.deepEqual(
      pageLog.filter((l) => /Content Security Policy|Refused to/i.test(l)),
      [],
    );
    await page.screenshot({ path: path.join(screenshotDir(), '6-hls.png'), fullPage: true });
  });
});
