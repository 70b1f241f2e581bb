/**
 * One stream's audio on its way to AAC: decode the terminal's frames to PCM, resample (and up-mix) to the output
 * rate, encode, and put each AAC frame on the stream's timeline.
 *
 * Time. The first input sample anchors the output: AAC frame k starts at output sample k * 1024 - priming -
 * resampler delay after it. Input frames are expected back to back (the ingest closes sub-frame gaps already); a
 * gap up to maxGapMs (loss, a terminal pausing its audio) is filled with silence so the AAC timeline stays
 * continuous and players do not stall; a longer gap, or time going back (a new publisher), starts over: new
 * anchor, encoder and resampler reset.
 */
import { createDecoder, Resampler, type AudioDecoder, type CodecOptions } from '../../../plugin-sdk/codecs';
import type { AudioTrackInfo } from '../../../plugin-sdk';

/** What the pipeline needs of an AAC encoder (see engine/). */
export interface FrameEncoder {
  readonly frameSamples: number;
  /** samples of the output's start that the encoder adds before the input (its priming) */
  readonly primingSamples: number;
  /** samples per channel it holds toward the next frame */
  buffered(): number;
  /** Interleaved PCM in [-1, 1), any length; the whole raw AAC frames now complete, in order. */
  encode(pcm: Float32Array): Uint8Array[];
  /** Forgets buffered input and state: the next input starts a new signal. */
  reset(): void;
}

export interface PipelineOutput {
  sampleRate: number;
  channels: 1 | 2;
}

export interface AacFrame {
  data: Uint8Array;
  /** at the output sample rate, on the stream's timeline */
  dtsTicks: number;
}

export interface PipelineStats {
  framesIn: number;
  framesOut: number;
  /** samples of silence put into gaps */
  silenceSamples: number;
  /** times the timeline started over (long gap, time going back) */
  restarts: number;
}

const SILENCE_CHUNK = new Int16Array(1024);

export class AacPipeline {
  private readonly decoder: AudioDecoder;
  private readonly resampler: Resampler;
  private readonly inRate: number;
  /** output ticks of the first input sample since the last restart */
  private anchorOut = 0;
  /** input samples consumed since the anchor */
  private inSamples = 0;
  /** input position (at the input rate) where the next frame should start; NaN before the first */
  private nextIn = NaN;
  /** AAC frames emitted since the anchor */
  private outFrames = 0;
  private readonly delayOut: number;
  readonly stats: PipelineStats = { framesIn: 0, framesOut: 0, silenceSamples: 0, restarts: 0 };

  constructor(
    input: AudioTrackInfo,
    private readonly out: PipelineOutput,
    private readonly encoder: FrameEncoder,
    private readonly maxGapMs = 2000,
    codecOptions: CodecOptions = {},
  ) {
    const d = createDecoder(input, codecOptions);
    if (!d) throw new TypeError(`no decoder for ${input.codec} audio`);
    this.decoder = d;
    this.inRate = d.sampleRate;
    this.resampler = new Resampler({ inputRate: this.inRate, outputRate: out.sampleRate, channels: out.channels });
    this.delayOut = Math.round(this.resampler.delaySec * out.sampleRate);
  }

  /** One coded frame at `dtsTicks` of `timescale`: the AAC frames it completes. */
  push(frame: Uint8Array, dtsTicks: number, timescale: number): AacFrame[] {
    this.stats.framesIn++;
    const at = Math.round((dtsTicks * this.inRate) / timescale);
    const out: AacFrame[] = [];
    if (Number.isNaN(this.nextIn)) {
      this.start(at);
    } else {
      const gap = at - this.nextIn;
      // within a millisecond counts as back to back: timestamps are whole ms at best
      const slack = Math.ceil(this.inRate / 1000);
      if (gap < -slack || gap > (this.maxGapMs * this.inRate) / 1000) {
        this.stats.restarts++;
        this.encoder.reset();
        this.resampler.reset();
        this.decoder.reset();
        this.start(at);
      } else if (gap > slack) {
        this.silence(gap, out);
      }
    }
    const pcm = this.decoder.decode(frame);
    this.feed(pcm, out);
    this.nextIn = at + pcm.length;
    return out;
  }

  /**
   * Where the input (in ticks of `timescale`) must reach for the next AAC frame to complete: the encoder's missing
   * samples taken back to the input rate, a sample early rather than late (a resampler's phase can shift the count
   * by one): an input frame ending before it would make no AAC frame, so the stage keeps such frames together.
   */
  dueTicks(timescale: number): number {
    if (Number.isNaN(this.nextIn)) return NaN;
    const needOut = this.encoder.frameSamples - this.encoder.buffered();
    const needIn = Math.max(0, Math.floor((needOut * this.inRate) / this.out.sampleRate) - 1);
    return ((this.nextIn + needIn) * timescale) / this.inRate;
  }

  private start(at: number): void {
    this.anchorOut = Math.round((at * this.out.sampleRate) / this.inRate);
    this.inSamples = 0;
    this.outFrames = 0;
    this.nextIn = at;
  }

  private silence(samples: number, out: AacFrame[]): void {
    this.stats.silenceSamples += samples;
    for (let left = samples; left > 0; left -= SILENCE_CHUNK.length) {
      this.feed(left >= SILENCE_CHUNK.length ? SILENCE_CHUNK : SILENCE_CHUNK.subarray(0, left), out);
    }
  }

  private feed(pcm: Int16Array, out: AacFrame[]): void {
    this.inSamples += pcm.length;
    const frames = this.encoder.encode(this.resampler.process(pcm));
    const n = this.encoder.frameSamples;
    for (const data of frames) {
      const dtsTicks = this.anchorOut + this.outFrames * n - this.encoder.primingSamples - this.delayOut;
      this.outFrames++;
      this.stats.framesOut++;
      out.push({ data, dtsTicks });
    }
  }
}
