/**
 * One stream's HLS form: a bus reader that cuts the stream into segments at keyframes (at start points of the
 * audio, for audio only) and each segment into parts, muxes them (fMP4 or MPEG-TS) and keeps a bounded live
 * window in memory. Every request of the same stream that wants the same form (tracks, audio form, container)
 * shares one; its players only read what it made.
 *
 * Cuts happen when a unit arrives (only then is the previous one's duration known): a part ends before the unit
 * that would take it past the part target, a segment before the start point at or past the target duration (or
 * earlier when the next GOP would take it more than half a second past it), or, in a GOP longer than the target,
 * before the frame that would take it past the target (EXT-X-TARGETDURATION never changes). Audio that goes with video is put
 * into the part being cut when its time is before the part's end; since the AAC stage's audio comes later than
 * the video (it runs in a worker), video waits for it (at most MAX_AUDIO_LAG_MS), so each part holds the audio up
 * to its end. Each track keeps its own decode times.
 *
 * Around it: hls-types.ts (segments, parts, init segments, options), live-window.ts (what players read, the bytes
 * held and their bound: the Segmenter extends it), cut-rules.ts (where cuts fall), track-config.ts (track
 * configurations and their init segment versions).
 */
import type { AccessUnit, MediaReader, TrackInfo } from '../../../plugin-sdk';
import { partDue, partLongEnough, pastTarget, round3, segmentDue } from './cut-rules';
import { fmp4Fragment } from './fmp4';
import type { HlsInit } from './hls-types';
import { LiveWindow } from './live-window';
import { SampleStore } from './sample-store';
import { audioSamplesOf, sampleFormOf, videoSamplesOf } from './samples';
import { activate, configOf, fragmentTracks, type Active, type Config } from './track-config';

export type { Container, HlsInit, HlsPart, HlsSegment, SegmenterOptions, SegmenterStats } from './hls-types';

/**
 * Video waits at most this long (stream time) for the audio of the same instant: the AAC stage delivers a frame
 * once it has 1024 samples and its worker has encoded them (about 200 ms after the video of the instant the
 * frame ends at, for 8 kHz G.711 in). Players that take audio and video from one fMP4 fragment (hls.js) buffer
 * only where both are, and take a part whose audio ends early for a part not yet loaded: they fetch it again and
 * again and stall.
 */
const MAX_AUDIO_LAG_MS = 1000;
/** no audio for this long (stream time): the terminal stopped sending it; video stops waiting until it comes back */
const AUDIO_GONE_MS = 3000;

export class Segmenter extends LiveWindow implements MediaReader {
  closed = false;
  private nextMsn = 0;
  private fragmentSeq = 1;
  private wanted: Config = { sig: '', video: undefined, audio: undefined };
  private active: Active | undefined;
  private initVersion = 0;
  private pendingReinit = false;
  /** next segment starts with EXT-X-DISCONTINUITY; until its start point, units are left out */
  private breakPending = false;
  private waitStart = true;
  // the part being made
  private driverUnits: AccessUnit[] = [];
  private audioQueue: AccessUnit[] = [];
  private partStartDts = 0;
  private lastDriverDts = 0;
  private lastStartPointDts = 0;
  private pendingBytes = 0;
  // the first segment's wait for the audio track
  private hold: AccessUnit[] | undefined;
  private held = false;
  // video waiting for the audio of its time (see MAX_AUDIO_LAG_MS)
  private videoDelay: AccessUnit[] = [];
  private delayBytes = 0;
  /** where the latest audio frame ends (stream ms): all audio before it has come */
  private audioEnd = -Infinity;
  /** the bytes of the units it keeps, in their samples' form (sample-store.ts) */
  private readonly store = new SampleStore();

  /** no video: every segment starts at a start point (any audio frame) */
  get audioOnly(): boolean {
    return !!this.active && !this.active.video;
  }

  /** the init segments still referenced (the active one and those of segments in memory), by version */
  initOf(version: number): HlsInit | undefined {
    if (this.active?.init.version === version) return this.active.init;
    if (this.current?.init.version === version) return this.current.init;
    return this.segments.find((s) => s.init.version === version)?.init;
  }

