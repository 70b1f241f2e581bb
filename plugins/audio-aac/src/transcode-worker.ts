/**
 * The AAC stage's worker thread: one pipeline per running stage (decode, resample, AAC encode, timing), many per
 * thread. Everything CPU-bound of the audio path happens here; the main thread only moves coded frames.
 */
import { workerData } from 'node:worker_threads';
import { serveWorker } from '../../../plugin-sdk/worker';
import { AacEncoderPool } from './engine/pool';
import { AacPipeline, type FrameEncoder } from './pipeline';
import type { EncodedFrame, PushBatch, PushBatchReply, TranscodeReply, TranscodeRequest } from './transcode-protocol';
import type { AacEncoder } from './engine/pool';

const pool = new AacEncoderPool({ coder: (workerData as { coder?: 'fast' | 'twoloop' } | null)?.coder ?? 'fast' });
const jobs = new Map<number, { pipeline: AacPipeline; encoder: AacEncoder }>();

/** the pool's encoder as the pipeline sees it */
function frameEncoder(e: AacEncoder): FrameEncoder {
  return {
    frameSamples: 1024,
    primingSamples: 1024,
    buffered: () => e.buffered,
    encode: (pcm) => e.encode(pcm),
    reset: () => e.reset(),
  };
}

serveWorker<TranscodeRequest, TranscodeReply>(
  async (req) => {
    switch (req.op) {
      case 'open': {
        jobs.get(req.job)?.encoder.close();
        const encoder = await pool.open({ sampleRate: req.sampleRate, channels: req.channels, bitrate: req.bitrate });
        try {
          const pipeline = new AacPipeline(req.input, { sampleRate: req.sampleRate, channels: req.channels }, frameEncoder(encoder), req.maxGapMs, {
            adpcm: req.adpcm,
          });
          jobs.set(req.job, { pipeline, encoder });
        } catch (err) {
          encoder.close();
          throw err;
        }
        return { op: 'open', ok: true };
      }
      case 'push-batch':
        return pushBatch(req);
      case 'close': {
        jobs.get(req.job)?.encoder.close();
        jobs.delete(req.job);
        return { op: 'close' };
      }
    }
  },
  (res) => (res.op === 'push-batch' ? [res.status, res.counts, res.frameLengths, res.frameDts, res.bytes, res.due].map((a) => a.buffer as ArrayBuffer) : []),
);

/** each frame to its job's pipeline, in order; the AAC frames made packed back into one buffer */
function pushBatch(b: PushBatch): PushBatchReply {
  const n = b.jobs.length;
  const status = new Uint8Array(n);
  const counts = new Uint16Array(n);
  const due = new Float64Array(n).fill(NaN);
  const errors: Record<number, string> = {};
  const made: EncodedFrame[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const len = b.lengths[i];
    const frame = b.bytes.subarray(at, at + len);
    at += len;
    const j = jobs.get(b.jobs[i]);
    if (!j) {
      status[i] = 1;
      continue;
    }
    try {
      const out = j.pipeline.push(frame, b.dtsTicks[i], b.timescales[i]);
      counts[i] = out.length;
      due[i] = j.pipeline.dueTicks(b.timescales[i]);
      for (const f of out) made.push(f);
    } catch (err) {
      status[i] = 2;
      errors[i] = (err as Error | undefined)?.message ?? String(err);
    }
  }
  const frameLengths = new Uint32Array(made.length);
  const frameDts = new Float64Array(made.length);
  let total = 0;
  for (const f of made) total += f.data.length;
  const bytes = new Uint8Array(total);
  let off = 0;
  for (let k = 0; k < made.length; k++) {
    const f = made[k];
    bytes.set(f.data, off);
    off += f.data.length;
    frameLengths[k] = f.data.length;
    frameDts[k] = f.dtsTicks;
  }
  return { op: 'push-batch', status, counts, errors, frameLengths, frameDts, bytes, due };
}
