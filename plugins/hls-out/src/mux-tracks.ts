/** The bus's track descriptions as the container writers need them (codec records, ADTS fields). */
import type { AudioTrackInfo, VideoTrackInfo } from '../../../plugin-sdk';
import { buildAvcC } from '../../../plugin-sdk/formats';
import { buildHvcC } from '../../../plugin-sdk/formats';
import { keptCopy } from '../../../plugin-sdk';
import { parseAsc } from './mpegts';
import type { MuxTrack } from './mux-types';

/** The video track of the init segment; its decoder configuration record is kept as long as the stream (kept-bytes). */
export function videoTrack(v: VideoTrackInfo): MuxTrack | undefined {
  try {
    if (v.codec === 'h264' && v.sps && v.pps) {
      return {
        id: 1,
        kind: 'video',
        codec: 'h264',
        timescale: 90_000,
        width: v.width,
        height: v.height,
        config: keptCopy(buildAvcC(v.sps, v.pps)),
        paramSets: [v.sps, v.pps],
      };
    }
    if (v.codec === 'h265' && v.vps && v.sps && v.pps) {
      return {
        id: 1,
        kind: 'video',
        codec: 'h265',
        timescale: 90_000,
        width: v.width,
        height: v.height,
        config: completeArrays(buildHvcC(v.vps, v.sps, v.pps)),
        paramSets: [v.vps, v.sps, v.pps],
      };
    }
  } catch {
    /* parameter sets this writer cannot describe: no video track */
  }
  return undefined;
}

/**
 * hvc1 means every parameter set is in the sample entry (samples carry none here): array_completeness 1, which
 * the SDK's record (written for FLV, where they also come in-band) leaves 0.
 */
function completeArrays(hvcc: Buffer): Buffer {
  const out = keptCopy(hvcc);
  let at = 23;
  for (let i = 0; i < out[22] && at + 3 <= out.length; i++) {
    out[at] |= 0x80;
    const count = out.readUInt16BE(at + 1);
    at += 3;
    for (let k = 0; k < count && at + 2 <= out.length; k++) at += 2 + out.readUInt16BE(at);
  }
  return out;
}

export function audioTrack(a: AudioTrackInfo, id: number): MuxTrack | undefined {
  if (a.codec !== 'aac' || !a.config || a.config.length < 2) return undefined;
  return {
    id,
    kind: 'audio',
    codec: 'aac',
    timescale: a.sampleRate,
    config: a.config,
    sampleRate: a.sampleRate,
    channels: a.channels,
    aac: parseAsc(a.config, a.sampleRate, a.channels),
  };
}
