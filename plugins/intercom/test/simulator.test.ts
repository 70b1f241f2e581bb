/**
 * The simulator (jt1078-ingest/tools) as the terminal: it replays the G.711A fixture in real time, hears a talker
 * who speaks in real time (20 ms messages), writes what it heard to a WAV file that ffmpeg decodes, and reports it.
 * Also reports the uplink delay the gateway measured (message arrival to packet handed to the terminal's socket).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import type { TestGateway } from '../../../plugin-sdk/testkit';
import { fixturePath, scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { describeTalk } from '../../jt1078-ingest/tools/talk-receiver';
import { bootGateway, Client, dominantHz, GOJT, metric, openTalk, pcmBytes, sleep, tone } from './helpers';

/** the p-quantile's upper bucket bound and the mean, from a prom-client histogram on /metrics */
async function histogram(gw: TestGateway, name: string): Promise<{ count: number; mean: number; quantile(q: number): number }> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  const buckets: Array<[number, number]> = [];
  for (const l of text.split('\n')) {
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)`).exec(l);
    if (m) buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  const count = await metric(gw, `${name}_count`);
  const sum = await metric(gw, `${name}_sum`);
  return {
    count,
    mean: count > 0 ? sum / count : 0,
    quantile: (q) => buckets.find(([, n]) => n >= q * count)?.[0] ?? Infinity,
  };
}

describe('intercom: the simulator hears a real-time talker', function () {
  this.timeout(60000);
  let gw: TestGateway | undefined;
  let scratch: string | undefined;
  afterEach(async () => {
    await gw?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });

  it("2 s of a 1 kHz tone spoken in real time: the simulated terminal's WAV holds it (ffmpeg), delay reported", async () => {
    ({ gw } = await bootGateway());
    const g = gw;
    const sim = '13800054321';
    const talk = await openTalk(g, { simNo: sim, chanId: 1 });
    scratch = scratchDir('intercom-sim');
    const wav = path.join(scratch, 'heard.wav');
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
    try {
      await g.waitReady(talk.reqId);
      const c = await Client.open(talk.taUrl!);
      // one 20 ms message every 20 ms, on a schedule (a late timer does not shift the ones after it)
      const t0 = performance.now();
      for (let i = 0; i < 100; i++) {
        const due = t0 + i * 20 - performance.now();
        if (due > 0) await sleep(due);
        c.send(pcmBytes(tone(1000, 160, i * 160)));
      }
      await waitForAsync(async () => (await metric(g, 'gw_intercom_uplink_frames_total')) >= 100, 'all frames sent');
      await sleep(200);
      c.ws.close();
    } finally {
      ac.abort();
    }
    const summary = await run;
    const r = summary.talk!;
    console.log(`      simulator: ${describeTalk(r)}`);
    assert.equal(r.codec, 'g711a');
    assert.equal(r.layout, '2013');
    assert.equal(r.sim, sim);
    assert.ok(r.frames >= 100 && r.frames <= 105, `${r.frames} frames (100 sent; an underrun pads one)`);
    assert.equal(r.seqGaps, 0);

    const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
    const out = spawnSync(ffmpeg, ['-v', 'error', '-i', wav, '-f', 's16le', '-ac', '1', '-ar', '8000', '-'], { maxBuffer: 1 << 24 });
    assert.equal(out.status, 0, out.stderr?.toString());
    const pcm = new Int16Array(out.stdout.buffer, out.stdout.byteOffset, out.stdout.length >> 1);
    assert.equal(pcm.length, r.samples);
    const { hz, loudSamples } = dominantHz(pcm);
    assert.equal(hz, 1000);
    assert.ok(loudSamples >= 15800 && loudSamples <= 16800, `${loudSamples} samples of tone (2 s is 16000)`);

    const d = await histogram(g, 'gw_intercom_uplink_delay_seconds');
    assert.equal(d.count, r.frames);
    console.log(
      `      uplink delay, message to packet: mean ${(d.mean * 1000).toFixed(1)} ms, p50 <= ${d.quantile(0.5) * 1000} ms, p99 <= ${d.quantile(0.99) * 1000} ms (${d.count} frames; jitterMs 40, frameMs 20)`,
    );
  });
});

async function waitForAsync(f: () => Promise<boolean>, what: string, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
