import type {
  MediaSink, MediaStream, MediaStreamStats, Off, OwnedStream, Publisher, StreamEvent, SubscribeOptions, Subscription,
} from '../../plugin-sdk/bus';
import { shiftUnit, type AccessUnit, type TrackInfo } from '../../plugin-sdk/media';
import type { Entry } from './entry';
import { StreamFormats } from './formats';
import { GopCache } from './gop-cache';
import { PayloadArena } from './payload-arena';
import { BufferSlab, FRAME_SLAB_BYTES } from '../../plugin-sdk/buffer-slab';
import { PublisherHandle } from './publisher-handle';
import type { StreamDeps } from './stream-deps';
import { StreamEvents } from './stream-events';
import { Reader } from './subscriber';

/** Audio-only terminals exist: after this much audio with no video track the stream counts as ready. */
const AUDIO_ONLY_READY_MS = 3000;
/** a new publisher's first unit lands this far after the previous one's last, so the timeline never goes back */
const RECONNECT_STEP_MS = 20;

/**
 * One stream of the bus: tracks, the publisher, the GOP cache, the formats in use and the readers. Units go in by
 * `push`, are framed once per format, cached from the latest keyframe and offered to every reader's own queue.
 */
export class BusStream implements OwnedStream {
  private trackMap = new Map<'video' | 'audio', TrackInfo>();
  private trackList: ReadonlyArray<TrackInfo> = [];
  /** from the latest keyframe; empty while its GOP is over maxGopBytes */
  private readonly gop = new GopCache();
  private gopValid = false;
  private readers = new Set<Reader>();
  private publisher: PublisherHandle | undefined;
  private epochCount = 0;
  private readyFlag = false;
  private closedFlag = false;
  private lastDts = -Infinity;
  private firstAudioDts: number | undefined;
  private queued = 0;
  private anchor: { wall: number; dts: number } | undefined;
  private readonly formats: StreamFormats;
  private readonly events: StreamEvents;
  /** sessions say whether requests want video; decides what "ready" waits for */
  expectVideo = true;
  /** the last reader left (derived streams stop their stage then) */
  onIdle: (() => void) | undefined;
  private readonly st = { unitsIn: 0, bytesIn: 0, videoFrames: 0, audioFrames: 0, skips: 0, droppedReaders: 0 };
  /** units pushed so far: the next one's number */
  private seq = 0;
  /** payload memory for Publisher.alloc, made at the first call */
  private arena: PayloadArena | undefined;
  /** Publisher.alloc's memory when nothing is reused (gateway.reusePayloads false, or a keeper attached) */
  private slab: BufferSlab | undefined;
  /** readers whose sinks cannot say when they are done with a payload (here or on a stream this one passes to) */
  private keepers = 0;
  /** derived streams this one hands units to itself (StageDefinition.passes) */
  private passTo: BusStream[] = [];
  /** of a derived stream: the input that hands it units, and which kinds */
  private passFrom: { stream: BusStream; video: boolean; audio: boolean } | undefined;
  /** Entry.src of the last unit passed in (-1: none yet); a stage's own units get it */
  private passedSrc = -1;

  constructor(
    readonly name: string,
    readonly owner: string,
    private readonly deps: StreamDeps,
    private readonly whenClosed: (s: BusStream) => void,
    readonly derivedFrom?: { stream: string; stage: string; params: Readonly<Record<string, unknown>> },
  ) {
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
    return this.readers.size;
  }

  wallClock(dtsMs: number): number | undefined {
    // a stream fed by its input shares its timeline
    if (this.passFrom) return this.passFrom.stream.wallClock(dtsMs);
    return this.anchor ? this.anchor.wall + (dtsMs - this.anchor.dts) : undefined;
  }

  anchorWallClock(epochMs: number, dtsMs: number): void {
    this.anchor = { wall: epochMs, dts: dtsMs };
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
    for (const r of this.readers) r.tracksChanged(list);
    this.emit('tracks', list);
    for (const d of this.passTo) if (d.takes(info.kind)) d.setTrack(info);
  }

