/**
 * The 'aac' stage: a stream's audio as AAC-LC for browsers, video passed through by reference.
 *
 * Per (stream, sampleRate, channels, keep) the bus runs one instance; it hands each audio frame to the worker
 * thread, where a pipeline decodes, resamples and encodes it (transcode-worker.ts). AAC from the source, and codecs
 * the reader asked to keep, pass through unchanged; audio nobody here can decode is left out (video goes on),
 * counted and logged once per stream and codec.
 */
import type { Logger } from 'pino';
import { AAC_STAGE } from '../../../plugin-sdk';
import type { StageDefinition } from '../../../plugin-sdk';
import { createDecoder, type AdpcmOptions } from '../../../plugin-sdk/codecs';
import { unitAt, type AccessUnit, type AudioCodec, type AudioTrackInfo } from '../../../plugin-sdk';
import { audioStage } from '../../../plugin-sdk';
import { AAC_SAMPLE_RATES, aacLcAsc } from './engine/pool';
import { FrameLane, type GroupAnswer, type LaneWorker } from './frame-lane';
import { HeldFrames } from './held-frames';
import { UNKNOWN_JOB } from './transcode-protocol';

export interface AacStageOptions {
  /** the transcode worker (a StageWorker of transcode-worker.ts) */
  worker: LaneWorker;
  defaults: { sampleRate: number; channels: 1 | 2 };
  /** bits per second for all channels of an output */
  bitrate(sampleRate: number, channels: number): number;
  maxGapMs: number;
  maxInFlight: number;
  /** how long frames wait to cross to the worker together (FrameLane) */
  frameBatchMs?: number;
  adpcm?: AdpcmOptions;
  log: Logger;
  hooks: {
    /** a running transcode started (+1) or ended (-1) */
    transcoders(delta: 1 | -1): void;
    framesOut(n: number): void;
    /** audio of a codec no one here decodes: left out */
    leftOut(stream: string, codec: string): void;
    /** a worker call failed (not counting the reopen after a worker restart) */
    failed(): void;
  };
}

export interface AacParams {
  sampleRate: number;
  channels: 1 | 2;
  keep: AudioCodec[];
}

/** A reader's params completed with the site's defaults; what the spec allows and AAC can carry. */
export function aacParams(given: Readonly<Record<string, unknown>>, defaults: AacStageOptions['defaults']): AacParams {
  const sampleRate = given.sampleRate ?? defaults.sampleRate;
  if (typeof sampleRate !== 'number' || !AAC_SAMPLE_RATES.includes(sampleRate)) {
    throw new TypeError(`aac: sampleRate must be one of ${AAC_SAMPLE_RATES.join(', ')}`);
  }
  const ch = given.channels ?? defaults.channels;
  if (typeof ch !== 'number' || !Number.isInteger(ch) || ch < 1 || ch > 8) throw new TypeError('aac: channels must be 1..8');
  const keep = given.keep ?? [];
  if (!Array.isArray(keep) || !keep.every((k) => typeof k === 'string')) throw new TypeError('aac: keep must be a list of codec names');
  // the source is mono: more than two channels would be copies of it; two are what players need at most
  return { sampleRate, channels: ch >= 2 ? 2 : 1, keep: [...new Set(keep as AudioCodec[])].sort() };
}

let jobSeq = 0;

/**
 * What a call that makes nothing returns: one array for all of them (a held frame is five calls in six). Not frozen:
 * iterating a frozen array takes V8's slow path, an object per step (measured: test/bench/audio-path.ts's allocations).
 */
const NONE: readonly AccessUnit[] = [];

