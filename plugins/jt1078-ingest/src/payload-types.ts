/**
 * JT/T 1078-2016 table 12 (audio/video encoding types) mapped onto the gateway's codec names.
 * Types without a codec name in plugin-sdk/media.ts (G.728, LPC, WMA, AMR, AVS, SVAC ...) are 'unknown': they
 * pass through the bus but no output plugin can do anything useful with them.
 *
 * Two table entries are other names for codecs the gateway knows, and are published as those:
 * - G.721 (1) is G.726 at 32 kbit/s: the ITU folded G.721 into G.726 in 1990, bit for bit. Its rate is the one
 *   thing a G.726 packet never says, so this type settles it.
 * - DVI4 at 8 kHz (12) and 16 kHz (13) are IMA ADPCM with the 4-byte state header per block (RFC 3551 4.5.1), the
 *   same framing as HiSilicon's ADPCM (26).
 * DVI4_3/DVI4_4 (10, 11) are left 'unknown': nothing says what their numbers mean, and a guess would be decoded
 * into noise.
 */
import type { AudioCodec, VideoCodec } from '../../../plugin-sdk';

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
  DVI4_8K: 12,
  DVI4_16K: 13,
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
    case PT.G711A:
      return 'g711a';
    case PT.G711U:
      return 'g711u';
    case PT.G721:
    case PT.G726:
      return 'g726';
    case PT.ADPCMA:
    case PT.DVI4_8K:
    case PT.DVI4_16K:
      return 'adpcm';
    case PT.AAC:
    case PT.HEAAC:
    case PT.AACLC:
      return 'aac';
    case PT.MP3:
      return 'mp3';
    case PT.G722:
      return 'g722';
    case PT.G723:
      return 'g723';
    case PT.G729:
    case PT.G729A:
      return 'g729';
    default:
      return 'unknown';
  }
}

/** G.726 bits per sample when the payload type says (G.721 = 32 kbit/s), else undefined. */
export function g726BitsOfPt(pt: number): number | undefined {
  return pt === PT.G721 ? 4 : undefined;
}

/**
 * Sample rate that follows from the payload type for the codecs whose packets do not carry one. AAC and MP3 say
 * theirs in their frame headers (undefined here).
 */
export function sampleRateOfPt(pt: number): number | undefined {
  switch (pt) {
    case PT.G722:
    case PT.DVI4_16K:
      return 16000;
    case PT.AAC:
    case PT.HEAAC:
    case PT.AACLC:
    case PT.MP3:
      return undefined;
    default:
      return 8000; // the narrow-band codecs terminals use are 8 kHz mono
  }
}

/** The payload type to send a codec as (downlink audio), when the terminal has not shown its own. */
export function ptOfAudioCodec(codec: AudioCodec): number | undefined {
  switch (codec) {
    case 'g711a':
      return PT.G711A;
    case 'g711u':
      return PT.G711U;
    case 'g726':
      return PT.G726;
    case 'adpcm':
      return PT.ADPCMA;
    case 'aac':
      return PT.AAC;
    case 'mp3':
      return PT.MP3;
    case 'g721':
      return PT.G721;
    case 'g722':
      return PT.G722;
    case 'g723':
      return PT.G723;
    case 'g729':
      return PT.G729;
    default:
      return undefined;
  }
}