  // --- MediaReader ------------------------------------------------------------------------------------------------

  /** nothing the bus gave is kept past write() (it is copied into the store), so payload reuse stays on */
  holdsPayloads(): boolean {
    return false;
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    const w = configOf(list);
    if (w.sig === this.wanted.sig) return;
    this.wanted = w;
    if (this.active && this.active.sig !== w.sig) this.pendingReinit = true;
    if (this.hold && w.audio) this.release();
  }

  write(given: AccessUnit): void {
    if (this.closed) return;
    // the one copy: what is kept from here on is the store's, so the bus may reuse the given payload at once
    const unit = sampleFormOf(given, this.store);
    if (this.hold) {
      this.hold.push(unit);
      this.pendingBytes += unit.payload.length;
      const first = this.hold[0];
      const waitMs = this.o.sourceHasAudio() ? this.o.audioWaitMs : Math.min(this.o.audioWaitMs, 300);
      if (unit.dts - first.dts >= waitMs || this.pendingBytes > this.o.maxStreamBytes / 4) this.release();
      return;
    }
    this.interleave(unit);
  }

  /**
   * Lets video through once the audio of its time has come (or it has waited MAX_AUDIO_LAG_MS), so that every
   * part holds the audio up to its end.
   */
  private interleave(unit: AccessUnit): void {
    const both = !!this.wanted.video && !!this.wanted.audio;
    if (unit.kind === 'audio') {
      this.audioEnd = unit.dts + (unit.duration > 0 ? (unit.duration * 1000) / unit.timescale : 0);
      this.take(unit);
    } else if (both) {
      this.videoDelay.push(unit);
      this.delayBytes += unit.payload.length;
      this.bytes += unit.payload.length;
      if (this.bytes > this.o.maxStreamBytes) this.evict();
    } else {
      this.flushDelay(Infinity);
      this.take(unit);
      return;
    }
    const newest = this.videoDelay.length ? this.videoDelay[this.videoDelay.length - 1].dts : -Infinity;
    // (timestamps that do not advance must not hold video forever either: the wait is bounded in bytes too)
    const giveUp = newest - this.audioEnd > AUDIO_GONE_MS || this.delayBytes > this.o.maxStreamBytes / 4;
    // a video frame at t may go once the audio up to t has come: the part it ends then holds every audio frame
    // that starts before it (the last one may run a little past it)
    this.flushDelay(giveUp ? Infinity : Math.max(this.audioEnd, newest - MAX_AUDIO_LAG_MS));
  }

  /** takes the delayed video up to `until` (stream ms) */
  private flushDelay(until: number): void {
    while (this.videoDelay.length && this.videoDelay[0].dts <= until) {
      const u = this.videoDelay.shift()!;
      this.delayBytes -= u.payload.length;
      this.bytes -= u.payload.length;
      this.take(u);
      if (this.closed) return;
    }
  }

  /** the publisher changed (a terminal reconnected): a discontinuity at the next start point */
  publisherChanged(): void {
    if (this.active) this.breakPending = true;
  }

  end(reason: string): void {
    this.o.log.debug({ reason }, 'HLS segmenter ended');
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.hold = undefined;
    this.driverUnits = [];
    this.audioQueue = [];
    this.videoDelay = [];
    this.delayBytes = 0;
    this.segments.length = 0;
    this.current = undefined;
    this.bytes = 0;
    this.pendingBytes = 0;
    this.changed();
  }

  // --- cutting --------------------------------------------------------------------------------------------------

  private release(): void {
    const held = this.hold ?? [];
    this.hold = undefined;
    this.pendingBytes = 0;
    for (const u of held) this.interleave(u);
  }

