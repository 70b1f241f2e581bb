/** What the main thread and the AAC worker (aac-worker.ts) say to each other: one job per file being transcoded. */
export type AacReq =
  | { op: 'open'; job: number; law: 'alaw' | 'ulaw'; channels: number }
  | { op: 'encode'; job: number; g711: Uint8Array }
  | { op: 'flush'; job: number }
  | { op: 'drop'; job: number };

export type AacRes =
  | { op: 'ok' }
  /** frames' bytes end to end and their sizes; samplesIn: mono input samples the job has taken so far */
  | { op: 'frames'; bytes: Uint8Array; sizes: Uint32Array; samplesIn: number };
