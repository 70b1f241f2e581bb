/**
 * H.265 helpers: SPS parsing (size, profile/tier/level and the fields an hvcC record needs), hvcC building,
 * keyframe (IRAP) detection and VPS/SPS/PPS extraction from Annex-B frames.
 */
import { BitReader, BitstreamError, NAL_SCAN, nextNalStart, scanFlags, unescapeRbsp } from './h264';
import { NAL_SCANS } from './nal-index';
import { Buffer } from 'node:buffer';

export const H265_NAL = { VPS: 32, SPS: 33, PPS: 34, AUD: 35, PREFIX_SEI: 39, SUFFIX_SEI: 40 } as const;

/** One pass over an H.265 Annex-B frame: which NAL kinds it holds (NAL_SCAN flags from h264.ts). */
export function scanH265(buf: Buffer): number {
  return scanFlags(buf, 'h265');
}

/** True when the Annex-B frame holds an IRAP slice (IDR, CRA or BLA). */
export function h265IsKeyframe(annexB: Buffer): boolean {
  return (scanH265(annexB) & NAL_SCAN.KEY) !== 0;
}

export interface H265ParameterSets {
  vps?: Buffer;
  sps?: Buffer;
  pps?: Buffer;
}

/** The last VPS, SPS and PPS of an Annex-B frame, as subarrays of the input (copy before keeping). */
export function extractH265ParameterSets(annexB: Buffer): H265ParameterSets {
  const out: H265ParameterSets = {};
  NAL_SCANS.count++;
  let p = nextNalStart(annexB, 0);
  while (p >= 0) {
    const next = nextNalStart(annexB, p + 1);
    const t = (annexB[p] >> 1) & 0x3f;
    if (t === H265_NAL.VPS || t === H265_NAL.SPS || t === H265_NAL.PPS) {
      let end = next < 0 ? annexB.length : next - 3;
      while (end > p && annexB[end - 1] === 0) end--;
      const nal = annexB.subarray(p, end);
      if (t === H265_NAL.VPS) out.vps = nal;
      else if (t === H265_NAL.SPS) out.sps = nal;
      else out.pps = nal;
    }
    p = next;
  }
  return out;
}

export interface H265SpsInfo {
  vpsId: number;
  spsId: number;
  maxSubLayers: number;
  temporalIdNesting: boolean;
  generalProfileSpace: number;
  /** 0 Main tier, 1 High tier */
  generalTierFlag: number;
  generalProfileIdc: number;
  generalProfileCompatibilityFlags: number;
  /** the 48 constraint-indicator bits as 6 bytes */
  generalConstraintIndicatorFlags: Buffer;
  /** 30 x level, e.g. 93 for level 3.1 */
  generalLevelIdc: number;
  /** e.g. 'Main', 'Main 10' */
  profile: string;
  chromaFormatIdc: number;
  bitDepthLuma: number;
  bitDepthChroma: number;
  /** picture size after the conformance window */
  width: number;
  height: number;
  /** the 12 bytes general_profile_space .. general_level_idc, exactly as hvcC stores them */
  generalProfileTierLevel: Buffer;
}

export function h265ProfileName(profileIdc: number): string {
  switch (profileIdc) {
    case 1:
      return 'Main';
    case 2:
      return 'Main 10';
    case 3:
      return 'Main Still Picture';
    case 4:
      return 'Rext';
    case 5:
      return 'High Throughput 4:4:4';
    case 9:
      return 'Screen Extended';
    default:
      return `profile ${profileIdc}`;
  }
}

/**
 * Parses an H.265 SPS NAL unit (2-byte NAL header included, no start code).
 * Throws BitstreamError (or Error for a non-SPS) on malformed input.
 */
