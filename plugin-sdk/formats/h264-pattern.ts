/**
 * A test pattern as H.264 made without an encoder: every key frame is an IDR picture of I_PCM macroblocks (the
 * samples as they are, no prediction, no transform), every other frame a P picture whose macroblocks are all skipped
 * (the previous picture again). Constrained Baseline, CAVLC, 4:2:0, any size in whole macroblocks. What it shows:
 * eight colour bars that move one bar to the left at each key frame, and a white block that moves along the bottom
 * with them, so a player that shows it plays, and one that jumps a GOP shows a jump.
 *
 * Costs: a key frame is 384 bytes a macroblock (~115 KB at 320x240), a P frame a few bytes. Frames are made once and
 * kept (eight key frames, one P frame per frame_num): a source pushes the same bytes cycle after cycle.
 */
import { Buffer } from 'node:buffer';

/** RBSP bits, written MSB first */
class BitWriter {
  private bytes: number[] = [];
  private cur = 0;
  private n = 0;

  bits(value: number, count: number): this {
    for (let i = count - 1; i >= 0; i--) {
      this.cur = (this.cur << 1) | ((value >>> i) & 1);
      if (++this.n === 8) this.flush();
    }
    return this;
  }

  /** ue(v): Exp-Golomb */
  ue(v: number): this {
    const x = v + 1;
    const len = 32 - Math.clz32(x);
    return this.bits(0, len - 1).bits(x, len);
  }

  /** se(v) */
  se(v: number): this {
    return this.ue(v <= 0 ? -2 * v : 2 * v - 1);
  }

  /** zero bits up to the next byte boundary */
  align(): this {
    while (this.n !== 0) this.bits(0, 1);
    return this;
  }

  raw(b: Uint8Array): this {
    if (this.n !== 0) throw new Error('raw bytes off a byte boundary');
    for (const x of b) this.bytes.push(x);
    return this;
  }

  /** rbsp_trailing_bits, then the NAL unit with its start code and emulation prevention */
  nal(header: number): Buffer {
    this.bits(1, 1).align();
    const out: number[] = [0, 0, 0, 1, header];
    let zeros = 0;
    for (const b of this.bytes) {
      if (zeros >= 2 && b <= 3) {
        out.push(3);
        zeros = 0;
      }
      out.push(b);
      zeros = b === 0 ? zeros + 1 : 0;
    }
    return Buffer.from(out);
  }

  private flush(): void {
    this.bytes.push(this.cur);
    this.cur = 0;
    this.n = 0;
  }
}

/** BT.601 studio-range YCbCr of the bars: white, yellow, cyan, green, magenta, red, blue, black */
const BARS: ReadonlyArray<readonly [number, number, number]> = [
  [235, 128, 128],
  [210, 16, 146],
  [170, 166, 16],
  [145, 54, 34],
  [106, 202, 222],
  [81, 90, 240],
  [41, 240, 110],
  [16, 128, 128],
];
const LOG2_MAX_FRAME_NUM = 4;

export interface H264TestPatternOptions {
  /** multiples of 16 (default 320 x 240) */
  width?: number;
  height?: number;
}

export interface H264TestPattern {
  readonly width: number;
  readonly height: number;
  /** parameter sets without start codes, for the track */
  readonly sps: Buffer;
  readonly pps: Buffer;
  /**
   * Frame `n` of a GOP of `gopFrames` (frame 0 of each GOP a key frame), Annex-B, the key frames with SPS and PPS in
   * front. The bytes are shared between calls: never change them.
   */
  frame(n: number, gopFrames: number): { keyframe: boolean; payload: Buffer };
}

