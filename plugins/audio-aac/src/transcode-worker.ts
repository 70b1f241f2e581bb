/**
 * The AAC stage's worker thread: one pipeline per running stage (decode, resample, AAC encode, timing), many per
 * thread. Everything CPU-bound of the audio path happens here; the main thread only moves coded frames.
 */
import { workerData } from 'node:worker_threads';
import { serveWorker } from '../../../plugin-sdk/worker';
import { AacEncoderPool } from './engine/pool';
import { AacPipeline, type FrameEncoder } from './pipeline';
import { UNKNOWN_JOB, type EncodedFrame, type TranscodeReply, type TranscodeRequest } from './transcode-protocol';
import type { AacEncoder } from './engine/pool';

const pool = new AacEncoderPool({ coder: (workerData as { coder?: 'fast' | 'twoloop' } | null)?.coder ?? 'fast' });
const jobs = new Map<number, { pipeline: AacPipeline; encoder: AacEncoder }>();

/** the pool's encoder as the pipeline sees it */
function frameEncoder(e: AacEncoder): FrameEncoder {
  return {
    frameSamples: 1024,
    primingSamples: 1024,
    encode: (pcm) => e.encode(pcm),
    reset: () => e.reset(),
  };
}

serveWorker<TranscodeRequest, TranscodeReply>(async (req) => {
  switch (req.op) {
    case 'open': {
      jobs.get(req.job)?.encoder.close();
      const encoder = await pool.open({ sampleRate: req.sampleRate, channels: req.channels, bitrate: req.bitrate });
      try {
        const pipeline = new AacPipeline(req.input, { sampleRate: req.sampleRate, channels: req.channels }, frameEncoder(encoder), req.maxGapMs, { adpcm: req.adpcm });
        jobs.set(req.job, { pipeline, encoder });
      } catch (err) {
        encoder.close();
        throw err;
      }
      return { op: 'open', ok: true };
    }
    case 'push': {
      const j = jobs.get(req.job);
      if (!j) throw new Error(UNKNOWN_JOB);
      const frames: EncodedFrame[] = j.pipeline.push(req.frame, req.dtsTicks, req.timescale);
      return { op: 'push', frames };
    }
    case 'close': {
      jobs.get(req.job)?.encoder.close();
      jobs.delete(req.job);
      return { op: 'close' };
    }
  }
}, (res) => (res.op === 'push' ? res.frames.map((f) => f.data.buffer as ArrayBuffer) : []));
