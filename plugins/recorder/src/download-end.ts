/**
 * When a record download is over: its pipeline has finished (or failed) and its file stream has closed its
 * descriptor. pipeline's callback alone can come first when the client goes away mid-transfer: the stream is
 * destroyed then, and its descriptor's close is still on its way through libuv's thread pool, so a descriptor
 * counted as gone (downloads_active back to 0) could still be open.
 */
import type { Readable } from 'node:stream';

/** calls `onEnd` once both have happened; returns what to call when the pipeline has finished */
export function downloadEnd(body: Readable, onEnd: (() => void) | undefined): () => void {
  let left = 2;
  const step = (): void => {
    if (--left === 0) onEnd?.();
  };
  body.once('close', step);
  return step;
}
