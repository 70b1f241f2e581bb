/**
 * What a segmenter holds and its players read: the live window of complete segments, the segment being made, the
 * lookups of segments and parts (RFC 8216bis blocking reload included), the bytes held and the eviction that keeps
 * them within maxStreamBytes, and the change listeners. The Segmenter (segmenter.ts) extends it with the cutting.
 */
import { round3 } from './cut-rules';
import type { HlsPart, HlsSegment, SegmenterOptions } from './hls-types';

/**
 * complete segments kept beyond the listed window, for a player still fetching the one that just left it (players
 * at the live edge fetch near its end; one that read the playlist just before it moved asks for its first at most)
 */
const EXTRA_KEPT = 1;

export abstract class LiveWindow {
  /** complete segments, oldest first */
  readonly segments: HlsSegment[] = [];
  current: HlsSegment | undefined;
  /** discontinuities of segments gone from memory (EXT-X-DISCONTINUITY-SEQUENCE counts from these) */
  discontinuitiesGone = 0;
  /** bytes of media held: complete segments, the one being made, the units waiting for their part */
  bytes = 0;
  /** longest segment and part so far, s (the playlist's target durations cover them) */
  maxSegmentSec = 0;
  maxPartSec = 0;
  private listeners = new Set<() => void>();
  private shown = 0;

  constructor(protected readonly o: SegmenterOptions) {}

  /** called after every new part or segment, and at the end */
  onChange(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /**
   * Moves whenever what a playlist shows may have changed, including the moves no listener hears of (eviction for
   * memory, a segment begun or ended before its first part, with a new configuration or not): prepared playlists
   * are kept while it stays.
   */
  get version(): number {
    return this.shown;
  }

  get targetDuration(): number {
    // fixed: segments are cut at it (pastTarget), GOP or not
    return Math.ceil(this.o.targetDurationSec);
  }

  get partTarget(): number {
    return Math.max(this.o.partTargetSec, round3(this.maxPartSec));
  }

  /**
   * Where the listed window starts in `segments`: the newest segments that last windowSec (three target durations
   * by default, RFC 8216 6.2.2's least: an older one may leave only when the rest still last that long), at most
   * windowSegments of them. The window costs what the playlist lists, plus EXTRA_KEPT.
   */
  get listedFrom(): number {
    const least = this.o.windowSec > 0 ? this.o.windowSec : 3 * this.targetDuration;
    const n = this.segments.length;
    let sum = 0;
    let from = n;
    while (from > 0 && n - from < this.o.windowSegments && sum < least) sum += this.segments[--from].duration;
    return from;
  }

  segment(msn: number): HlsSegment | undefined {
    const first = this.segments[0];
    if (!first) return undefined;
    return this.segments[msn - first.msn];
  }

  part(msn: number, index: number): HlsPart | undefined {
    const seg = this.current?.msn === msn ? this.current : this.segment(msn);
    return seg?.parts[index];
  }

  /**
   * A playlist can be served: a complete segment exists. (Parts alone are not enough: hls.js takes a playlist
   * without a segment for an empty one, levelEmptyError, and ffmpeg would wait on it.)
   */
  get hasMedia(): boolean {
    return this.segments.length > 0;
  }

  /** the last msn made or being made (-1 before any) */
  get lastMsn(): number {
    return this.current?.msn ?? (this.segments.length ? this.segments[this.segments.length - 1].msn : -1);
  }

  /**
   * RFC 8216bis blocking reload: the playlist holds segment msn complete (part undefined), or part `part` of it
   * (a part index past a complete segment's last means the next segment's first part).
   */
  has(msn: number, part: number | undefined): boolean {
    const lastComplete = this.segments.length ? this.segments[this.segments.length - 1].msn : -1;
    if (part === undefined) return lastComplete >= msn;
    if (lastComplete >= msn) {
      const seg = this.segment(msn);
      if (seg && part < seg.parts.length) return true;
      return this.has(msn + 1, 0);
    }
    const cur = this.current;
    if (cur && cur.msn === msn) return cur.parts.length > part;
    return !!cur && cur.msn > msn;
  }

  protected evict(): void {
    const keep = this.segments.length - this.listedFrom + EXTRA_KEPT;
    // (the segment being made holds at most half of maxStreamBytes, so the complete ones can always make room)
    while (this.segments.length > keep || (this.bytes > this.o.maxStreamBytes && this.segments.length > 0)) {
      const forMemory = this.segments.length <= keep;
      const gone = this.segments.shift()!;
      this.touched();
      this.bytes -= gone.bytes;
      if (forMemory) this.o.stats.memoryDrops();
      if (gone.discontinuity) this.discontinuitiesGone++;
    }
  }

  protected touched(): void {
    this.shown++;
  }

  protected changed(): void {
    this.touched();
    for (const cb of [...this.listeners]) cb();
  }
}
