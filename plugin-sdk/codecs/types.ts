import type { AudioCodec } from '../media';

/**
 * A decoder of one audio track to 16-bit linear PCM, mono. Stateful codecs (G.726) carry their predictor from one
 * frame to the next, so one decoder serves one track and sees its frames in order; `reset()` when the track restarts
 * (the terminal's encoder starts again from its initial state). Not after a lost frame: the encoder did not reset,
 * and G.726 falls back into step with it by itself, exactly (on the fixtures: half a second typically, 1.4 s at
 * most in 212 trials; meanwhile the error is typically 16 dB below the signal).
 */
export interface AudioDecoder {
  readonly codec: AudioCodec;
  /** samples per second of the PCM out (the track's rate: these codecs do not resample) */
  readonly sampleRate: number;
  /** PCM samples that a frame of this many bytes decodes to */
  samplesIn(frameBytes: number): number;
  /**
   * A frame to PCM. The array is a view of the decoder's own buffer, which the next decode() overwrites: use it (or
   * copy it) before decoding the next frame. (A fresh array per frame costs 0.5 µs more, 1.5 to 2.5 times what G.711
   * decoding itself costs; decodeInto writes where the caller says.)
   */
  decode(frame: Uint8Array): Int16Array;
  /** The same into the caller's array at `offset` (room for samplesIn(frame.length) needed); returns the count. */
  decodeInto(frame: Uint8Array, out: Int16Array, offset?: number): number;
  /** Back to the state before the first frame. */
  reset(): void;
}

/**
 * An encoder of 16-bit linear PCM, mono, to one coded frame per call (what intercom sends to a terminal). Stateful
 * codecs carry their state across calls, so the frames must be sent in order and all of them.
 */
export interface AudioEncoder {
  readonly codec: AudioCodec;
  readonly sampleRate: number;
  /** bytes a frame of this many samples encodes to */
  bytesFor(samples: number): number;
  /** One frame: a new Buffer each call (sockets keep payloads until they are written, so no buffer is reused). */
  encode(pcm: Int16Array): Buffer;
  /** The same into the caller's array at `offset` (room for bytesFor(pcm.length) needed); returns the bytes written. */
  encodeInto(pcm: Int16Array, out: Uint8Array, offset?: number): number;
  reset(): void;
}

export function checkRoom(what: string, need: number, have: number): void {
  if (have < need) throw new RangeError(`${what}: ${need} needed, ${have} free in the output`);
}

/** decode() on top of decodeInto(), with the one reused output buffer the AudioDecoder contract allows. */
export abstract class DecoderBase implements AudioDecoder {
  abstract readonly codec: AudioCodec;
  abstract readonly sampleRate: number;
  private buf = new Int16Array(0);
  /** the last view handed out: frames of one size (the usual case) then allocate nothing at all */
  private view = this.buf;

  abstract samplesIn(frameBytes: number): number;
  abstract decodeInto(frame: Uint8Array, out: Int16Array, offset?: number): number;
  abstract reset(): void;

  decode(frame: Uint8Array): Int16Array {
    const n = this.samplesIn(frame.length);
    if (this.view.length !== n) {
      if (this.buf.length < n) this.buf = new Int16Array(Math.max(n, this.buf.length * 2));
      this.view = this.buf.subarray(0, n);
    }
    this.decodeInto(frame, this.view, 0);
    return this.view;
  }
}