export function aacStage(o: AacStageOptions): StageDefinition {
  const lane = new FrameLane(o.worker, o.frameBatchMs ?? 0);
  return audioStage({
    name: AAC_STAGE,
    maxInFlight: o.maxInFlight,
    params: (given) => aacParams(given, o.defaults) as unknown as Record<string, unknown>,
    create(ctx) {
      const p = ctx.params as unknown as AacParams;
      const stream = ctx.input.name;
      let mode: 'none' | 'pass' | 'encode' = 'none';
      let job = 0;
      let input: AudioTrackInfo | undefined;
      const bitrate = o.bitrate(p.sampleRate, p.channels);

      /** the job whose open is in flight: a worker restart fails every push in flight, and one open is enough */
      let opening = 0;
      const open = (): void => {
        const j = job;
        if (opening === j) return;
        opening = j;
        lane
          .control({
            op: 'open',
            job: j,
            input: input!,
            sampleRate: p.sampleRate,
            channels: p.channels,
            bitrate,
            maxGapMs: o.maxGapMs,
            adpcm: o.adpcm,
          })
          .then(
            () => {
              if (opening === j) opening = 0;
            },
            (err: Error) => {
              if (opening === j) opening = 0;
              if (j !== job) return;
              // the worker died with the open in flight and has been restarted: open again, or this stream would stay
              // mute for the rest of its life over a moment's trouble (a worker that gave up rejects at once: no loop)
              if (err.message.includes('died') && !err.message.includes('gave up')) {
                open();
                return;
              }
              o.hooks.failed();
              ctx.log.warn({ err: err.message, codec: input?.codec }, 'AAC transcode could not start: audio left out');
              endJob();
              mode = 'none';
            },
          );
      };
      const endJob = (): void => {
        if (job === 0) return;
        const j = job;
        job = 0;
        o.hooks.transcoders(-1);
        lane.control({ op: 'close', job: j }).catch(() => undefined);
      };

      /** frames kept on this thread until one completes an AAC frame (see HeldFrames) */
      const held = new HeldFrames(p.sampleRate);

      /**
       * A group's part of the worker's answer as this stage's units: made straight from the reply (each payload a view
       * of its one buffer, which nothing reuses: it came from the worker and is the units' own), with no objects in
       * between. One per instance: what differs per group is on its ticket.
       */
      const answer: GroupAnswer<readonly AccessUnit[], AccessUnit> = {
        made(g, r, first, count, at, due) {
          // the worker's word on where the next AAC frame completes
          if (g.job === job) held.due(due, g.last.timescale, g.tag);
          if (count === 0) return NONE;
          o.hooks.framesOut(count);
          const bytes = r.bytes;
          const out: AccessUnit[] = [];
          for (let k = first; k < first + count; k++) {
            const len = r.frameLengths[k];
            out.push(
              unitAt({
                kind: 'audio',
                codec: 'aac',
                timescale: p.sampleRate,
                dtsTicks: r.frameDts[k],
                duration: 1024,
                payload: Buffer.from(bytes.buffer, bytes.byteOffset + at, len),
                keyframe: true,
                receivedAt: g.last.receivedAt,
              }),
            );
            at += len;
          }
          return out;
        },
        failed(g, err) {
          const j = g.job;
          if (j === job) held.forget();
          // the worker was restarted and forgot this job: open it again; these frames are lost
          if (j === job && (err.message === UNKNOWN_JOB || err.message.includes('died'))) open();
          else o.hooks.failed();
          return NONE;
        },
      };

      return {
        track(t) {
          endJob();
          held.clear();
          input = t;
          if (t.codec === 'aac' || p.keep.includes(t.codec)) {
            mode = 'pass';
            return t;
          }
          if (!createDecoder(t, { adpcm: o.adpcm })) {
            mode = 'none';
            o.hooks.leftOut(stream, t.codec);
            return undefined;
          }
          mode = 'encode';
          job = ++jobSeq;
          o.hooks.transcoders(1);
          open();
          return {
            kind: 'audio',
            codec: 'aac',
            sampleRate: p.sampleRate,
            channels: p.channels,
            config: aacLcAsc(p.sampleRate, p.channels),
            frameSamples: 1024,
          };
        },
        unit(u) {
          if (mode === 'pass') return [u];
          if (mode === 'none' || u.codec !== input?.codec) return NONE;
          if (held.add(u)) return NONE;
          const group = held.take(u);
          // the lane copies the group's frames into its batch at once: `u` is a view of the stream's payload memory,
          // and the held frames' room is reused by the next one held
          return lane.pushGroup(job, group, u, answer, held.epoch);
        },
        stop: () => {
          held.clear();
          endJob();
        },
        // held frames are copies and the lane copies what it sends: no view of the input is kept past a call
        holdsPayloads: () => false,
      };
    },
  });
}
