import type { MediaReader, MediaStream, MediaStreamStats, Off, OwnedStream, Publisher, StreamEvent, ReaderOptions, ReaderHandle } from '../../plugin-sdk/bus';
import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import { BYTE_TOTAL_START } from '../../plugin-sdk/hot-metrics';
import type { Entry } from './entry';
import { FanOut } from './fan-out';
import { StreamFormats } from './formats';
import { GopCache } from './gop-cache';
import { PassThrough, type PassTarget } from './pass-through';
import { PayloadReuse } from './payload-reuse';
import { PublisherHandle } from './publisher-handle';
import { Reader, answersHoldsPayloads } from './reader';
import type { StreamDeps } from './stream-deps';
import { StreamEvents } from './stream-events';
import { StreamTimeline } from './timeline';

/** Audio-only terminals exist: after this much audio with no video track the stream counts as ready. */
const AUDIO_ONLY_READY_MS = 3000;
/** ReaderOptions.reader: a label of /metrics, so a short name */
const READER_NAME = /^[^\n]{1,100}$/;

/**
 * One stream of the bus: its tracks, publisher, GOP cache and readiness, and the parts that do the rest: its
 * timeline (timeline.ts), its readers (fan-out.ts), its payload memory (payload-reuse.ts) and the stages' streams it
 * passes units to (pass-through.ts). Units go in by `push`, are framed once per format, cached from the latest
 * keyframe, offered to every reader's own queue and passed on.
 */
export class BusStream implements OwnedStream, PassTarget {
  private trackMap = new Map<'video' | 'audio', TrackInfo>();
  private trackList: ReadonlyArray<TrackInfo> = [];
  /** from the latest keyframe; empty while its GOP is over maxGopBytes */
  private readonly gop = new GopCache();
  private gopValid = false;
  private publisher: PublisherHandle | undefined;
  private epochCount = 0;
  private readyFlag = false;
  private closedFlag = false;
  private firstAudioDts: number | undefined;
  private readonly timeline: StreamTimeline;
  private readonly fanOut: FanOut;
  private readonly reuse: PayloadReuse;
  readonly passage = new PassThrough();
  private readonly formats: StreamFormats;
  private readonly events: StreamEvents;
  /** sessions say whether requests want video; decides what "ready" waits for */
  expectVideo = true;
  /** the last reader left (derived streams stop their stage then) */
  onIdle: (() => void) | undefined;
  private readonly st = { unitsIn: 0, bytesIn: BYTE_TOTAL_START, videoFrames: 0, audioFrames: 0, droppedReaders: 0 };
  /** units pushed so far: the next one's number */
  private seq = 0;

  constructor(
    readonly name: string,
    readonly owner: string,
    private readonly deps: StreamDeps,
    private readonly whenClosed: (s: BusStream) => void,
    readonly derivedFrom?: { stream: string; stage: string; params: Readonly<Record<string, unknown>> },
  ) {
    this.timeline = new StreamTimeline(deps.now);
    this.fanOut = new FanOut(deps.limits);
    this.reuse = new PayloadReuse(name, deps, (lastSrc) => this.doneWith(lastSrc));
    this.formats = new StreamFormats(this, deps.log);
    this.events = new StreamEvents(deps.log, name);
  }

  get tracks(): ReadonlyArray<TrackInfo> {
    return this.trackList;
  }
  get ready(): boolean {
    return this.readyFlag;
  }
  get closed(): boolean {
    return this.closedFlag;
  }
  get epoch(): number {
    return this.epochCount;
  }
  get readerCount(): number {
    return this.fanOut.size;
  }
  /** the reader keeping this stream's payload memory from being reused now, if any (see PayloadReuse.offBy) */
  get reuseOffBy(): string | undefined {
    return this.reuse.offBy;
  }

  wallClock(dtsMs: number): number | undefined {
    // a stream fed by its input shares its timeline
    const from = this.passage.from;
    return from ? from.stream.wallClock(dtsMs) : this.timeline.wallClock(dtsMs);
  }

  anchorWallClock(epochMs: number, dtsMs: number): void {
    this.timeline.anchorWallClock(epochMs, dtsMs);
  }

  attachPublisher(): Publisher {
    if (this.closedFlag) throw new Error(`stream ${this.name} is closed`);
    if (this.publisher) this.publisher.active = false;
    this.publisher = new PublisherHandle(this);
    this.epochCount++;
    this.emit('publisher');
    return this.publisher;
  }

