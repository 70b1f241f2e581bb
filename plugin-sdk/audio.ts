/**
 * The AAC form of a stream's audio: a stage that the audio-aac plugin registers under the name AAC_STAGE. Outputs
 * that serve browsers (FLV, HLS) read `via` it; terminals send G.711, G.726 or ADPCM, which browsers cannot decode.
 */
import type { MediaBus, StageRef } from './bus';
import type { AudioCodec } from './media';

export const AAC_STAGE = 'aac';

export interface AacStageParams {
  /** one of the AAC rates (8000, 16000, 22050, 24000, 32000, 44100, 48000); default: the audio-aac plugin's */
  sampleRate?: number;
  /** 1 or 2 (mono up-mixed); default: the plugin's */
  channels?: 1 | 2;
  /** codecs passed through as received instead of transcoded (AAC always is) */
  keep?: AudioCodec[];
}

/**
 * How an output reads a stream's audio as AAC: the `via` for subscribe, with the request's audioCfg if it gave one,
 * or undefined when this site runs no AAC stage (read the stream itself then; audio FLV cannot carry is left out).
 */
export function aacVia(bus: MediaBus, audioCfg?: { sampleRate: number; channels: number }, keep?: AudioCodec[]): StageRef | undefined {
  if (!bus.stages().includes(AAC_STAGE)) return undefined;
  const params: AacStageParams = {};
  if (audioCfg) {
    params.sampleRate = audioCfg.sampleRate;
    params.channels = audioCfg.channels === 2 ? 2 : 1;
  }
  if (keep && keep.length) params.keep = keep;
  return { stage: AAC_STAGE, params: params as Record<string, unknown> };
}
