/**
 * H.264 helpers: SPS parsing, avcC building, keyframe and parameter-set extraction from Annex-B frames.
 * Also the RBSP bit reader and Annex-B scanning shared with h265.ts.
 */
import { NAL_FLAG, NAL_SCANS, NalArena, nalIndexFlags } from './nal-index';
import { Buffer } from 'node:buffer';

// ---------------------------------------------------------------------------------------------
// RBSP and bit reading

/**
 * Removes emulation-prevention bytes (00 00 03 -> 00 00). Parameter sets are small, so a copy is fine;
 * the common case without any 00 00 03 returns the input itself.
 */
export function unescapeRbsp(nal: Buffer): Buffer {
  let i = nal.indexOf(EP3);
  if (i < 0) return nal;
  const out = Buffer.allocUnsafe(nal.length);
  let o = 0;
  let from = 0;
  while (i >= 0) {
    // copy up to and including the two zeros, skip the 03
    nal.copy(out, o, from, i + 2);
    o += i + 2 - from;
    from = i + 3;
    i = from < nal.length ? nal.indexOf(EP3, from) : -1;
  }
  nal.copy(out, o, from);
  o += nal.length - from;
  return out.subarray(0, o);
}
const EP3 = Buffer.from([0, 0, 3]);

/** Thrown when a parameter set ends before the fields being read, so callers can tell bad input from bugs. */
export class BitstreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BitstreamError';
  }
}

/** MSB-first bit reader over an RBSP (already unescaped). */
export class BitReader {
  private pos = 0;
  private readonly bits: number;
  constructor(
    private readonly buf: Buffer,
    byteOffset = 0,
  ) {
    this.pos = byteOffset * 8;
    this.bits = buf.length * 8;
  }
  get bitPos(): number {
    return this.pos;
  }
  get bitsLeft(): number {
    return this.bits - this.pos;
  }

