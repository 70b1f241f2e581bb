/**
 * The console's talk button (live, dataTyp 2) in headless Chromium with a fake microphone playing a 1 kHz tone
 * (--use-fake-device-for-media-stream, --use-file-for-fake-audio-capture): the page opens the intercom request from
 * its form, shows the talk box instead of a player, and on Talk sends the microphone to the taUrl; the simulated
 * terminal (the simulator replaying the G.711A capture over TCP) hears it as G.711A with the tone on top; the
 * terminal's own voice comes back on the socket and the page counts it as heard.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { runSimulator, type SimulatorSummary } from '../../jt1078-ingest/tools/simulator';
import { wavHeader } from '../../jt1078-ingest/tools/talk-receiver';
import { within } from '../../../test/browser/page';
import { CAPTURES, useE2eGateway, waitFor } from '../../../test/e2e/helpers';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { powerAt } from '../../intercom/test/helpers';
import { launchChromium, logIn, screenshotDir } from './browser-helpers';

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;
const TONE_HZ = 1000;

describe('console in headless Chromium: the talk button (intercom)', function () {
  this.timeout(120_000);
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'audio-aac' }, { name: 'intercom' }, { name: 'console' }]);
  let browser: Browser | undefined;
  let page: Page;
  let dir = '';
  const pageLog: string[] = [];

  before(async function () {
    this.timeout(45_000);
    dir = scratchDir('console-talk');
    // the microphone: 5 s of a 1 kHz tone at 48 kHz (Chromium loops the file)
    const mic = path.join(dir, 'mic.wav');
    const pcm = new Int16Array(48000 * 5);
    for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(10000 * Math.sin((2 * Math.PI * TONE_HZ * i) / 48000));
    fs.writeFileSync(mic, Buffer.concat([wavHeader(pcm.byteLength, 48000), Buffer.from(pcm.buffer)]));
    browser = await launchChromium(['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${mic}`]);
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(15_000);
    page.on('console', (m) => pageLog.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (err) => pageLog.push(`[pageerror] ${err.message}`));
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(`      page console:\n        ${pageLog.slice(-30).join('\n        ')}`);
  });

  it('sends the microphone to the terminal and hears the terminal back', async () => {
    await logIn(page, e.gw.baseUrl, 'demo', 'demo');
    await page.fill('#open-sim', CAP.sim);
    await page.fill('#open-chan', String(CAP.channel));
    await page.selectOption('#open-datatyp', '2');
    await page.click('#open-submit');
    await page.waitForSelector('#talk-box', { state: 'visible' });
    assert.equal(await page.textContent('#open-error'), '');

    const heardWav = path.join(dir, 'heard.wav');
    const ac = new AbortController();
    const run: Promise<SimulatorSummary> = runSimulator({
      file: fixturePath(CAP.file),
      port: e.live2013,
      speed: 1,
      loop: true,
      talkWav: heardWav,
      signal: ac.signal,
    });
    let stopped = false;
    const stopTerminal = async (): Promise<SimulatorSummary> => {
      stopped = true;
      ac.abort();
      return within('the simulator to stop', 10_000, run);
    };
    try {
      await page.click('#talk-button');
      await page.waitForFunction(() => (globalThis as any).document.getElementById('talk-button').textContent === 'Stop talking');
      // both ways: at least 2 s sent, and the terminal's voice heard back
      await waitFor(
        '2 s of talk both ways',
        async () => {
          const t = (await page.textContent('#talk-state')) ?? '';
          const m = /sent ([\d.]+) s · heard ([\d.]+) s/.exec(t);
          return m && Number(m[1]) >= 2 && Number(m[2]) >= 1 ? t : undefined;
        },
        20_000,
        200,
      );
      await page.screenshot({ path: path.join(screenshotDir(), '7-talk.png'), fullPage: true });
      await page.click('#talk-button');
      assert.equal(await page.textContent('#talk-button'), 'Talk');
    } finally {
      if (!stopped) await stopTerminal().catch(() => undefined);
    }
    const r = (await stopTerminal()).talk!;
    assert.equal(r.codec, 'g711a', "encoded to the terminal's own codec");
    assert.ok(r.frames >= 50, `${r.frames} frames of 20 ms reached the terminal`);
    // what the terminal heard is the microphone's tone: its power at 1 kHz well above nearby frequencies
    const wav = fs.readFileSync(heardWav);
    const pcm = new Int16Array((wav.length - 44) >> 1);
    for (let i = 0; i < pcm.length; i++) pcm[i] = wav.readInt16LE(44 + 2 * i);
    const at = powerAt(pcm, TONE_HZ, 8000);
    for (const other of [500, 700, 1300, 1700]) assert.ok(at > 20 * powerAt(pcm, other, 8000), `1 kHz stands out against ${other} Hz`);
    assert.deepEqual(
      pageLog.filter((l) => /Content Security Policy|Refused to/i.test(l)),
      [],
    );
  });
});