  private take(unit: AccessUnit): void {
    const isVideo = unit.kind === 'video';
    if (!isVideo && unit.codec !== 'aac') {
      this.o.stats.unitsLeftOut();
      return;
    }
    // a new configuration (or the very first) starts at a start point of the track that will drive the cuts
    if (!this.active || this.pendingReinit) {
      const w = this.wanted;
      const startKind = w.video ? 'video' : 'audio';
      if ((w.video || w.audio) && unit.kind === startKind && (unit.kind === 'audio' || unit.keyframe)) {
        if (!this.active && this.shouldHold(w)) {
          this.held = true;
          this.hold = [unit];
          this.pendingBytes = unit.payload.length;
          return;
        }
        const wasActive = !!this.active;
        if (this.current) this.endSegment(unit);
        this.activate(w);
        this.startSegment(unit, wasActive || this.breakPending);
        this.driverUnits.push(unit);
        this.addPending(unit.payload.length);
        return;
      }
      if (!this.active) {
        if (unit.kind === 'audio' && w.video && w.audio) this.queueAudio(unit);
        return;
      }
    }
    const a = this.active;
    if (isVideo ? !a.video : !a.audio) {
      this.o.stats.unitsLeftOut();
      return;
    }
    const driver = a.video ? 'video' : 'audio';
    if (unit.kind !== driver) {
      this.queueAudio(unit);
      return;
    }
    const startPoint = unit.kind === 'audio' || unit.keyframe;
    if (this.waitStart || this.breakPending) {
      // after a break, frames before the next start point refer to pictures this stream's players never got
      if (!startPoint) return;
      if (this.current) this.endSegment(unit);
      this.startSegment(unit, true);
      this.driverUnits.push(unit);
      this.addPending(unit.payload.length);
      return;
    }
    const cur = this.current!;
    if (
      (startPoint && segmentDue(unit.dts, cur.startDts, this.lastStartPointDts, this.o.targetDurationSec)) ||
      pastTarget(unit.dts, cur.startDts, this.lastDriverDts, this.o.targetDurationSec)
    ) {
      const lastStart = this.lastStartPointDts;
      this.endSegment(unit);
      this.startSegment(unit, false);
      // a cut inside a GOP is no start point: the GOP still began where it did
      if (!startPoint) this.lastStartPointDts = lastStart;
    } else if (
      this.driverUnits.length > 0 &&
      (partDue(unit.dts, this.partStartDts, this.lastDriverDts, this.o.partTargetSec) ||
        (startPoint && unit.kind === 'video' && partLongEnough(unit.dts, this.partStartDts, this.o.partTargetSec)))
    ) {
      // a keyframe inside a segment (one cut inside the GOP before) starts a part of its own, an INDEPENDENT one
      // where a player may join, when the part it ends is long enough (8216bis: parts other than the last of a
      // segment and INDEPENDENT ones last at least 85 % of the part target)
      this.endPart(unit);
      this.partStartDts = unit.dts;
    }
    if (startPoint) this.lastStartPointDts = unit.dts;
    this.lastDriverDts = unit.dts;
    this.driverUnits.push(unit);
    this.addPending(unit.payload.length);
  }

  /**
   * Audio that goes with video waits for the part its time falls in (audio before a segment's start is dropped
   * when the segment starts); without a segment, only the last MAX_AUDIO_LAG_MS of it is kept.
   */
  private queueAudio(unit: AccessUnit): void {
    this.audioQueue.push(unit);
    this.addPending(unit.payload.length);
    if (!this.current) {
      let n = 0;
      while (n < this.audioQueue.length && this.audioQueue[n].dts < unit.dts - MAX_AUDIO_LAG_MS) this.addPending(-this.audioQueue[n++].payload.length);
      if (n) this.audioQueue = this.audioQueue.slice(n);
    }
  }

  private shouldHold(w: Config): boolean {
    return !this.held && this.o.wantsAudioWithVideo && !!w.video && !w.audio && this.o.audioWaitMs > 0;
  }

  private activate(w: Config): void {
    this.active = activate(w, this.o.container, ++this.initVersion);
    this.pendingReinit = false;
  }

  private startSegment(unit: AccessUnit, discontinuity: boolean): void {
    this.breakPending = false;
    this.waitStart = false;
    this.touched();
    this.current = {
      msn: this.nextMsn,
      parts: [],
      duration: 0,
      bytes: 0,
      complete: false,
      discontinuity,
      init: this.active!.init,
      programDateTime: this.o.wallClock(unit.dts),
      startDts: unit.dts,
    };
    this.partStartDts = unit.dts;
    this.lastDriverDts = unit.dts;
    this.lastStartPointDts = unit.dts;
    // audio from before the segment's start cannot go into it
    const before = this.audioQueue.filter((u) => u.dts < unit.dts);
    if (before.length) {
      this.audioQueue = this.audioQueue.filter((u) => u.dts >= unit.dts);
      for (const u of before) this.addPending(-u.payload.length);
    }
  }

