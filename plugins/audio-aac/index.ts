import * as path from 'node:path';
import { definePlugin } from '../../plugin-sdk';
import { StageWorker } from '../../plugin-sdk/worker';
import { aacStage } from './src/aac-stage';
import { AudioAacConfig, bitrateFor } from './src/config';
import type { TranscodeReply, TranscodeRequest } from './src/transcode-protocol';

export { AudioAacConfig };

/**
 * AAC audio for browsers: registers the 'aac' stage (plugin-sdk/audio.ts), whose decoding, resampling and
 * encoding run in one worker thread for all streams, under a supervisor.
 */
export default definePlugin({
  name: 'audio-aac',
  config: AudioAacConfig,
  setup(ctx) {
    const c = ctx.config;
    const worker = new StageWorker<TranscodeRequest, TranscodeReply>(path.join(__dirname, 'src', 'transcode-worker.js'), {
      name: 'aac',
      log: ctx.log,
      workerData: { coder: c.coder },
    });
    const m = ctx.metrics;
    let transcoders = 0;
    m.gauge('transcoders', 'streams whose audio is being transcoded to AAC now', [], (g) => g.set(transcoders));
    m.gauge('worker_restarts', 'times the AAC worker thread died and was started again', [], (g) => g.set(worker.deaths));
    m.gauge('worker_messages', 'messages sent to the AAC worker (each carries one event-loop pass of frames)', [], (g) => g.set(worker.batches));
    const framesOut = m.counter('frames_out_total', 'AAC frames made');
    const failed = m.counter('failures_total', 'audio frames or transcodes that failed (audio left out, video unaffected)');
    const leftOut = m.counter('left_out_total', 'audio tracks left out: a codec that cannot be decoded', ['codec']);
    const logged = new Set<string>();

    ctx.bus.registerStage(
      aacStage({
        worker,
        defaults: { sampleRate: c.sampleRate, channels: c.channels },
        bitrate: (rate, ch) => bitrateFor(c, rate, ch),
        maxGapMs: c.maxGapMs,
        maxInFlight: c.maxInFlight,
        frameBatchMs: c.frameBatchMs,
        adpcm: { layout: c.adpcmLayout, headerByteOrder: c.adpcmHeaderByteOrder },
        log: ctx.log,
        hooks: {
          transcoders: (d) => {
            transcoders += d;
          },
          framesOut: (n) => framesOut.inc(n),
          failed: () => failed.inc(),
          leftOut: (stream, codec) => {
            leftOut.inc({ codec });
            const key = `${stream}/${codec}`;
            if (logged.has(key) || logged.size > 10_000) return;
            logged.add(key);
            ctx.log.info({ stream, codec }, 'audio codec cannot be decoded: left out of the AAC form (video goes on)');
          },
        },
      }),
    );
    ctx.log.info({ sampleRate: c.sampleRate, channels: c.channels, coder: c.coder }, 'AAC stage ready');
    return {
      async stop() {
        await worker.close();
      },
    };
  },
});
