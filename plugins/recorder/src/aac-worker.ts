/**
 * The worker thread that turns G.711 into AAC for the MP4 form (g711-aac.ts sends it the work): the encode costs
 * about a second of CPU per 10 minutes of audio, which would stall the gateway's event loop if it ran there.
 * One encoder per job (a file being transcoded); the main thread feeds it chunks, so no call runs long.
 */
import type { TransferListItem } from 'node:worker_threads';
import { serveWorker } from '../../../plugin-sdk/worker';
import { G711AacEncoder } from './aac-wasm';
import type { AacReq, AacRes } from './aac-protocol';

const jobs = new Map<number, G711AacEncoder>();

function job(id: number): G711AacEncoder {
  const e = jobs.get(id);
  if (!e) throw new Error(`no AAC job ${id} in this worker`);
  return e;
}

async function handle(req: AacReq): Promise<AacRes> {
  switch (req.op) {
    case 'open':
      jobs.set(req.job, await G711AacEncoder.open(req.law, req.channels));
      return { op: 'ok' };
    case 'encode':
      return { op: 'frames', ...job(req.job).encode(req.g711), samplesIn: job(req.job).samplesIn };
    case 'flush': {
      const e = job(req.job);
      jobs.delete(req.job);
      return { op: 'frames', ...e.flush(), samplesIn: e.samplesIn };
    }
    case 'drop':
      jobs.get(req.job)?.close();
      jobs.delete(req.job);
      return { op: 'ok' };
  }
}

serveWorker<AacReq, AacRes>(handle, (res): TransferListItem[] =>
  res.op === 'frames' ? [res.bytes.buffer as ArrayBuffer, res.sizes.buffer as ArrayBuffer] : [],
);
