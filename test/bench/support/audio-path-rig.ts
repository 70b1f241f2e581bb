/**
 * The main thread's part of a G.711A frame's way to an FLV player of the AAC form, in one process with no sockets
 * and no bus: the ingest's normaliser, the AAC stage (its held frames, frame lane and the units it makes of the
 * answer) and the FLV form with the copy a player in step makes of it. The worker is a stand-in that answers each
 * batch at once with made-up AAC frames (test/support/instant-transcoder.ts): what it costs is the worker's, not what
 * is measured. Used by test/bench/audio-path.ts.
 */
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import type { MediaReader, StageInstance } from '../../../plugin-sdk';
import type { FormatEncoder } from '../../../plugin-sdk/bus';
import { AudioNormaliser } from '../../../plugins/jt1078-ingest/src/audio-normaliser';
import type { Jt1078Frame } from '../../../plugins/jt1078-ingest/src/reassembler';
import { aacStage } from '../../../plugins/audio-aac/src/aac-stage';
import { createFlvFormats, type FlvFrame } from '../../../plugins/flv-out/src/flv-format';
import { InstantTranscoder, startOnBareInput } from '../../support/instant-transcoder';

const FRAME_SAMPLES = 160;

export interface RigOptions {
  streams: number;
  /** how far a frame goes: the normaliser only, on to the AAC stage, or on to the FLV form and a player's copy */
  to: 'normaliser' | 'stage' | 'flv';
}

interface RigStream {
  norm: AudioNormaliser;
  frame: Jt1078Frame;
  reader: MediaReader | undefined;
  flv: FormatEncoder<FlvFrame> | undefined;
  instance: StageInstance | undefined;
}

/** What went through: units out of the normaliser and of the stage, FLV media bytes laid out. */
export interface RigCounts {
  frames: number;
  aacUnits: number;
  flvBytes: number;
}

const noCount = { inc: () => undefined };

export class AudioPathRig {
  readonly worker = new InstantTranscoder();
  readonly counts: RigCounts = { frames: 0, aacUnits: 0, flvBytes: 0 };
  private readonly streams: RigStream[] = [];
  /** the G.711A bytes the frames carry, one 160-byte view per frame slot */
  private readonly payloads: Buffer[] = [];
  private readonly scratch = Buffer.allocUnsafeSlow(64 * 1024);
  private ts = 0;

  constructor(o: RigOptions) {
    const mem = Buffer.alloc(64 * FRAME_SAMPLES);
    for (let i = 0; i < mem.length; i++) mem[i] = 0xd5 ^ (i & 0x3f);
    for (let k = 0; k < 64; k++) this.payloads.push(mem.subarray(k * FRAME_SAMPLES, (k + 1) * FRAME_SAMPLES));
    const stage = aacStage({
      worker: this.worker,
      defaults: { sampleRate: 8000, channels: 1 },
      bitrate: () => 24_000,
      maxGapMs: 2000,
      maxInFlight: 64,
      frameBatchMs: 0,
      log: pino({ level: 'silent' }),
      hooks: { transcoders: () => undefined, framesOut: () => undefined, leftOut: () => undefined, failed: () => undefined },
    });
    const formats = createFlvFormats({
      audioCodecs: ['aac'],
      tags: { video: noCount, audio: noCount, script: noCount },
      audioSkipped: noCount,
      audioSkipStarted: () => undefined,
      encoders: () => undefined,
    });
    for (let s = 0; s < o.streams; s++) {
      const frame: Jt1078Frame = {
        kind: 'audio',
        codec: 'g711a',
        pt: 6,
        dataType: 3,
        timestamp: 0,
        keyframe: true,
        payload: this.payloads[0],
        nalFlags: 0,
        nals: undefined,
        nalsAt: 0,
        packets: 1,
        hisilicon: false,
      };
      const name = `rig-${s}`;
      const flv = o.to === 'flv' ? formats.a.createEncoder({ name, tracks: [], wallClock: () => undefined }) : undefined;
      const started =
        o.to === 'normaliser'
          ? undefined
          : startOnBareInput(stage, name, {
              setTrack: (t) => flv?.tracks?.([t]),
              push: (u) => {
                this.counts.aacUnits++;
                const f = flv?.encode(u);
                // what a player in step does with it (Transport.sendWhole): the unit laid out in one buffer
                if (f !== undefined) this.counts.flvBytes += f.copyMedia(this.scratch, 0);
              },
            });
      const st: RigStream = { norm: undefined as unknown as AudioNormaliser, frame, reader: started?.reader, flv, instance: started?.instance };
      st.norm = new AudioNormaliser({
        map: (t) => t,
        now: () => performance.now(),
        onTrack: (t) => st.reader?.tracks?.([t]),
        onUnit: (u) => {
          this.counts.frames++;
          st.reader?.write(u, undefined);
        },
        onFraming: () => undefined,
      });
      this.streams.push(st);
    }
  }

  /** `n` frames of every stream, one of each per pass of the event loop (as socket reads come), answered as they go. */
  async push(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const ts = this.ts;
      this.ts += 20;
      const payload = this.payloads[i & 63];
      for (const st of this.streams) {
        st.frame.timestamp = ts;
        st.frame.payload = payload;
        st.norm.onFrame(st.frame);
      }
      await new Promise<void>((r) => setImmediate(r));
    }
    // the last batch's answers
    await new Promise<void>((r) => setImmediate(r));
  }

  stop(): void {
    for (const st of this.streams) {
      st.instance?.stop();
      st.flv?.close?.();
    }
  }
}
