/**
 * node's stream_wrap binding, as net.Socket uses it: what DirectWriter (direct-writes.ts) writes through and what the
 * gateway's terminal reads (core/net/borrowed-reads.ts) read their sizes from. Each user checks the fields it needs
 * and falls back to node's own path without them.
 */

/** the binding's fields these users read; any may be missing on another Node */
export interface StreamBinding {
  WriteWrap?: unknown;
  /** the state node's stream calls leave their results in, by the indices below */
  streamBaseState?: unknown;
  kLastWriteWasAsync?: unknown;
  kReadBytesOrError?: unknown;
}

let binding: StreamBinding | null | undefined;

/** The binding, looked up once; null where this Node does not give it. */
export function streamBinding(): StreamBinding | null {
  if (binding !== undefined) return binding;
  binding = null;
  try {
    // (process.binding is documented as deprecated, but stream_wrap is on its allow list without a warning in Node 20)
    binding = (process as unknown as { binding(name: string): StreamBinding }).binding('stream_wrap');
  } catch {
    /* not on this Node */
  }
  return binding;
}