/** The pattern at one size; see the module's comment. */
export function h264TestPattern(opts: H264TestPatternOptions = {}): H264TestPattern {
  const width = opts.width ?? 320;
  const height = opts.height ?? 240;
  if (!(width % 16 === 0 && height % 16 === 0 && width >= 16 && height >= 16 && width <= 4096 && height <= 4096)) {
    throw new RangeError(`h264TestPattern: ${width}x${height}: give multiples of 16, from 16 to 4096`);
  }
  const mbW = width / 16;
  const mbH = height / 16;
  // the level whose largest frame (MaxFS, in macroblocks) holds this one: 3, 4 or 5.1
  const level = mbW * mbH <= 1620 ? 30 : mbW * mbH <= 8192 ? 40 : 51;
  const sps = new BitWriter()
    .bits(66, 8)
    .bits(0b11000000, 8)
    .bits(level, 8) // Baseline with constraint_set0 and 1: Constrained Baseline
    .ue(0) // seq_parameter_set_id
    .ue(LOG2_MAX_FRAME_NUM - 4)
    .ue(2) // pic_order_cnt_type 2: output order is decoding order
    .ue(1) // max_num_ref_frames
    .bits(0, 1) // gaps_in_frame_num_value_allowed_flag
    .ue(mbW - 1)
    .ue(mbH - 1)
    .bits(1, 1) // frame_mbs_only_flag
    .bits(1, 1) // direct_8x8_inference_flag
    .bits(0, 1) // frame_cropping_flag
    .bits(0, 1) // vui_parameters_present_flag
    .nal(0x67);
  const pps = new BitWriter()
    .ue(0)
    .ue(0) // pps id, sps id
    .bits(0, 1)
    .bits(0, 1) // CAVLC; no bottom_field_pic_order_in_frame_present
    .ue(0) // one slice group
    .ue(0)
    .ue(0) // num_ref_idx_l0/l1_default_active_minus1
    .bits(0, 1)
    .bits(0, 2) // no weighted prediction
    .se(0)
    .se(0)
    .se(0) // pic_init_qp/qs, chroma_qp_index_offset
    .bits(1, 1) // deblocking_filter_control_present_flag
    .bits(0, 1)
    .bits(0, 1) // constrained_intra_pred, redundant_pic_cnt_present
    .nal(0x68);

  /** the k-th key frame of a cycle of eight: the bars moved k to the left, the block at the k-th eighth */
  const idr = (k: number): Buffer => {
    const w = new BitWriter()
      .ue(0)
      .ue(7)
      .ue(0) // first_mb_in_slice, slice_type I (all slices), pps id
      .bits(0, LOG2_MAX_FRAME_NUM) // frame_num
      .ue(k) // idr_pic_id: two IDR pictures in a row differ
      .bits(0, 1)
      .bits(0, 1) // dec_ref_pic_marking: no_output_of_prior_pics, long_term_reference
      .se(0) // slice_qp_delta
      .ue(1); // deblocking off (I_PCM has nothing to smooth)
    const mb = new Uint8Array(384);
    const mark = Math.floor((k * mbW) / BARS.length);
    for (let y = 0; y < mbH; y++) {
      for (let x = 0; x < mbW; x++) {
        const bar = BARS[(Math.floor((x * BARS.length) / mbW) + k) % BARS.length];
        const c = y === mbH - 1 && x === mark ? BARS[0] : bar;
        mb.fill(c[0], 0, 256).fill(c[1], 256, 320).fill(c[2], 320, 384);
        w.ue(25).align().raw(mb); // mb_type I_PCM, pcm_alignment_zero_bits, the samples
      }
    }
    return w.nal(0x65);
  };
  const skipped = (frameNum: number): Buffer =>
    new BitWriter()
      .ue(0)
      .ue(5)
      .ue(0) // first_mb_in_slice, slice_type P (all slices), pps id
      .bits(frameNum, LOG2_MAX_FRAME_NUM)
      .bits(0, 1) // num_ref_idx_active_override_flag
      .bits(0, 1) // ref_pic_list_modification_flag_l0
      .bits(0, 1) // adaptive_ref_pic_marking_mode_flag (a reference picture: sliding window)
      .se(0)
      .ue(1)
      .ue(mbW * mbH) // mb_skip_run: every macroblock
      .nal(0x41);

  const ps = Buffer.concat([sps, pps]);
  const keys: Buffer[] = [];
  const skips: Buffer[] = [];
  for (let f = 0; f < 1 << LOG2_MAX_FRAME_NUM; f++) skips.push(skipped(f));
  return {
    width,
    height,
    sps: sps.subarray(4),
    pps: pps.subarray(4),
    frame(n, gopFrames) {
      if (!(Number.isInteger(n) && n >= 0 && Number.isInteger(gopFrames) && gopFrames >= 1)) {
        throw new RangeError('h264TestPattern.frame: n >= 0 and gopFrames >= 1, integers');
      }
      const at = n % gopFrames;
      // frame_num counts reference pictures from the IDR, modulo its range
      if (at !== 0) return { keyframe: false, payload: skips[at % skips.length] };
      const key = Math.floor(n / gopFrames) % BARS.length;
      return { keyframe: true, payload: (keys[key] ??= Buffer.concat([ps, idr(key)])) };
    },
  };
}
