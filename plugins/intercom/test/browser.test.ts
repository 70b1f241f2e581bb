/**
 * A browser talks: Debian's headless Chromium with a fake microphone playing a 1 kHz tone WAV
 * (--use-fake-device-for-media-stream --use-file-for-fake-audio-capture), a small page that takes the microphone
 * through Web Audio, brings it to 8 kHz PCM16 and sends it to the taUrl, and the simulated terminal (jt1078-ingest's
 * simulator, replaying the G.711A capture) that hears it. Chromium comes from test/support/install-tools.sh, as for
 * the other browser tests; missing, the test fails saying so.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { describeTalk, wavHeader } from '../../jt1078-ingest/tools/talk-receiver';
import { bootGateway, dominantHz, GOJT, metric, openTalk, sleep } from './helpers';

const CHROMIUM = process.env.GW_CHROMIUM ?? '/usr/bin/chromium';

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>talk</title></head><body><script>
let state = { sent: 0, messages: 0, error: '', rate: 0, wsClose: 0 };
window.talkState = () => state;
window.talk = async (url) => {
  const mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
  const ctx = new AudioContext();
  state.rate = ctx.sampleRate;
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  ws.onclose = (e) => { state.wsClose = e.code; };
  await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('websocket failed')); });
  const src = ctx.createMediaStreamSource(mic);
  const proc = ctx.createScriptProcessor(512, 1, 1);
  // to 8 kHz: each output sample is the mean of the input over its period (a box filter, enough below 4 kHz)
  const step = ctx.sampleRate / 8000;
  let pos = 0, acc = 0, n = 0;
  proc.onaudioprocess = (e) => {
    const f = e.inputBuffer.getChannelData(0);
    const out = [];
    for (let i = 0; i < f.length; i++) {
      acc += f[i]; n++;
      if (++pos >= step) { pos -= step; out.push(acc / n); acc = 0; n = 0; }
    }
    const pcm = new Int16Array(out.length);
    for (let i = 0; i < out.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(out[i] * 32767)));
    if (ws.readyState === 1) { ws.send(pcm.buffer); state.sent += pcm.length; state.messages++; }
  };
  src.connect(proc);
  proc.connect(ctx.destination);
};
</script></body></html>`;

describe('intercom: a browser talks through taUrl', function () {
  this.timeout(90000);
  let gw: TestGateway | undefined;
  let browser: Browser | undefined;
  let server: http.Server | undefined;
  let scratch: string | undefined;
  afterEach(async () => {
    await browser?.close().catch(() => undefined);
    if (server) await new Promise<void>((r) => server!.close(() => r()));
    await gw?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });

  it("Chromium's fake microphone (a 1 kHz tone) is heard by the simulated terminal", async () => {
    if (!fs.existsSync(CHROMIUM)) {
      throw new Error(`Chromium is missing at ${CHROMIUM}: install Debian's 'chromium' package; test/support/install-tools.sh does this`);
    }
    const dir = (scratch = scratchDir('intercom-browser'));
    // the microphone: 5 s of 1 kHz at 48 kHz (Chromium loops the file)
    const mic = path.join(dir, 'mic.wav');
    const pcm48 = new Int16Array(48000 * 5);
    for (let i = 0; i < pcm48.length; i++) pcm48[i] = Math.round(10000 * Math.sin((2 * Math.PI * 1000 * i) / 48000));
    const h = wavHeader(pcm48.byteLength, 48000);
    fs.writeFileSync(mic, Buffer.concat([h, Buffer.from(pcm48.buffer)]));

    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(PAGE);
    });
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server!.once('listening', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    ({ gw } = await bootGateway());
    const g = gw;
    const sim = '13800067890';
    const talk = await openTalk(g, { simNo: sim, chanId: 1 });
    const wav = path.join(dir, 'heard.wav');
    const ac = new AbortController();
    const run = runSimulator({
      file: fixturePath(GOJT),
      port: g.ports['jt1078-ingest.livePort2013'],
      sim,
      chan: 1,
      loop: true,
      talkWav: wav,
      signal: ac.signal,
    });
    let state: { sent: number; messages: number; rate: number; wsClose: number };
    try {
      await g.waitReady(talk.reqId);
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        timeout: 30_000,
        args: [
          '--use-fake-ui-for-media-stream',
          '--use-fake-device-for-media-stream',
          `--use-file-for-fake-audio-capture=${mic}`,
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
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(origin + '/');
      await page.evaluate((u) => (globalThis as any).talk(u), talk.taUrl!);
      // two seconds of talking
      await sleep(2500);
      state = await page.evaluate(() => (globalThis as any).talkState());
      assert.deepEqual(errors, []);
      assert.equal(state.wsClose, 0, 'the talk socket stays open');
      await browser.close();
      browser = undefined;
      await sleep(500);
    } finally {
      ac.abort();
    }
    const r = (await run).talk!;
    console.log(`      browser sent ${state.sent} samples in ${state.messages} messages (context at ${state.rate} Hz); ${describeTalk(r)}`);
    assert.ok(state.sent >= 8000, `the page sent ${state.sent} samples in 2.5 s`);
    assert.equal(r.codec, 'g711a');
    assert.ok(r.frames >= 50, `${r.frames} frames heard`);
    assert.equal(await metric(g, 'gw_intercom_uplink_frames_total'), r.frames);
    // the WAV the simulator wrote: its audio is the microphone's tone
    const heard = fs.readFileSync(wav);
    const pcm = new Int16Array((heard.length - 44) >> 1);
    for (let i = 0; i < pcm.length; i++) pcm[i] = heard.readInt16LE(44 + 2 * i);
    assert.equal(dominantHz(pcm).hz, 1000);
  });
});
