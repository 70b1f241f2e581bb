import type { Off } from '../../plugin-sdk/bus';
import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import type { Entry } from './entry';

/** A stream as pass-through sees it, on either side (the part of BusStream it uses). */
export interface PassTarget {
  readonly name: string;
  readonly passage: PassThrough;
  setTrack(info: TrackInfo): void;
  /** a unit of the input, on the input's timeline, numbered `src` there */
  accept(au: AccessUnit, src: number): void;
  /** whether nothing of it can read the input's units numbered up to `lastSrc` any more */
  doneWith(lastSrc: number): boolean;
  on(event: 'closed', cb: (reason: string) => void): Off;
  wallClock(dtsMs: number): number | undefined;
}

/**
 * A stream's side of stage pass-through (StageDefinition.passes): the stages' streams it hands units and tracks of
 * some kinds to itself, the same objects in the same order, and, on a stage's stream, the input that feeds it.
 * Why: a unit republished by a stage costs a reader's queue, a call and a second push, and the input could no longer
 * see who holds its payloads; a passed unit keeps its input's number (Entry.src), so its memory stays reusable.
 */
export class PassThrough {
  /** stages' streams this stream hands units to */
  private readonly to: PassTarget[] = [];
  /** of a stage's stream: the input that hands it units, and which kinds */
  from: { stream: PassTarget; video: boolean; audio: boolean } | undefined;
  /** of a stage's stream: Entry.src of the last unit passed in (-1: none yet); the stage's own units get it */
  lastSrc = -1;
  /** of a stage's stream: which passed units go on (StageInstance.keep); undefined: all */
  keep: ((unit: AccessUnit) => boolean) | undefined;

  /** whether this stream is passed this unit of its input: its kind, then the stage's keep */
  private wants(au: AccessUnit): boolean {
    if (!this.takes(au.kind)) return false;
    const keep = this.keep;
    if (keep === undefined) return true;
    try {
      return keep(au);
    } catch {
      // the publisher's path must not see a stage's throw: the unit is dropped for this stage only
      return false;
    }
  }

  /** whether this stream is passed its input's units of this kind */
  takes(kind: 'video' | 'audio'): boolean {
    const p = this.from;
    return p !== undefined && (kind === 'video' ? p.video : p.audio);
  }

  /**
   * `d` gets `self`'s units and tracks of `kinds`: the current tracks and what the GOP cache holds now (`tracks`,
   * `cached`), then each as it comes, until `d` closes.
   */
  link(self: PassTarget, d: PassTarget, kinds: ReadonlyArray<'video' | 'audio'>, tracks: ReadonlyArray<TrackInfo>, cached: readonly Entry[]): void {
    if (d.passage.from) throw new Error(`stream ${d.name} has a source already`);
    d.passage.from = { stream: self, video: kinds.includes('video'), audio: kinds.includes('audio') };
    this.to.push(d);
    for (const t of tracks) if (d.passage.takes(t.kind)) d.setTrack(t);
    for (const e of cached) if (d.passage.wants(e.unit)) d.accept(e.unit, e.src);
    d.on('closed', () => {
      const i = this.to.indexOf(d);
      if (i >= 0) this.to.splice(i, 1);
    });
  }

  /** a track of this stream changed */
  track(info: TrackInfo): void {
    for (const d of this.to) if (d.passage.takes(info.kind)) d.setTrack(info);
  }

  /** a unit of this stream, numbered `src` on the stream whose memory holds its payload */
  unit(au: AccessUnit, src: number): void {
    const to = this.to;
    for (let i = 0; i < to.length; i++) {
      const d = to[i];
      if (d.passage.wants(au)) d.accept(au, src);
    }
  }

  /** whether no stage's stream this one passes to can still read a unit numbered up to `lastSrc` */
  doneWith(lastSrc: number): boolean {
    for (const d of this.to) if (!d.doneWith(lastSrc)) return false;
    return true;
  }
}
