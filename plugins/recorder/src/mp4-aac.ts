/**
 * The MP4 layout of a record whose G.711 audio is carried as AAC (`audio=aac`): the FLV's video samples as they
 * are, and the AAC frames the encoder made (g711-aac.ts) in place of the G.711 ones, kept in memory with the layout
 * and interleaved with the video by time, so a player reading the file front to back finds sound and pictures
 * together. The frames' bytes are known before the moov is written, so every offset is exact and any byte range
 * of the MP4 is served as for a remux.
 */
import type { FlvIndex } from './flv-index';
import { layoutOf, type Mp4Layout } from './mp4-layout';
import { SampleTable } from './mp4-samples';
import type { AacTrack } from './g711-aac';
import { AAC_FRAME, AAC_PRIMING } from './aac-wasm';

export function aacLayoutOf(index: FlvIndex, aac: AacTrack, law: 'alaw' | 'ulaw'): Mp4Layout {
  const s = index.samples;
  const out = new SampleTable();
  const frameMs = (AAC_FRAME * 1000) / aac.sampleRate;
  const primingMs = (AAC_PRIMING * 1000) / aac.sampleRate;
  // frame k decodes at the first G.711 sample's time minus the priming (frame 0 is the encoder's lead-in):
  // ms stay whole at 8 kHz (128 a frame), which the moov's 1 ms timescale needs
  const dtsOf = (k: number): number => aac.firstDts - primingMs + k * frameMs;
  const frames = aac.sizes.length;
  let k = 0;
  let memAt = 0;
  const pushFrame = (): void => {
    // a negative offset: the sample is in the layout's memory, at -1 - offset (mp4-layout.ts)
    out.push(1, -1 - memAt, aac.sizes[k]!, dtsOf(k), 0, true, 0);
    memAt += aac.sizes[k]!;
    k++;
  };
  for (let i = 0; i < s.count; i++) {
    if (s.track[i] !== 0) continue;
    while (k < frames && dtsOf(k) <= s.dts[i]!) pushFrame();
    out.push(0, s.flvOffset[i]!, s.size[i]!, s.dts[i]!, s.cts[i]!, s.key[i] === 1, s.desc[i]!);
  }
  while (k < frames) pushFrame();
  const merged: FlvIndex = {
    samples: out,
    descriptions: [index.descriptions[0], [{ codec: 'aac', config: aac.asc, sampleRate: aac.sampleRate, channels: 1, width: 0, height: 0 }]],
    flvLength: index.flvLength,
    stopped: index.stopped,
    skippedAudioFormats: index.skippedAudioFormats,
    audioEdit: { skipMs: primingMs, presentMs: Math.round((aac.samples * 1000) / aac.sampleRate) },
  };
  return { ...layoutOf(merged, aac.bytes), audioFrom: law };
}