  setTrack(info: TrackInfo): void {
    if (this.closedFlag) return;
    this.trackMap.set(info.kind, info);
    // a new list at each change (never the same one changed), so readers may keep what they were given
    const list = [...this.trackMap.values()];
    // video first whatever came first (a stage's stream may get its audio track before the video it is passed)
    if (list.length > 1 && list[0].kind !== 'video') list.reverse();
    this.trackList = list;
    this.formats.tracks(list);
    this.fanOut.tracksChanged(list);
    this.emit('tracks', list);
    this.passage.track(info);
  }

  /**
   * `d` (a stream derived from this one) gets this stream's units and tracks of `kinds`: what of them the GOP cache
   * holds now, then each as it comes. Until it closes, payload memory counts it as a holder of what it got.
   * (The bus links a stage's stream once the stage started: the tracks the stage made of the input's are there
   * first, so a reader joining now finds them when its start point is framed; an FLV file header says once which
   * tracks come.)
   */
  passInto(d: BusStream, kinds: ReadonlyArray<'video' | 'audio'>): void {
    this.passage.link(this, d, kinds, this.trackList, this.gop.entryList());
    d.reuse.follow(this.reuse);
  }

  private hasVideo = (): boolean => this.trackMap.has('video') || this.expectVideo;

  push(pub: PublisherHandle, unit: AccessUnit): void {
    if (this.closedFlag) return;
    const passage = this.passage;
    const au = this.timeline.place(pub, unit, passage.from === undefined);
    if (passage.from !== undefined) this.accept(au, passage.lastSrc);
    else {
      const seq = this.seq;
      const arena = this.reuse.arena;
      arena?.pushed(au.payload, seq);
      this.accept(au, seq);
      if (arena !== undefined && au.keyframe && au.kind === 'video') arena.settle();
    }
  }

  /** A unit on this stream's timeline: framed, cached, offered to every reader and passed on. */
  accept(au: AccessUnit, src: number): void {
    if (this.closedFlag) return;
    this.timeline.reached(au.dts);
    const st = this.st;
    st.unitsIn++;
    st.bytesIn += au.payload.length;
    const seq = this.seq++;
    const passage = this.passage;
    if (passage.from !== undefined && src > passage.lastSrc) passage.lastSrc = src;
    const entry = this.formats.entryOf(au, seq, src);
    if (au.kind === 'video') {
      st.videoFrames++;
      if (au.keyframe) {
        this.gop.clear();
        this.gopValid = true;
        if (!this.readyFlag) this.markReady();
      }
    } else {
      st.audioFrames++;
      if (!this.readyFlag) this.audioReadiness(au);
    }
    if (this.gopValid) this.cache(entry);
    this.fanOut.offer(entry, this.gop.payloadBytes);
    passage.unit(au, src);
  }

  /** Publisher.alloc: memory for a payload, reused once every holder is done with it (see payload-reuse.ts). */
  alloc(bytes: number): Buffer {
    return this.reuse.alloc(bytes);
  }

  /** Publisher.discard: memory from alloc that no unit will carry. */
  discard(payload: Buffer): void {
    this.reuse.discard(payload);
  }

  /**
   * Whether nothing can read the units numbered up to `lastSrc` (Entry.src) any more: not the GOP cache, not any
   * reader, not any stream this one passed them to.
   */
  doneWith(lastSrc: number): boolean {
    const first = this.gop.firstSrc;
    if (first !== undefined && first <= lastSrc) return false;
    return this.fanOut.doneWith(lastSrc) && this.passage.doneWith(lastSrc);
  }

  private audioReadiness(au: AccessUnit): void {
    if (this.firstAudioDts === undefined) this.firstAudioDts = au.dts;
    if (!this.trackMap.has('video') && (!this.expectVideo || au.dts - this.firstAudioDts >= AUDIO_ONLY_READY_MS)) {
      this.expectVideo = false;
      this.markReady();
    }
  }

  /** The GOP cache, from the latest keyframe; a GOP over maxGopBytes is not cached (joiners wait for the next). */
  private cache(entry: Entry): void {
    this.gop.add(entry);
    if (this.gop.payloadBytes > this.deps.limits.maxGopBytes) {
      this.gop.clear();
      this.gopValid = false;
    }
  }

  private markReady(): void {
    this.readyFlag = true;
    this.emit('ready');
    this.events.clear('ready');
  }

