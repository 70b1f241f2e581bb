/**
 * The G.726 ADPCM core shared by the decoder and the encoder: the per-rate quantiser tables, the 11-bit floating
 * point arithmetic and the adaptive predictor/quantiser state (ITU-T G.726 section 4). It lives apart from the byte
 * packing and the AudioDecoder/AudioEncoder classes because it is the part that must match ffmpeg's
 * libavcodec/g726.c bit for bit, so its integer arithmetic is the one piece a change must re-verify against ffmpeg.
 *
 * Linear PCM in and out is 16-bit; the codec itself works on 14-bit samples (input divided by 4, truncated toward
 * zero as C does, output multiplied by 4).
 */
const BIG = 0x7fffffff;

interface RateTables {
  /** decision levels of the quantiser (log domain), BIG-terminated */
  readonly quant: Int32Array;
  /** reconstruction level per codeword (log domain); -32768 for "none" (decodes to 0) */
  readonly iquant: Int16Array;
  /** scale factor multiplier W(I) */
  readonly w: Int16Array;
  /** F(I): speed control input */
  readonly f: Uint8Array;
}

const TABLES: Record<number, RateTables> = {
  2: {
    quant: Int32Array.of(260, BIG),
    iquant: Int16Array.of(116, 365, 365, 116),
    w: Int16Array.of(-22, 439, 439, -22),
    f: Uint8Array.of(0, 7, 7, 0),
  },
  3: {
    quant: Int32Array.of(7, 217, 330, BIG),
    iquant: Int16Array.of(-32768, 135, 273, 373, 373, 273, 135, -32768),
    w: Int16Array.of(-4, 30, 137, 582, 582, 137, 30, -4),
    f: Uint8Array.of(0, 1, 2, 7, 7, 2, 1, 0),
  },
  4: {
    quant: Int32Array.of(-125, 79, 177, 245, 299, 348, 399, BIG),
    iquant: Int16Array.of(-32768, 4, 135, 213, 273, 323, 373, 425, 425, 373, 323, 273, 213, 135, 4, -32768),
    w: Int16Array.of(-12, 18, 41, 64, 112, 198, 355, 1122, 1122, 355, 198, 112, 64, 41, 18, -12),
    f: Uint8Array.of(0, 0, 0, 1, 1, 1, 3, 7, 7, 3, 1, 1, 1, 0, 0, 0),
  },
  5: {
    quant: Int32Array.of(-122, -16, 67, 138, 197, 249, 297, 338, 377, 412, 444, 474, 501, 527, 552, BIG),
    iquant: Int16Array.of(
      -32768,
      -66,
      28,
      104,
      169,
      224,
      274,
      318,
      358,
      395,
      429,
      459,
      488,
      514,
      539,
      566,
      566,
      539,
      514,
      488,
      459,
      429,
      395,
      358,
      318,
      274,
      224,
      169,
      104,
      28,
      -66,
      -32768,
    ),
    w: Int16Array.of(
      14,
      14,
      24,
      39,
      40,
      41,
      58,
      100,
      141,
      179,
      219,
      280,
      358,
      440,
      529,
      696,
      696,
      529,
      440,
      358,
      280,
      219,
      179,
      141,
      100,
      58,
      41,
      40,
      39,
      24,
      14,
      14,
    ),
    f: Uint8Array.of(0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 6, 6, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0),
  },
};

function checkG726Bits(bits: number): void {
  if (!(bits === 2 || bits === 3 || bits === 4 || bits === 5)) {
    throw new RangeError(`G.726 has 2..5 bits per sample (16..40 kbit/s), not ${bits}`);
  }
}

/** floor(log2(v)) for v >= 1, 0 for 0: the exponent of G.726's floating-point format */
function log2(v: number): number {
  return v === 0 ? 0 : 31 - Math.clz32(v);
}

// G.726's 11-bit floating point numbers (sign, 4-bit exponent, 6-bit mantissa) are kept packed in one integer,
// (sign << 11) | (exp << 6) | mant (the exponent reaches 16 for -32768), so the predictor's history is a few small
// integer arrays and nothing is allocated per sample.
const SIGN = 2048;

function toFloat11(i: number): number {
  let sign = 0;
  if (i < 0) {
    sign = SIGN;
    i = -i;
  }
  if (i === 0) return sign | 32;
  const exp = log2(i) + 1;
  return sign | (exp << 6) | ((i << 6) >> exp);
}

/**
 * The standard's FMULT of toFloat11(x) and a stored Float11, as a 16-bit integer (wrapping like C's int16_t result),
 * without packing x first: the predictor does 8 of these per sample.
 */
function fmultInt(x: number, f: number): number {
  let neg = f & SIGN;
  if (x < 0) {
    x = -x;
    neg ^= SIGN;
  }
  let exp = (f >> 6) & 31;
  let mant = 32;
  if (x !== 0) {
    const e = 32 - Math.clz32(x);
    exp += e;
    mant = (x << 6) >> e;
  }
  let res = (mant * (f & 63) + 0x30) >> 4;
  res = exp > 19 ? res << (exp - 19) : res >> (19 - exp);
  if (neg !== 0) res = -res;
  return (res << 16) >> 16;
}

