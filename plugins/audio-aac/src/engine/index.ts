/**
 * AAC-LC encoding for many streams off the main thread: AacEngine (main thread, client.ts) drives a worker thread
 * (worker.ts) that hosts an AacEncoderPool (pool.ts) of ffmpeg's AAC encoder in WebAssembly (wasm.ts).
 * Other workers can host an AacEncoderPool themselves and call its encoders synchronously.
 */
export { AacEngine, AacEncoderLostError, type AacEngineOptions, type AacEncoderInfo, type AacFrame, type AacEngineStats } from './client';
export {
  AacEncoderPool,
  AacEncoder,
  DEFAULT_AAC_CONFIG,
  AAC_SAMPLE_RATES,
  AAC_FRAME_SAMPLES,
  AAC_PRIMING_SAMPLES,
  aacLcAsc,
  checkAacConfig,
  type AacEncoderConfig,
  type AacEncoderPoolOptions,
  type AacPoolStats,
  type FrameSink,
} from './pool';
export { AAC_WASM_PACKAGE, type AacCoder } from './wasm';
