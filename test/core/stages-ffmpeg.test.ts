/**
 * The stage tests' G.711 worker against ffmpeg: the PCM it gives for every A-law code word is what ffmpeg decodes,
 * byte for byte (full tier; stages.test.ts runs the worker inside a stage).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import pino from 'pino';
import { StageWorker } from '../../plugin-sdk/worker';
import { requireTool } from '../support/tools';
import type { TranscodeRequest } from './fixtures/g711-transcode-worker';

const WORKER = path.join(__dirname, 'fixtures', 'g711-transcode-worker.js');

describe('stages: the G.711 test worker', function () {
  this.timeout(30_000);

  it('decodes every A-law code word to the PCM ffmpeg decodes, byte for byte', async () => {
    const worker = new StageWorker<TranscodeRequest, Uint8Array>(WORKER, { name: 'g711', log: pino({ level: 'silent' }) });
    try {
      const all = Buffer.alloc(256 * 5);
      for (let i = 0; i < all.length; i++) all[i] = i & 0xff;
      const frames = [0, 1, 2, 3].map((i) => all.subarray(i * 320, (i + 1) * 320));
      const mine = Buffer.concat(await Promise.all(frames.map(async (frame) => Buffer.from(await worker.call({ frame })))));
      const ffmpeg = requireTool('ffmpeg', 'ffmpeg');
      const r = spawnSync(ffmpeg, ['-v', 'error', '-f', 'alaw', '-ar', '8000', '-ac', '1', '-i', 'pipe:0', '-f', 's16le', 'pipe:1'], {
        input: all.subarray(0, 1280),
      });
      assert.equal(r.status, 0, r.stderr?.toString());
      assert.equal(mine.length, 2560);
      assert.deepEqual(mine, r.stdout, 'the same PCM as ffmpeg decodes');
    } finally {
      await worker.close();
    }
  });
});