function clip(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

/**
 * The adaptive predictor and quantiser state both ends share. Decoding a codeword advances it; encoding picks the
 * codeword for a sample and then advances it the same way, which is what keeps an encoder and a decoder in step.
 */
export class G726State {
  private readonly t: RateTables;
  private readonly mask: number;
  private readonly signShift: number;
  /** reconstructed signal, last two (Float11) */
  private readonly sr = new Int32Array(2);
  /** quantised difference, last six (Float11, sign from the codeword) */
  private readonly dq = new Int32Array(6);
  /** sixth-order (zeros) predictor coefficients */
  private readonly b = new Int32Array(6);
  private a0 = 0;
  private a1 = 0;
  private pk0 = 1;
  private pk1 = 1;
  private ap = 0;
  private yl = 34816;
  private dms = 0;
  private dml = 0;
  private td = 0;
  private se = 0;
  private sez = 0;
  private y = 544;

  /**
   * `wrap`: G726Options.overflow 'wrap'. Saturating is the default because real terminal audio overflows (6 to 29
   * times in each 81 s glaciall recording), and each wrap is a full-scale click.
   */
  constructor(
    readonly bits: number,
    private readonly wrap = false,
  ) {
    checkG726Bits(bits);
    this.t = TABLES[bits];
    this.mask = (1 << bits) - 1;
    this.signShift = bits - 1;
    this.reset();
  }

  reset(): void {
    this.sr.fill(32);
    this.dq.fill(32);
    this.b.fill(0);
    this.a0 = this.a1 = 0;
    this.pk0 = this.pk1 = 1;
    this.ap = 0;
    this.yl = 34816;
    this.y = 544;
    this.dms = this.dml = this.td = 0;
    this.se = this.sez = 0;
  }

  /** One codeword to a 16-bit sample. */
  decode(code: number): number {
    const t = this.t;
    const sign = code >> this.signShift;
    // inverse adaptive quantiser (log -> linear)
    const dql = t.iquant[code] + (this.y >> 2);
    let dq = dql < 0 ? 0 : ((128 + (dql & 0x7f)) << ((dql >> 7) & 15)) >> 7;

    // a large step right after a tone may be a transition: then the predictor restarts
    const yl = this.yl;
    const ylint = yl >> 15;
    const thr2 = ylint > 9 ? 0x1f << 10 : (0x20 + ((yl >> 10) & 0x1f)) << ylint;
    const tr = this.td === 1 && dq > (3 * thr2) >> 2;

    if (sign !== 0) dq = -dq;
    const re = ((this.se + dq) << 16) >> 16;

    const p = this.sez + dq;
    const pk0 = p === 0 ? 0 : p < 0 ? -1 : 1;
    const dq0 = dq === 0 ? 0 : dq < 0 ? -1 : 1;
    const b = this.b;
    const hist = this.dq;
    if (tr) {
      this.a0 = 0;
      this.a1 = 0;
      b.fill(0);
    } else {
      // the standard's +255, not +256, upper bound
      const fa1 = clip((-this.a0 * this.pk0 * pk0) >> 5, -256, 255);
      let a1 = this.a1 + 128 * pk0 * this.pk1 + fa1 - (this.a1 >> 7);
      a1 = clip(a1, -12288, 12288);
      const a0 = this.a0 + 192 * pk0 * this.pk0 - (this.a0 >> 8);
      this.a1 = a1;
      this.a0 = clip(a0, -(15360 - a1), 15360 - a1);
      for (let i = 0; i < 6; i++) {
        b[i] += 128 * dq0 * ((hist[i] & SIGN) !== 0 ? -1 : 1) - (b[i] >> 8);
      }
    }

    this.pk1 = this.pk0;
    this.pk0 = pk0 !== 0 ? pk0 : 1;
    const sr = this.sr;
    sr[1] = sr[0];
    sr[0] = toFloat11(re);
    for (let i = 5; i > 0; i--) hist[i] = hist[i - 1];
    // the codeword's sign, even for a zero difference
    hist[0] = (toFloat11(dq) & ~SIGN) | (sign << 11);

    this.td = this.a1 < -11776 ? 1 : 0;

    const f = t.f[code] << 4;
    this.dms += f + (-this.dms >> 5);
    this.dml += f + (-this.dml >> 7);
    if (tr) {
      this.ap = 256;
    } else {
      this.ap += -this.ap >> 4;
      if (this.y <= 1535 || this.td === 1 || Math.abs((this.dms << 2) - this.dml) >= this.dml >> 3) this.ap += 0x20;
    }

    const yu = clip(this.y + t.w[code] + (-this.y >> 5), 544, 5120);
    this.yl += yu + (-this.yl >> 6);
    const al = this.ap >= 256 ? 64 : this.ap >> 2;
    this.y = (this.yl + (yu - (this.yl >> 6)) * al) >> 6;

    let se = 0;
    for (let i = 0; i < 6; i++) se += fmultInt(b[i] >> 2, hist[i]);
    this.sez = se >> 1;
    se += fmultInt(this.a0 >> 2, sr[0]);
    se += fmultInt(this.a1 >> 2, sr[1]);
    this.se = se >> 1;

    const out = re * 4;
    if (this.wrap) return ((out > 65535 ? 65535 : out < -65535 ? -65535 : out) << 16) >> 16;
    return out > 32767 ? 32767 : out < -32768 ? -32768 : out;
  }

  /** One 16-bit sample to its codeword (the state advances as the decoder's will). */
  encode(sample: number): number {
    // C's division truncates toward zero; the encoder this must match does sig/4
    let d = ((sample / 4) | 0) - this.se;
    let neg = false;
    if (d < 0) {
      neg = true;
      d = -d;
    }
    const exp = log2(d);
    const dln = (exp << 7) + (((d << 7) >> exp) & 0x7f) - (this.y >> 2);
    const q = this.t.quant;
    let i = 0;
    while (q[i] !== BIG && q[i] < dln) i++;
    if (neg) i = ~i;
    // at 24..40 kbit/s the all-zero codeword is not sent: the smallest step goes out as "negative zero"
    if (this.bits !== 2 && i === 0) i = 0xff;
    const code = i & this.mask;
    this.decode(code);
    return code;
  }
}
