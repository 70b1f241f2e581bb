/**
 * The console in headless Chromium (Debian's, driven by playwright-core), on a real gateway (jt1078-ingest, flv-out,
 * audio-aac, recorder, console) fed by the simulator replaying a capture as a terminal over TCP: a wrong password
 * is refused; log in; open the terminal's channel with record on and see it play in the page (the element's clock
 * and decoded frames advance, audio is decoded) and listed as ready with its codecs; close it; find its recording
 * and play it in the page (its MP4 form, through a signed link); download it as FLV and as MP4. No page breaks its CSP. Screenshots of each step go to
 * plugins/console/screenshots/ (shown in the plugin's README) when GW_UPDATE_SCREENSHOTS=1 (browser-helpers.ts).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { within } from '../../../test/browser/page';
import { CAPTURES, useE2eGateway, waitFor } from '../../../test/e2e/helpers';
import { fixturePath } from '../../../test/support/paths';
import { launchChromium, screenshotDir, seePlaying } from './browser-helpers';

// browser globals inside page.evaluate callbacks (the project's lib is ES2022 without DOM; these stay in this module)
declare const document: any;
declare const localStorage: { length: number };
declare const sessionStorage: { length: number };

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;

describe('console in headless Chromium: log in, open, play, close, find the recording, play it', function () {
  this.timeout(120_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'audio-aac' }, { name: 'recorder' }, { name: 'console' }]);
  let browser: Browser | undefined;
  let page: Page;
  const pageLog: string[] = [];
  let terminal: { stop(): Promise<void> } | undefined;

  before(async function () {
    this.timeout(45_000);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    page.setDefaultTimeout(15_000);
    page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (err) => pageLog.push(`[pageerror] ${err.message}`));
  });

  after(async () => {
    await terminal?.stop().catch(() => undefined);
    await browser?.close().catch(() => undefined);
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(`      page console:\n        ${pageLog.slice(-30).join('\n        ')}`);
  });

  const shot = (name: string) => page.screenshot({ path: path.join(screenshotDir(), `${name}.png`), fullPage: true });
  const cspViolations = () => pageLog.filter((l) => /Content Security Policy|Refused to (load|execute|apply|connect)/i.test(l));

  it('serves the console with a strict CSP and nosniff, and refuses a wrong password', async () => {
    const res = await fetch(`${e.gw.baseUrl}/console/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-security-policy') ?? '', /script-src 'self';/);
    assert.doesNotMatch(res.headers.get('content-security-policy') ?? '', /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    await res.arrayBuffer();

    await page.goto(`${e.gw.baseUrl}/console`);
    await page.fill('#login-user', 'demo');
    await page.fill('#login-password', 'wrong');
    await page.click('#login-submit');
    await page.waitForFunction(() => document.getElementById('login-error').textContent !== '');
    assert.equal(await page.textContent('#login-error'), 'Wrong user or password.');
    assert.equal(await page.isHidden('#app'), true);
    await page.fill('#login-password', 'demo');
    await shot('1-login');
    await page.click('#login-submit');
    await page.waitForSelector('#app', { state: 'visible' });
    // the password is not kept in the form, nor anywhere the page could persist it
    assert.equal(await page.inputValue('#login-password'), '');
    const stored = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie }));
    assert.deepEqual(stored, { local: 0, session: 0, cookie: '' });
    await page.waitForFunction(() => /status/.test(document.getElementById('health').textContent ?? ''));
  });

  let reqId = '';
  let closed = false;
  it("opens the terminal's channel with record on and plays it: video advancing, frames and audio decoded", async () => {
    await page.fill('#open-sim', CAP.sim);
    await page.fill('#open-chan', String(CAP.channel));
    await page.selectOption('#open-fmt', '0');
    await page.check('#open-record');
    await page.click('#open-submit');
    await page.waitForSelector('#streams tbody tr[data-reqid]');
    reqId = (await page.getAttribute('#streams tbody tr[data-reqid]', 'data-reqid'))!;
    assert.equal(await page.textContent('#open-error'), '');
    // the terminal pushes once the channel is open (as a platform would after its push command)
    const ac = new AbortController();
    // The close cuts the terminal's link at once (decisions.md: the last request on a stream closes the stream and
    // its terminal connection), so the simulator, still pushing, may see a reset before the stop below.
    const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, loop: true, signal: ac.signal }).catch((err: NodeJS.ErrnoException) => {
      if (!closed || (err.code !== 'ECONNRESET' && err.code !== 'EPIPE')) throw err;
    });
    terminal = {
      stop: async () => {
        ac.abort();
        await within('the simulator to stop', 10_000, run);
      },
    };

    const { first, last } = await seePlaying(page, 'live', 3, 30_000);
    // D1 720x576 with non-square pixels: the element's width is the display width, its height the coded one
    assert.equal(last.height, CAP.height);
    assert.ok(last.width >= CAP.width, `width ${last.width}`);
    assert.ok(last.frames > first.frames, `frames advance (${first.frames} -> ${last.frames})`);
    assert.ok(last.audioBytes > 0, "the element decodes audio (the terminal's G.711A as AAC)");
    // the list says what the stream is, refreshed by the page
    const row = `#streams tbody tr[data-reqid="${reqId}"]`;
    await page.waitForFunction((sel) => /h264 720x576/.test(document.querySelector(sel)?.textContent ?? ''), row);
    assert.equal(await page.textContent(`${row} td.ready`), 'ready');
    // the source's codecs, as the stream has them (players get AAC from the audio-aac stage)
    assert.match((await page.textContent(row)) ?? '', /g711a 8000 Hz/);
    await page.waitForFunction((sel) => document.querySelector(`${sel} td.players`)?.textContent === '1', row);
    assert.match((await page.textContent('#player-stats')) ?? '', /\d+x576 · [\d.]+ s · \d+ frames .* audio decoded/);
    await shot('2-playing');
  });

  it('closes it from the list: the request goes, the player stops', async () => {
    const row = `#streams tbody tr[data-reqid="${reqId}"]`;
    closed = true;
    await page.click(`${row} button.close`);
    await page.waitForSelector(row, { state: 'detached' });
    await page.waitForFunction(
      () =>
        document.getElementById('video').currentSrc === '' ||
        document.getElementById('player-title').textContent === '(closed)' ||
        document.getElementById('player-stats').textContent === '',
    );
    await terminal?.stop();
    terminal = undefined;
    await shot('3-closed');
  });

  it('finds the recording by SIM and time, plays it in the page and downloads it', async () => {
    await page.fill('#records-sim', CAP.sim);
    const row = `#records tbody tr[data-reqid="${reqId}"]`;
    // the record row is final once the recording ended with the request: search until it is listed
    await waitFor(
      'the recording to be listed',
      async () => {
        await page.click('#records-submit');
        await page.waitForFunction(
          () => document.getElementById('records-empty').textContent !== '' || document.getElementById('records-error').textContent !== '',
        );
        assert.equal(await page.textContent('#records-error'), '');
        return (await page.$(row)) ? true : undefined;
      },
      15_000,
      500,
    );
    assert.match((await page.textContent(row)) ?? '', /av/);
    await page.click(`${row} button.play-record`);
    const { first, last } = await seePlaying(page, 'record', 3, 30_000);
    assert.equal(last.height, CAP.height);
    assert.ok(last.frames > first.frames);
    // the record's MP4 form through a signed link (the element cannot send the credentials); Chromium decodes the
    // AAC the MP4 carries for the terminal's G.711A
    assert.match(await page.evaluate(() => document.getElementById('video').currentSrc), /\/strm\/record\/signed\/.+\.flv\?format=mp4&app=demo&exp=\d+&sig=/);
    assert.ok(last.audioBytes > 0, 'the element decodes the audio');
    await shot('4-record');

    const [download] = await Promise.all([page.waitForEvent('download'), page.click(`${row} button.download`)]);
    const file = await download.path();
    const head = fs.readFileSync(file).subarray(0, 3).toString('latin1');
    assert.equal(head, 'FLV');
    // the file's own name (the server's Content-Disposition wins over the link's download name)
    assert.equal(download.suggestedFilename(), `${reqId}.flv`);
    const [mp4] = await Promise.all([page.waitForEvent('download'), page.click(`${row} button.download-mp4`)]);
    assert.equal(
      fs
        .readFileSync(await mp4.path())
        .subarray(4, 8)
        .toString('latin1'),
      'ftyp',
    );
    assert.equal(mp4.suggestedFilename(), `${reqId}.mp4`);
    assert.deepEqual(cspViolations(), []);
  });

  it('serves the API docs (Swagger UI from node_modules) under the same CSP', async () => {
    const docs = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    const log: string[] = [];
    docs.on('console', (m) => log.push(m.text()));
    await docs.goto(`${e.gw.baseUrl}/docs`);
    await docs.waitForSelector('.opblock', { timeout: 20_000 });
    const ops = await docs.$$eval('.opblock-summary-path', (els: any[]) => els.map((x) => x.textContent as string));
    assert.ok(ops.includes('/strm/open') && ops.includes('/strm/record'), ops.join(', '));
    await docs.screenshot({ path: path.join(screenshotDir(), '5-docs.png') });
    assert.deepEqual(
      log.filter((l) => /Content Security Policy|Refused to/i.test(l)),
      [],
    );
    await docs.close();
  });
});