  /**
   * `d` (a stream derived from this one) gets this stream's units and tracks of `kinds`: what of them the GOP cache
   * holds now, then each as it comes. Until it closes, payload memory counts it as a holder of what it got.
   * (The bus links a stage's stream once the stage started: the tracks the stage made of the input's are there
   * first, so a reader joining now finds them when its start point is framed; an FLV file header says once which
   * tracks come.)
   */
  passInto(d: BusStream, kinds: ReadonlyArray<'video' | 'audio'>): void {
    if (d.passFrom) throw new Error(`stream ${d.name} has a source already`);
    d.passFrom = { stream: this, video: kinds.includes('video'), audio: kinds.includes('audio') };
    this.passTo.push(d);
    for (const t of this.trackList) if (d.takes(t.kind)) d.setTrack(t);
    for (const e of this.gop.entryList()) if (d.takes(e.unit.kind)) d.accept(e.unit, e.src);
    d.on('closed', () => {
      const i = this.passTo.indexOf(d);
      if (i >= 0) this.passTo.splice(i, 1);
    });
  }

  /** whether this stream is passed its input's units of this kind */
  private takes(kind: 'video' | 'audio'): boolean {
    const p = this.passFrom;
    return p !== undefined && (kind === 'video' ? p.video : p.audio);
  }

  private hasVideo = (): boolean => this.trackMap.has('video') || this.expectVideo;

  push(pub: PublisherHandle, unit: AccessUnit): void {
    if (this.closedFlag) return;
    // A new publisher (terminal reconnect) continues the old timeline so readers see no jump backwards; the
    // shifted unit is a copy, since units are shared. A stage's stream is on its input's timeline, as the units
    // passed to it are: its one publisher is never shifted.
    if (pub.offset === undefined) {
      pub.offset = this.lastDts === -Infinity || this.passFrom ? 0 : Math.round(this.lastDts + RECONNECT_STEP_MS - unit.dts);
      const w = pub.wallPending;
      if (w) this.anchorWallClock(w.epochMs, w.dtsMs + pub.offset);
      else this.anchorWallClock(this.deps.now(), unit.dts + pub.offset);
      pub.wallPending = undefined;
    }
    const au = pub.offset !== 0 ? shiftUnit(unit, pub.offset) : unit;
    if (this.passFrom) this.accept(au, this.passedSrc);
    else {
      const seq = this.seq;
      const arena = this.arena;
      arena?.pushed(au.payload, seq);
      this.accept(au, seq);
      if (arena !== undefined && au.keyframe && au.kind === 'video') arena.settle();
    }
  }

  /** A unit on this stream's timeline: framed, cached, offered to every reader and passed on. */
  private accept(au: AccessUnit, src: number): void {
    if (this.closedFlag) return;
    if (au.dts > this.lastDts) this.lastDts = au.dts;
    const st = this.st;
    st.unitsIn++;
    st.bytesIn += au.payload.length;
    const seq = this.seq++;
    if (this.passFrom && src > this.passedSrc) this.passedSrc = src;
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
    for (const r of this.readers) this.queued += r.offer(entry);
    if (this.queued + this.gop.payloadBytes > this.deps.limits.maxStreamBytes) {
      // the running total misses what sinks drained since; recount before shedding anyone
      this.recount();
      if (this.queued + this.gop.payloadBytes > this.deps.limits.maxStreamBytes) this.shedLargestQueue();
    }
    const pass = this.passTo;
    for (let i = 0; i < pass.length; i++) {
      const d = pass[i];
      if (d.takes(au.kind)) d.accept(au, src);
    }
  }

  /** Publisher.alloc: memory for a payload, reused once every holder is done with it (see payload-arena.ts). */
  alloc(bytes: number): Buffer {
    if (this.closedFlag) return Buffer.allocUnsafe(bytes);
    // small chunks the collector frees: a chunk pins its memory as long as any slice of it lives. A stage's
    // stream numbers its units on its input's count (Entry.src), which its own chunks cannot be measured by.
    if (this.deps.limits.reusePayloads === false || this.keepers > 0 || this.passFrom) return (this.slab ??= new BufferSlab(FRAME_SLAB_BYTES)).take(bytes);
    this.arena ??= new PayloadArena((lastSeq) => this.doneWith(lastSeq), this.deps.chunks);
    return this.arena.alloc(bytes);
  }

  /** Publisher.discard: memory from alloc that no unit will carry. */
  discard(payload: Buffer): void {
    this.arena?.discard(payload);
  }

  private dropArena(escaped = true): void {
    this.arena?.forgetAll(escaped);
    this.arena = undefined;
  }

  /** payloads may be read where no one can tell when: nothing of the arena (here, or the input's) is reused */
  private escaped(): void {
    this.dropArena();
    this.passFrom?.stream.escaped();
  }

