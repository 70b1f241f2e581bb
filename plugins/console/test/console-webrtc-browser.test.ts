/**
 * The console's WebRTC path in headless Chromium: with the webrtc plugin on the site, a channel opened from the
 * page's form as "0 WebRTC" (fmt 0, scheme webrtc) plays by WHEP in the console's <video>, under its CSP, at the
 * capture's size with its audio; Stop ends the session (DELETE), and the request's WebRTC player is gone. An
 * intercom request opened the same way talks over WebRTC from the Talk button: the microphone's RTP reaches the
 * talk path (talk_packets_total grows, intercom logs the talk as webrtc).
 */
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { freeUdpPort } from '../../webrtc/test/whep-page';
import { within } from '../../../test/browser/page';
import { CAPTURES, useE2eGateway, waitFor } from '../../../test/e2e/helpers';
import { fixturePath } from '../../../test/support/paths';
import { launchChromium, logIn, seePlaying } from './browser-helpers';

const CAP = CAPTURES.find((c) => c.file === 'jt1078/gojt808-d1-h264-g711a-2013.bin')!;

describe('console in headless Chromium: WebRTC (fmt 0, scheme webrtc)', function () {
  this.timeout(120_000);
  const webrtcConfig: Record<string, unknown> = { host: '127.0.0.1', publicHost: '127.0.0.1' };
  before(async () => {
    // read when the gateway below starts (its before hook runs after this one)
    webrtcConfig.udpPort = await freeUdpPort();
  });
  const e = useE2eGateway({ disconnectGraceMs: 200 }, {}, [{ name: 'intercom' }, { name: 'webrtc', config: webrtcConfig }, { name: 'console' }]);
  let browser: Browser | undefined;
  let page: Page;
  const pageLog: string[] = [];
  let stopTerminal: (() => Promise<void>) | undefined;

  before(async function () {
    this.timeout(45_000);
    // a fake microphone (Chromium's beep) for the talk button
    browser = await launchChromium(['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream']);
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

  it('opens as 0 WebRTC and plays it by WHEP: frames at the capture size, audio, no CSP violation; Stop ends the session', async () => {
    await logIn(page, e.gw.baseUrl, 'demo', 'demo');
    const ac = new AbortController();
    const run = runSimulator({ file: fixturePath(CAP.file), port: e.live2013, speed: 1, loop: true, signal: ac.signal });
    stopTerminal = async () => {
      ac.abort();
      await within('the simulator to stop', 10_000, run);
    };
    await page.fill('#open-sim', CAP.sim);
    await page.fill('#open-chan', String(CAP.channel));
    await page.selectOption('#open-fmt', 'webrtc');
    await page.click('#open-submit');
    await page.waitForSelector('#streams tbody tr[data-reqid]');
    assert.equal(await page.textContent('#open-error'), '');
    assert.match(await page.inputValue('#copy-url-text'), /^http:\/\/127\.0\.0\.1:\d+\/webrtc\/.+\/whep\?reqId=/);
    const { first, last } = await seePlaying(page, 'webrtc', 3, 30_000);
    assert.equal(last.height, CAP.height);
    assert.ok(last.frames > first.frames, `frames advance (${first.frames} -> ${last.frames})`);
    assert.deepEqual(
      pageLog.filter((l) => /Content Security Policy|Refused to/i.test(l)),
      [],
    );
    const reqId = await page.getAttribute('#streams tbody tr[data-reqid]', 'data-reqid');
    const players = async () => (await e.gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0]?.players as number;
    assert.equal(await players(), 1);
    await page.click('#player-stop');
    await waitFor('the WebRTC player gone after Stop', async () => (await players()) === 0, 5000, 100);
  });

  it('an intercom request opened as 0 WebRTC talks from the Talk button over the same WHEP session', async () => {
    await page.selectOption('#open-datatyp', '2');
    await page.selectOption('#open-fmt', 'webrtc');
    await page.click('#open-submit');
    await page.waitForSelector('#talk-box:not([hidden])');
    const metric = async () => {
      const text = await (await fetch(`${e.gw.baseUrl}/metrics`)).text();
      return Number(/^gw_webrtc_talk_packets_total (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const before = await metric();
    await page.click('#talk-button');
    await waitFor('talking over WebRTC', async () => /talking over WebRTC/.test((await page.textContent('#talk-state')) ?? ''), 15_000, 100);
    await waitFor("the microphone's packets at the gateway", async () => (await metric()) - before > 50, 15_000, 200);
    await page.click('#talk-button');
    assert.match((await page.textContent('#talk-state')) ?? '', /ended/);
  });
});