  on(event: 'ready' | 'publisher', cb: () => void): Off;
  on(event: 'tracks', cb: (tracks: ReadonlyArray<TrackInfo>) => void): Off;
  on(event: 'closed', cb: (reason: string) => void): Off;
  on(event: StreamEvent, cb: (arg: never) => void): Off {
    return this.events.on(event, cb, this.readyFlag, this.closedFlag);
  }

  private emit(event: StreamEvent, arg?: unknown): void {
    this.events.emit(event, arg);
  }

  subscribe<F = undefined>(sink: MediaReader<F>, opts: ReaderOptions<F> = {}): ReaderHandle {
    if (this.closedFlag) throw new Error(`stream ${this.name} is closed`);
    if (opts.reader !== undefined && !(typeof opts.reader === 'string' && READER_NAME.test(opts.reader))) {
      this.deps.log.warn({ stream: this.name, reader: String(opts.reader).slice(0, 200) }, 'subscribe refused: bad reader name');
      throw new TypeError(`subscribe to ${this.name}: reader must be a name of 1-100 characters on one line`);
    }
    if (opts.via !== undefined) {
      const derived = this.deps.derive(this, opts.via);
      try {
        return derived.subscribe(sink, { ...opts, via: undefined });
      } catch (err) {
        if (derived.readerCount === 0) derived.close('no readers');
        throw err;
      }
    }
    const limits = this.deps.limits;
    let slot = -1;
    let gop: readonly Entry[] = [];
    const wantsGop = opts.fromKeyframe !== false;
    if (opts.format) ({ slot, entries: gop } = this.formats.join(opts.format as never, this.trackList, this.gop, wantsGop));
    else if (wantsGop) gop = this.gop.entryList();
    const keeper = !answersHoldsPayloads(sink);
    const reader: Reader<F> = new Reader<F>(sink, {
      // a reader that turns payload reuse off is always named: the log and /metrics say which one it was
      name: opts.reader ?? (keeper ? this.deps.nameReader() : undefined),
      media: opts.media ?? 'av',
      slot,
      maxQueueBytes: opts.maxQueueBytes ?? limits.maxQueueBytes,
      dropAfterMs: opts.dropAfterMs ?? limits.readerDropAfterMs,
      needKey: this.hasVideo,
      now: this.deps.now,
      onFault: (r, reason) => {
        this.st.droppedReaders++;
        this.deps.log.info({ stream: this.name, reader: r.name, reason, skips: r.stats.skips, units: r.stats.units }, 'reader ended');
      },
      onClose: (r) => this.removeReader(r),
    });
    if (keeper) this.reuse.keeperJoined(reader.name!);
    reader.join(this.trackList, gop);
    this.fanOut.add(reader as Reader);
    // nothing reaches the sink before subscribe() returns
    queueMicrotask(() => reader.start());
    return reader;
  }

  private removeReader(r: Reader): void {
    if (!this.fanOut.delete(r)) return;
    if (!r.tellsWhenDone) this.reuse.keeperLeft(r.name!);
    // gone with bytes still on their way out (its socket's buffer): nothing it may have had is ever reused
    else if (r.holdsPayloads()) this.reuse.escaped();
    if (r.slot >= 0) this.formats.release(r.slot, this.gop);
    if (this.fanOut.size === 0 && this.onIdle) this.onIdle();
  }

  /** payload bytes this stream keeps alive: its GOP cache and its readers' queues (shared units counted once per holder) */
  heldBytes(): { gop: number; queued: number } {
    return { gop: this.gop.payloadBytes, queued: this.fanOut.queuedBytes() };
  }

  stats(): MediaStreamStats {
    return {
      ...this.st,
      skips: this.fanOut.skips,
      subscribers: this.fanOut.size,
      gopBytes: this.gop.payloadBytes,
      queuedBytes: this.fanOut.queuedBytes(),
      formats: this.formats.readersOf(),
    };
  }

  close(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.publisher?.fireClose();
    const readers = this.fanOut.takeAll();
    // a stage's stream gives back what its readers counted on its input; its chunks are left to the collector
    this.reuse.close(readers.length > 0);
    for (const r of readers) r.end(reason);
    this.formats.closeAll();
    this.gop.clear();
    this.gop.dropEntries();
    this.events.clear('ready', 'tracks', 'publisher');
    this.emit('closed', reason);
    this.events.clear('closed');
    this.whenClosed(this);
  }
}

export type { MediaStream };