  /** a reader that cannot say when it is done joined (+1) or left (-1), here or on a stream this one passes to */
  private keeperChange(delta: 1 | -1): void {
    // a closed stream gave back all it counted when it closed
    if (this.closedFlag) return;
    this.keepers += delta;
    // it may keep what it gets for as long as it likes: the arena goes (nothing of it is ever reused; its chunks
    // are freed by the collector once their units are gone) and a new one starts when no such reader is left
    if (delta > 0) this.dropArena();
    this.passFrom?.stream.keeperChange(delta);
  }

  /**
   * Whether nothing can read the units numbered up to `lastSrc` (Entry.src) any more: not the GOP cache, not any
   * reader, not any stream this one passed them to.
   */
  private doneWith(lastSrc: number): boolean {
    const first = this.gop.firstSrc;
    if (first !== undefined && first <= lastSrc) return false;
    for (const r of this.readers) if (!r.doneWith(lastSrc)) return false;
    for (const d of this.passTo) if (!d.doneWith(lastSrc)) return false;
    return true;
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

  private shedLargestQueue(): void {
    let worst: Reader | undefined;
    for (const r of this.readers) if (!worst || r.queuedBytes > worst.queuedBytes) worst = r;
    if (worst && worst.queuedBytes > 0) {
      this.queued -= worst.skip();
      this.st.skips++;
    }
    this.recount();
  }

  private recount(): void {
    let q = 0;
    for (const r of this.readers) q += r.queuedBytes;
    this.queued = q;
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

  subscribe<F = undefined>(sink: MediaSink<F>, opts: SubscribeOptions<F> = {}): Subscription {
    if (this.closedFlag) throw new Error(`stream ${this.name} is closed`);
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
    const reader: Reader<F> = new Reader<F>(sink, {
      media: opts.media ?? 'av',
      slot,
      maxQueueBytes: opts.maxQueueBytes ?? limits.maxQueueBytes,
      dropAfterMs: opts.dropAfterMs ?? limits.readerDropAfterMs,
      needKey: this.hasVideo,
      now: this.deps.now,
      onFault: (r, reason) => {
        this.st.droppedReaders++;
        this.deps.log.info({ stream: this.name, reason, skips: r.stats.skips, units: r.stats.units }, 'reader ended');
      },
      onClose: (r) => this.removeReader(r),
    });
    this.readers.add(reader as Reader);
    if (!reader.tellsWhenDone) this.keeperChange(1);
    reader.join(this.trackList, gop);
    this.queued += reader.queuedBytes;
    // nothing reaches the sink before subscribe() returns
    queueMicrotask(() => reader.start());
    return reader;
  }

  private removeReader(r: Reader): void {
    if (!this.readers.delete(r)) return;
    if (!r.tellsWhenDone) this.keeperChange(-1);
    // gone with bytes still on their way out (its socket's buffer): nothing it may have had is ever reused
    else if (r.holdsPayloads()) this.escaped();
    if (r.slot >= 0) this.formats.release(r.slot, this.gop);
    this.recount();
    if (this.readers.size === 0 && this.onIdle) this.onIdle();
  }

  /** payload bytes this stream keeps alive: its GOP cache and its readers' queues (shared units counted once per holder) */
  heldBytes(): { gop: number; queued: number } {
    this.recount();
    return { gop: this.gop.payloadBytes, queued: this.queued };
  }

  stats(): MediaStreamStats {
    this.recount();
    return {
      ...this.st, subscribers: this.readers.size, gopBytes: this.gop.payloadBytes, queuedBytes: this.queued, formats: this.formats.readersOf(),
    };
  }

  close(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.publisher?.fireClose();
    const readers = [...this.readers];
    const src = this.passFrom?.stream;
    if (src) {
      // its readers may still hold what was passed (a socket's buffer): the input reuses nothing of it
      if (readers.length > 0) src.escaped();
      for (; this.keepers > 0; this.keepers--) src.keeperChange(-1);
    }
    this.readers.clear();
    for (const r of readers) r.end(reason);
    this.formats.closeAll();
    // sockets may still hold its units' bytes: the collector frees its chunks once they are gone
    this.dropArena(false);
    this.gop.clear();
    this.gop.dropEntries();
    this.queued = 0;
    this.events.clear('ready', 'tracks', 'publisher');
    this.emit('closed', reason);
    this.events.clear('closed');
    this.whenClosed(this);
  }
}

export type { MediaStream };
