/**
 * JT/T 1078-2016 table 12 (audio/video encoding types) mapped onto the gateway's codec names.
 * Types without a codec name in plugin-sdk/media.ts (G.728, DVI4, LPC, WMA, AMR, AVS, SVAC ...) are
 * 'unknown': they pass through the bus but no output plugin can do anything useful with them.
 */
import type { AudioCodec, VideoCodec } from '../../../plugin-sdk/media';

export const PT = {
  G721: 1,
  G722: 2,
  G723: 3,
  G728: 4,
  G729: 5,
  G711A: 6,
  G711U: 7,
  G726: 8,
  G729A: 9,
  AAC: 19,
  HEAAC: 21,
  AACLC: 24,
  MP3: 25,
  ADPCMA: 26,
  TRANSPARENT: 91,
  H264: 98,
  H265: 99,
} as const;

export function videoCodecOfPt(pt: number): VideoCodec | 'unknown' {
  return pt === PT.H264 ? 'h264' : pt === PT.H265 ? 'h265' : 'unknown';
}

export function audioCodecOfPt(pt: number): AudioCodec {
  switch (pt) {
    case PT.G711A: return 'g711a';
    case PT.G711U: return 'g711u';
    case PT.G726: return 'g726';
    case PT.ADPCMA: return 'adpcm';
    case PT.AAC:
    case PT.HEAAC:
    case PT.AACLC: return 'aac';
    case PT.MP3: return 'mp3';
    case PT.G721: return 'g721';
    case PT.G722: return 'g722';
    case PT.G723: return 'g723';
    case PT.G729:
    case PT.G729A: return 'g729';
    default: return 'unknown';
  }
}

/** Narrow-band telephony codecs: always 8 kHz mono in JT/T 1078 terminals. */
export function isTelephonyCodec(c: AudioCodec): boolean {
  return c === 'g711a' || c === 'g711u' || c === 'g726' || c === 'adpcm' || c === 'g721' || c === 'g723' || c === 'g729';
}