  u1(): number {
    if (this.pos >= this.bits) throw new BitstreamError('bitstream ended early');
    const b = (this.buf[this.pos >> 3] >> (7 - (this.pos & 7))) & 1;
    this.pos++;
    return b;
  }
  /** Up to 32 bits, unsigned. */
  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 2 + this.u1();
    return v;
  }
  skip(n: number): void {
    if (this.pos + n > this.bits) throw new BitstreamError('bitstream ended early');
    this.pos += n;
  }
  /** Exp-Golomb unsigned; values over 2^32 mean garbage, so more than 32 leading zeros is an error. */
  ue(): number {
    let zeros = 0;
    while (this.u1() === 0) {
      if (++zeros > 32) throw new BitstreamError('invalid Exp-Golomb code');
    }
    return zeros === 0 ? 0 : 2 ** zeros - 1 + this.u(zeros);
  }
  se(): number {
    const k = this.ue();
    return k & 1 ? (k + 1) / 2 : -(k / 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Annex-B scanning (no allocation: callers walk start codes with nextNalStart)

const SC3 = Buffer.from([0, 0, 1]);

/**
 * Index of the first NAL byte after the next start code at or after `from`, or -1.
 * Uses Buffer.indexOf (native search) so scanning a large slice costs little.
 */
export function nextNalStart(buf: Buffer, from: number): number {
  const i = buf.indexOf(SC3, from);
  return i < 0 || i + 3 >= buf.length ? -1 : i + 3;
}

/** Flags returned by scanH264 / scanH265: those of a unit's NAL index (NAL_FLAG), AUD aside. */
export const NAL_SCAN: Readonly<Omit<typeof NAL_FLAG, 'AUD'>> = NAL_FLAG;

/** a private arena for the kind scans below (emptied for each: nothing keeps what they found) */
const scratch = new NalArena(1024);

/** The NAL_SCAN flags of an Annex-B buffer (one search), read from the index a unit would get. */
export function scanFlags(buf: Buffer, codec: 'h264' | 'h265'): number {
  scratch.reset();
  const at = scratch.index(buf, codec);
  return nalIndexFlags(scratch.mem, at) & ~NAL_FLAG.AUD;
}

/** One pass over an H.264 Annex-B frame: which NAL kinds it holds (NAL_SCAN flags). */
export function scanH264(buf: Buffer): number {
  return scanFlags(buf, 'h264');
}

/** True when the Annex-B frame holds an IDR slice. */
export function h264IsKeyframe(annexB: Buffer): boolean {
  return (scanH264(annexB) & NAL_SCAN.KEY) !== 0;
}

/**
 * NAL units of an Annex-B buffer as subarrays (no copy), trailing zero bytes trimmed.
 * Same result as splitAnnexB for well-formed input; kept here so the codec helpers stand alone.
 */
function* nalUnits(buf: Buffer): Generator<Buffer> {
  NAL_SCANS.count++;
  let p = nextNalStart(buf, 0);
  while (p >= 0) {
    const next = nextNalStart(buf, p + 1);
    let end = next < 0 ? buf.length : next - 3;
    while (end > p && buf[end - 1] === 0) end--;
    if (end > p) yield buf.subarray(p, end);
    p = next;
  }
}

export interface H264ParameterSets {
  /** the last SPS in the frame, without start code */
  sps?: Buffer;
  /** the last PPS in the frame, without start code */
  pps?: Buffer;
}

/** SPS and PPS of an Annex-B frame (subarrays of the input: copy them before keeping them long). */
export function extractH264ParameterSets(annexB: Buffer): H264ParameterSets {
  const out: H264ParameterSets = {};
  for (const nal of nalUnits(annexB)) {
    const t = nal[0] & 0x1f;
    if (t === 7) out.sps = nal;
    else if (t === 8) out.pps = nal;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// SPS

export interface H264SpsInfo {
  profileIdc: number;
  /** constraint_set flags byte (constraint_set0_flag in the top bit) */
  constraintFlags: number;
  levelIdc: number;
  /** e.g. 'Baseline', 'Constrained Baseline', 'Main', 'High' */
  profile: string;
  spsId: number;
  chromaFormatIdc: number;
  bitDepthLuma: number;
  bitDepthChroma: number;
  /** picture size after cropping */
  width: number;
  height: number;
  frameMbsOnly: boolean;
  /** from VUI timing info when present and plausible */
  frameRate?: number;
}

const HIGH_PROFILES = new Set([100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]);

export function h264ProfileName(profileIdc: number, constraintFlags = 0): string {
  switch (profileIdc) {
    case 66:
      return constraintFlags & 0x40 ? 'Constrained Baseline' : 'Baseline';
    case 77:
      return 'Main';
    case 88:
      return 'Extended';
    case 100:
      return 'High';
    case 110:
      return 'High 10';
    case 122:
      return 'High 4:2:2';
    case 244:
      return 'High 4:4:4 Predictive';
    case 44:
      return 'CAVLC 4:4:4 Intra';
    case 118:
      return 'Multiview High';
    case 128:
      return 'Stereo High';
    default:
      return `profile ${profileIdc}`;
  }
}

function skipScalingList(r: BitReader, size: number): void {
  let last = 8;
  let next = 8;
  for (let j = 0; j < size; j++) {
    if (next !== 0) next = (last + r.se() + 256) % 256;
    last = next === 0 ? last : next;
  }
}

/**
 * Parses an H.264 SPS NAL unit (with its 1-byte NAL header, without start code).
 * Throws BitstreamError (or Error for a non-SPS) on malformed input.
 */
export function parseH264Sps(nal: Buffer): H264SpsInfo {
  if (nal.length < 4 || (nal[0] & 0x1f) !== 7) throw new Error('not an H.264 SPS NAL unit');
  const rbsp = unescapeRbsp(nal);
  const r = new BitReader(rbsp, 1);
  const profileIdc = r.u(8);
  const constraintFlags = r.u(8);
  const levelIdc = r.u(8);
  const spsId = r.ue();
  let chromaFormatIdc = 1;
  let separateColourPlane = 0;
  let bitDepthLuma = 8;
  let bitDepthChroma = 8;
  if (HIGH_PROFILES.has(profileIdc)) {
    chromaFormatIdc = r.ue();
    if (chromaFormatIdc > 3) throw new BitstreamError(`invalid chroma_format_idc ${chromaFormatIdc}`);
    if (chromaFormatIdc === 3) separateColourPlane = r.u1();
    bitDepthLuma = r.ue() + 8;
    bitDepthChroma = r.ue() + 8;
    r.u1(); // qpprime_y_zero_transform_bypass_flag
    if (r.u1()) {
      const lists = chromaFormatIdc !== 3 ? 8 : 12;
      for (let i = 0; i < lists; i++) if (r.u1()) skipScalingList(r, i < 6 ? 16 : 64);
    }
  }
  r.ue(); // log2_max_frame_num_minus4
  const pocType = r.ue();
  if (pocType === 0) {
    r.ue();
  } else if (pocType === 1) {
    r.u1();
    r.se();
    r.se();
    const n = r.ue();
    if (n > 255) throw new BitstreamError('num_ref_frames_in_pic_order_cnt_cycle out of range');
    for (let i = 0; i < n; i++) r.se();
  }
  r.ue(); // max_num_ref_frames
  r.u1(); // gaps_in_frame_num_value_allowed_flag
  const widthMbs = r.ue() + 1;
  const heightMapUnits = r.ue() + 1;
  const frameMbsOnly = r.u1();
  if (!frameMbsOnly) r.u1(); // mb_adaptive_frame_field_flag
  r.u1(); // direct_8x8_inference_flag
  let cropL = 0,
    cropR = 0,
    cropT = 0,
    cropB = 0;
  if (r.u1()) {
    cropL = r.ue();
    cropR = r.ue();
    cropT = r.ue();
    cropB = r.ue();
  }
  // Crop units depend on chroma subsampling (ChromaArrayType) and on field coding.
  const chromaArrayType = separateColourPlane ? 0 : chromaFormatIdc;
  const subW = chromaArrayType === 1 || chromaArrayType === 2 ? 2 : 1;
  const subH = chromaArrayType === 1 ? 2 : 1;
  const cropUnitX = chromaArrayType === 0 ? 1 : subW;
  const cropUnitY = (chromaArrayType === 0 ? 1 : subH) * (2 - frameMbsOnly);
  const width = widthMbs * 16 - cropUnitX * (cropL + cropR);
  const height = (2 - frameMbsOnly) * heightMapUnits * 16 - cropUnitY * (cropT + cropB);
  if (width <= 0 || height <= 0 || width > 16384 || height > 16384) {
    throw new BitstreamError(`implausible picture size ${width}x${height}`);
  }
  const info: H264SpsInfo = {
    profileIdc,
    constraintFlags,
    levelIdc,
    profile: h264ProfileName(profileIdc, constraintFlags),
    spsId,
    chromaFormatIdc,
    bitDepthLuma,
    bitDepthChroma,
    width,
    height,
    frameMbsOnly: frameMbsOnly === 1,
  };
  try {
    if (r.u1()) {
      const fr = readVuiFrameRate(r);
      if (fr !== undefined) info.frameRate = fr;
    }
  } catch (err) {
    // A truncated VUI loses only the frame rate; the picture size above is still right.
    if (!(err instanceof BitstreamError)) throw err;
  }
  return info;
}

function readVuiFrameRate(r: BitReader): number | undefined {
  if (r.u1()) {
    // aspect_ratio_info_present_flag
    if (r.u(8) === 255) r.skip(32);
  }
  if (r.u1()) r.u1(); // overscan
  if (r.u1()) {
    // video_signal_type_present_flag
    r.skip(4);
    if (r.u1()) r.skip(24);
  }
  if (r.u1()) {
    r.ue();
    r.ue();
  } // chroma_loc_info
  if (!r.u1()) return undefined; // timing_info_present_flag
  const numUnitsInTick = r.u(32);
  const timeScale = r.u(32);
  if (numUnitsInTick === 0) return undefined;
  const fps = timeScale / (2 * numUnitsInTick);
  // Cameras often write placeholder timing; only a plausible rate is worth passing on.
  return fps >= 1 && fps <= 240 ? Math.round(fps * 1000) / 1000 : undefined;
}

// ---------------------------------------------------------------------------------------------
// avcC

/**
 * AVCDecoderConfigurationRecord (ISO/IEC 14496-15 5.3.3.1) from SPS and PPS NAL units without start codes.
 * NAL length size is 4 bytes.
 */
export function buildAvcC(sps: Buffer | Buffer[], pps: Buffer | Buffer[]): Buffer {
  const spsList = Array.isArray(sps) ? sps : [sps];
  const ppsList = Array.isArray(pps) ? pps : [pps];
  if (spsList.length === 0 || spsList.length > 31) throw new Error('avcC needs 1..31 SPS');
  if (ppsList.length === 0 || ppsList.length > 255) throw new Error('avcC needs 1..255 PPS');
  const first = spsList[0];
  if (first.length < 4) throw new Error('SPS too short for avcC');
  const parts: Buffer[] = [Buffer.from([1, first[1], first[2], first[3], 0xff, 0xe0 | spsList.length])];
  for (const s of spsList) parts.push(u16(s.length), s);
  parts.push(Buffer.from([ppsList.length]));
  for (const p of ppsList) parts.push(u16(p.length), p);
  const profileIdc = first[1];
  if (HIGH_PROFILES.has(profileIdc)) {
    // Profiles whose SPS carries chroma format and bit depths repeat them here (14496-15 5.3.3.1.2),
    // as ffmpeg writes it.
    let chroma = 1,
      lumaMinus8 = 0,
      chromaMinus8 = 0;
    try {
      const info = parseH264Sps(first);
      chroma = info.chromaFormatIdc;
      lumaMinus8 = info.bitDepthLuma - 8;
      chromaMinus8 = info.bitDepthChroma - 8;
    } catch {
      // keep the 4:2:0 8-bit defaults: the record stays valid and the decoder reads the SPS itself
    }
    parts.push(Buffer.from([0xfc | (chroma & 3), 0xf8 | (lumaMinus8 & 7), 0xf8 | (chromaMinus8 & 7), 0]));
  }
  return Buffer.concat(parts);
}

function u16(n: number): Buffer {
  if (n > 0xffff) throw new Error('parameter set longer than 65535 bytes');
  const b = Buffer.allocUnsafe(2);
  b.writeUInt16BE(n, 0);
  return b;
}
