import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import type { MediaBus, MediaSink, MediaStream, MediaStreamStats, Publisher, SubscribeOptions, Subscription } from '../../plugin-sdk/bus';
import { Subscriber } from './subscriber';

export interface BusLimits {
  maxGopBytes: number;
  maxQueueBytes: number;
  maxStreamBytes: number;
}

/** Audio-only terminals exist: after this much audio with no video track the stream counts as ready. */
const AUDIO_ONLY_READY_MS = 3000;

class PublisherHandle implements Publisher {
  active = true;
  offset: number | undefined;
  private closeCbs: Array<() => void> = [];
  constructor(private readonly stream: BusStream) {}
  get closed(): boolean {
    return !this.active || this.stream.closed;
  }
  setTrack(info: TrackInfo): void {
    if (this.active) this.stream.setTrack(info);
  }
  push(unit: AccessUnit): void {
    if (this.active) this.stream.push(this, unit);
  }
  pause(): void {
    /* subscribers stay attached; the next publisher continues the timeline */
  }
  onClose(cb: () => void): void {
    this.closeCbs.push(cb);
  }
  fireClose(): void {
    this.active = false;
    const cbs = this.closeCbs;
    this.closeCbs = [];
    for (const cb of cbs) cb();
  }
}

export class BusStream implements MediaStream {
  private trackMap = new Map<'video' | 'audio', TrackInfo>();
  private trackList: TrackInfo[] = [];
  private gop: AccessUnit[] = [];
  private gopBytes = 0;
  private gopValid = false;
  private subs = new Set<Subscriber>();
  private publisher: PublisherHandle | undefined;
  private readyFlag = false;
  private readyCbs: Array<() => void> = [];
  private closedFlag = false;
  private lastDts = -Infinity;
  private firstAudioDts: number | undefined;
  private queued = 0;
  /** sessions say whether requests want video; decides what "ready" waits for */
  expectVideo = true;
  private readonly st = { unitsIn: 0, bytesIn: 0, videoFrames: 0, audioFrames: 0, skips: 0 };

  constructor(readonly name: string, private readonly limits: BusLimits) {}

  get tracks(): ReadonlyArray<TrackInfo> {
    return this.trackList;
  }
  get ready(): boolean {
    return this.readyFlag;
  }
  get closed(): boolean {
    return this.closedFlag;
  }

  attachPublisher(): Publisher {
    if (this.closedFlag) throw new Error(`stream ${this.name} is closed`);
    if (this.publisher) this.publisher.active = false;
    this.publisher = new PublisherHandle(this);
    return this.publisher;
  }

  setTrack(info: TrackInfo): void {
    this.trackMap.set(info.kind, info);
    this.trackList = [...this.trackMap.values()];
    for (const s of this.subs) s.tracksChanged(this.trackList);
  }

  private hasVideo = (): boolean => this.trackMap.has('video') || this.expectVideo;

  push(pub: PublisherHandle, au: AccessUnit): void {
    if (this.closedFlag) return;
    // A new publisher (terminal reconnect) continues the old timeline so players see no jump backwards.
    if (pub.offset === undefined) pub.offset = this.lastDts === -Infinity ? 0 : this.lastDts + 20 - au.dts;
    if (pub.offset !== 0) {
      au.dts += pub.offset;
      au.pts += pub.offset;
    }
    if (au.dts > this.lastDts) this.lastDts = au.dts;
    this.st.unitsIn++;
    this.st.bytesIn += au.payload.length;
    if (au.kind === 'video') {
      this.st.videoFrames++;
      if (au.keyframe) {
        this.gop = [];
        this.gopBytes = 0;
        this.gopValid = true;
        if (!this.readyFlag) this.markReady();
      }
    } else {
      this.st.audioFrames++;
      if (!this.readyFlag) {
        if (this.firstAudioDts === undefined) this.firstAudioDts = au.dts;
        if (!this.trackMap.has('video') && (!this.expectVideo || au.dts - this.firstAudioDts >= AUDIO_ONLY_READY_MS)) {
          this.expectVideo = false;
          this.markReady();
        }
      }
    }
    if (this.gopValid) {
      this.gop.push(au);
      this.gopBytes += au.payload.length;
      if (this.gopBytes > this.limits.maxGopBytes) {
        this.gop = [];
        this.gopBytes = 0;
        this.gopValid = false;
      }
    }
    for (const s of this.subs) this.queued += s.offer(au);
    if (this.queued + this.gopBytes > this.limits.maxStreamBytes) {
      // the running total misses what sinks drained since; recount before shedding anyone
      this.recount();
      if (this.queued + this.gopBytes > this.limits.maxStreamBytes) this.shedLargestQueue();
    }
  }

  private shedLargestQueue(): void {
    let worst: Subscriber | undefined;
    for (const s of this.subs) if (!worst || s.queuedBytes > worst.queuedBytes) worst = s;
    if (worst && worst.queuedBytes > 0) {
      this.queued -= worst.skip();
      this.st.skips++;
    }
    this.recount();
  }

  private recount(): void {
    let q = 0;
    for (const s of this.subs) q += s.queuedBytes;
    this.queued = q;
  }

  private markReady(): void {
    this.readyFlag = true;
    const cbs = this.readyCbs;
    this.readyCbs = [];
    for (const cb of cbs) cb();
  }

  onReady(cb: () => void): void {
    if (this.readyFlag) cb();
    else this.readyCbs.push(cb);
  }

  subscribe(sink: MediaSink, opts?: SubscribeOptions): Subscription {
    if (this.closedFlag) throw new Error(`stream ${this.name} is closed`);
    const sub = new Subscriber(sink, opts?.maxQueueBytes ?? this.limits.maxQueueBytes, this.hasVideo, (s) => {
      this.subs.delete(s);
      this.recount();
    });
    this.subs.add(sub);
    if (this.trackList.length) sink.tracks?.(this.trackList);
    if (opts?.fromKeyframe !== false && this.gopValid) {
      for (const au of this.gop) this.queued += sub.offer(au);
    }
    return sub;
  }

  stats(): MediaStreamStats {
    this.recount();
    return { ...this.st, subscribers: this.subs.size, gopBytes: this.gopBytes, queuedBytes: this.queued };
  }

  close(reason: string): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.publisher?.fireClose();
    for (const s of [...this.subs]) s.end(reason);
    this.subs.clear();
    this.gop = [];
    this.gopBytes = 0;
    this.queued = 0;
    this.readyCbs = [];
  }
}

export class CoreMediaBus implements MediaBus {
  private streams = new Map<string, BusStream>();
  private cbs: Array<(s: MediaStream) => void> = [];
  constructor(private readonly limits: BusLimits) {}

  get(name: string): BusStream | undefined {
    return this.streams.get(name);
  }
  onStream(cb: (s: MediaStream) => void): void {
    this.cbs.push(cb);
  }
  create(name: string): BusStream {
    const s = new BusStream(name, this.limits);
    this.streams.set(name, s);
    for (const cb of this.cbs) cb(s);
    return s;
  }
  remove(name: string, reason: string): void {
    const s = this.streams.get(name);
    if (!s) return;
    this.streams.delete(name);
    s.close(reason);
  }
  get size(): number {
    return this.streams.size;
  }
}
