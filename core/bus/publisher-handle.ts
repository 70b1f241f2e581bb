import type { Publisher } from '../../plugin-sdk/bus';
import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import type { BusStream } from './stream';
import { Buffer } from 'node:buffer';

/** A publisher of a bus stream: its offset on the stream's timeline, and what it does once replaced or closed. */
export class PublisherHandle implements Publisher {
  active = true;
  /** ms added to this publisher's timestamps so the stream's timeline continues; set at its first unit */
  offset: number | undefined;
  /** a wall-clock anchor given before the first unit (its dts is still on the publisher's own timeline) */
  wallPending: { epochMs: number; dtsMs: number } | undefined;
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
  alloc(bytes: number): Buffer {
    return this.active ? this.stream.alloc(bytes) : Buffer.allocUnsafe(bytes);
  }
  discard(payload: Buffer): void {
    if (this.active) this.stream.discard(payload);
  }
  pause(): void {
    /* readers stay attached; the next publisher continues the timeline */
  }
  setWallClock(epochMs: number, dtsMs: number): void {
    if (!this.active) return;
    if (this.offset === undefined) this.wallPending = { epochMs, dtsMs };
    else this.stream.anchorWallClock(epochMs, dtsMs + this.offset);
  }
  onClose(cb: () => void): void {
    if (this.stream.closed) cb();
    else this.closeCbs.push(cb);
  }
  fireClose(): void {
    this.active = false;
    const cbs = this.closeCbs;
    this.closeCbs = [];
    for (const cb of cbs) cb();
  }
}