export function parseH265Sps(nal: Buffer): H265SpsInfo {
  if (nal.length < 16 || ((nal[0] >> 1) & 0x3f) !== H265_NAL.SPS) throw new Error('not an H.265 SPS NAL unit');
  const rbsp = unescapeRbsp(nal);
  if (rbsp.length < 15) throw new BitstreamError('SPS too short');
  const r = new BitReader(rbsp, 2);
  const vpsId = r.u(4);
  const maxSubLayersMinus1 = r.u(3);
  if (maxSubLayersMinus1 > 6) throw new BitstreamError('sps_max_sub_layers_minus1 out of range');
  const temporalIdNesting = r.u1() === 1;
  // general profile_tier_level: 12 bytes starting at RBSP byte 3
  const generalProfileTierLevel = Buffer.from(rbsp.subarray(3, 15));
  const generalProfileSpace = r.u(2);
  const generalTierFlag = r.u1();
  const generalProfileIdc = r.u(5);
  const generalProfileCompatibilityFlags = r.u(32);
  r.skip(48);
  const generalLevelIdc = r.u(8);
  const subProfilePresent: number[] = [];
  const subLevelPresent: number[] = [];
  for (let i = 0; i < maxSubLayersMinus1; i++) {
    subProfilePresent.push(r.u1());
    subLevelPresent.push(r.u1());
  }
  if (maxSubLayersMinus1 > 0) for (let i = maxSubLayersMinus1; i < 8; i++) r.skip(2);
  for (let i = 0; i < maxSubLayersMinus1; i++) {
    if (subProfilePresent[i]) r.skip(88);
    if (subLevelPresent[i]) r.skip(8);
  }
  const spsId = r.ue();
  if (spsId > 15) throw new BitstreamError('sps_seq_parameter_set_id out of range');
  const chromaFormatIdc = r.ue();
  if (chromaFormatIdc > 3) throw new BitstreamError(`invalid chroma_format_idc ${chromaFormatIdc}`);
  let separateColourPlane = 0;
  if (chromaFormatIdc === 3) separateColourPlane = r.u1();
  const picWidth = r.ue();
  const picHeight = r.ue();
  let left = 0,
    right = 0,
    top = 0,
    bottom = 0;
  if (r.u1()) {
    left = r.ue();
    right = r.ue();
    top = r.ue();
    bottom = r.ue();
  }
  const bitDepthLuma = r.ue() + 8;
  const bitDepthChroma = r.ue() + 8;
  const chromaArrayType = separateColourPlane ? 0 : chromaFormatIdc;
  const subW = chromaArrayType === 1 || chromaArrayType === 2 ? 2 : 1;
  const subH = chromaArrayType === 1 ? 2 : 1;
  const width = picWidth - subW * (left + right);
  const height = picHeight - subH * (top + bottom);
  if (width <= 0 || height <= 0 || width > 16888 || height > 16888) {
    throw new BitstreamError(`implausible picture size ${width}x${height}`);
  }
  let profileIdc = generalProfileIdc;
  if (profileIdc === 0) {
    // Some encoders leave general_profile_idc 0 and only set the compatibility flag.
    for (let j = 1; j < 32; j++)
      if (generalProfileCompatibilityFlags & (2 ** (31 - j))) {
        profileIdc = j;
        break;
      }
  }
  return {
    vpsId,
    spsId,
    maxSubLayers: maxSubLayersMinus1 + 1,
    temporalIdNesting,
    generalProfileSpace,
    generalTierFlag,
    generalProfileIdc,
    generalProfileCompatibilityFlags: generalProfileCompatibilityFlags >>> 0,
    generalConstraintIndicatorFlags: Buffer.from(generalProfileTierLevel.subarray(5, 11)),
    generalLevelIdc,
    profile: h265ProfileName(profileIdc),
    chromaFormatIdc,
    bitDepthLuma,
    bitDepthChroma,
    width,
    height,
    generalProfileTierLevel,
  };
}

/**
 * HEVCDecoderConfigurationRecord (ISO/IEC 14496-15 8.3.3.1) from VPS, SPS and PPS NAL units without
 * start codes. NAL length size 4 bytes; frame-rate and segmentation fields are left 0 (unknown), which
 * decoders accept because the parameter sets themselves carry the truth.
 */
export function buildHvcC(vps: Buffer | Buffer[], sps: Buffer | Buffer[], pps: Buffer | Buffer[]): Buffer {
  const vpsList = Array.isArray(vps) ? vps : [vps];
  const spsList = Array.isArray(sps) ? sps : [sps];
  const ppsList = Array.isArray(pps) ? pps : [pps];
  if (!vpsList.length || !spsList.length || !ppsList.length) throw new Error('hvcC needs VPS, SPS and PPS');
  const info = parseH265Sps(spsList[0]);
  const head = Buffer.alloc(23);
  head[0] = 1;
  info.generalProfileTierLevel.copy(head, 1);
  head.writeUInt16BE(0xf000, 13); // reserved 1111 + min_spatial_segmentation_idc 0
  head[15] = 0xfc; // reserved + parallelismType 0 (unknown)
  head[16] = 0xfc | (info.chromaFormatIdc & 3);
  head[17] = 0xf8 | ((info.bitDepthLuma - 8) & 7);
  head[18] = 0xf8 | ((info.bitDepthChroma - 8) & 7);
  head.writeUInt16BE(0, 19); // avgFrameRate unknown
  // constantFrameRate 0, numTemporalLayers, temporalIdNested, lengthSizeMinusOne 3
  head[21] = ((info.maxSubLayers & 7) << 3) | ((info.temporalIdNesting ? 1 : 0) << 2) | 3;
  head[22] = 3;
  const parts: Buffer[] = [head];
  const arrays: Array<[number, Buffer[]]> = [
    [H265_NAL.VPS, vpsList],
    [H265_NAL.SPS, spsList],
    [H265_NAL.PPS, ppsList],
  ];
  for (const [type, list] of arrays) {
    const a = Buffer.allocUnsafe(3);
    // array_completeness 0: parameter sets may also come in-band (they do: on every keyframe), as ffmpeg writes it
    a[0] = type;
    a.writeUInt16BE(list.length, 1);
    parts.push(a);
    for (const nal of list) {
      if (nal.length > 0xffff) throw new Error('parameter set longer than 65535 bytes');
      const l = Buffer.allocUnsafe(2);
      l.writeUInt16BE(nal.length, 0);
      parts.push(l, nal);
    }
  }
  return Buffer.concat(parts);
}