  /** ends the segment being made before `next` (the unit that starts the following one) */
  private endSegment(next: AccessUnit): void {
    const cur = this.current!;
    if (this.driverUnits.length > 0) this.endPart(next);
    if (this.current !== cur) return; // (dropped for its size)
    this.current = undefined;
    this.touched();
    if (cur.parts.length === 0) return; // (nothing was made: its msn is reused)
    cur.duration = round3((next.dts - cur.startDts) / 1000);
    cur.complete = true;
    if (cur.duration > this.maxSegmentSec) this.maxSegmentSec = cur.duration;
    this.nextMsn = cur.msn + 1;
    this.segments.push(cur);
    this.o.stats.segments();
    this.evict();
    this.changed();
  }

  /** muxes the units of the part being made; `next` is the driver unit after them (its time ends the part) */
  private endPart(next: AccessUnit): void {
    const a = this.active!;
    const cur = this.current!;
    const endDts = next.dts;
    const driver = this.driverUnits;
    this.driverUnits = [];
    const audioUnits = a.video ? this.takeAudioBefore(endDts) : driver;
    const videoSamples = a.video ? videoSamplesOf(driver, a.video, next) : [];
    const audioSamples = a.audio ? audioSamplesOf(audioUnits, a.audio, a.video ? undefined : next) : [];
    const data = a.ts
      ? [a.ts.chunk(videoSamples, audioSamples, cur.parts.length === 0)]
      : fmp4Fragment(this.fragmentSeq++, fragmentTracks(a, videoSamples, audioSamples));
    const duration = round3((endDts - this.partStartDts) / 1000);
    // (a stall of the source makes one long part; the declared part target ignores those past a segment's length)
    if (duration > this.maxPartSec && duration <= this.o.targetDurationSec) this.maxPartSec = duration;
    const bytes = data.reduce((n, b) => n + b.length, 0);
    cur.parts.push({ index: cur.parts.length, duration, independent: driver[0].kind === 'audio' || driver[0].keyframe, data, bytes });
    cur.bytes += bytes;
    this.bytes += bytes - this.pendingBytes;
    this.pendingBytes = 0;
    for (const u of this.audioQueue) this.pendingBytes += u.payload.length;
    this.bytes += this.pendingBytes;
    this.o.stats.parts();
    this.partStartDts = endDts;
    if (cur.bytes > this.o.maxStreamBytes / 2) {
      this.dropCurrent();
      return;
    }
    // older segments make room for the one being made (it holds at most half of maxStreamBytes)
    if (this.bytes > this.o.maxStreamBytes) this.evict();
    this.changed();
  }

  private takeAudioBefore(endDts: number): AccessUnit[] {
    const q = this.audioQueue;
    let n = 0;
    while (n < q.length && q[n].dts < endDts) n++;
    this.audioQueue = q.slice(n);
    return q.slice(0, n);
  }

  private addPending(n: number): void {
    this.pendingBytes += n;
    this.bytes += n;
    if (this.current && this.current.bytes + this.pendingBytes > this.o.maxStreamBytes / 2) this.dropCurrent();
    else if (this.bytes > this.o.maxStreamBytes) this.evict();
  }

  /** the segment being made outgrew its share of memory (a GOP far too long): drop it, wait for the next start */
  private dropCurrent(): void {
    const cur = this.current;
    if (!cur) return;
    this.o.log.warn({ msn: cur.msn, bytes: cur.bytes + this.pendingBytes }, 'HLS segment dropped: larger than half of maxStreamBytes');
    this.o.stats.memoryDrops();
    this.bytes -= cur.bytes + this.pendingBytes;
    this.pendingBytes = 0;
    this.current = undefined;
    this.driverUnits = [];
    this.audioQueue = [];
    this.waitStart = true;
    this.breakPending = true;
    this.changed();
  }
}
