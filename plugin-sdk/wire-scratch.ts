/**
 * Memory for a unit's bytes laid out contiguously for one write. A player in step with its stream gets each unit as
 * one Buffer instead of its pieces through a corked socket: node's Writable takes a write per piece (an object
 * each, a view each) and the handle a writev of them all, which together cost more than copying the unit once
 * (flv-out's Transport.send: five pieces a unit; rtsp-out's TCP sessions: two a packet).
 *
 * A write the kernel takes whole leaves nothing referring to this memory, so the next unit is laid out in the same
 * place, overwriting it. A write the kernel cannot take whole is held by node until sent: units after it go past it
 * in the slab, and once the slab is full it is left to node (and to the collector after) and a new one is taken. The
 * last unit laid out stays shared (its bytes no longer change) with its stream's other players of the same kind
 * (fan-out).
 */
import type { DirectWriter, WritableAccount } from './direct-writes';
import { Buffer } from 'node:buffer';

const SLAB = 128 * 1024;

export class WireScratch {
  /** the slab's memory (allocUnsafeSlow's own: offset 0) */
  private mem: ArrayBuffer | undefined;
  /** where the next unit is laid out: past every view of this slab that node may still hold */
  private free = 0;
  /** where the last unit laid out ends: escape() moves `free` past it, however often a unit's players call it */
  private lastEnd = 0;
  private lastKey: object | undefined;
  private lastKind = 0;
  private lastView: Buffer | undefined;

  /** the most one unit laid out can take */
  static readonly MAX = SLAB;

  /** the view of (key, kind) if it is the last one laid out */
  cached(key: object, kind: number): Buffer | undefined {
    return this.lastKey === key && this.lastKind === kind ? this.lastView : undefined;
  }

  /**
   * Room for a unit of n bytes (at most MAX), as a Buffer of its own from 0: whatever was laid out there before is
   * gone. It follows the last view that escaped, or starts a new slab when the rest of this one is too small.
   */
  take(n: number): Buffer {
    this.lastKey = undefined;
    this.lastView = undefined;
    if (this.mem === undefined || this.free + n > SLAB) {
      this.mem = Buffer.allocUnsafeSlow(SLAB).buffer as ArrayBuffer;
      this.free = 0;
    }
    this.lastEnd = this.free + n;
    return Buffer.from(this.mem, this.free, n);
  }

  /** Remembers the view just laid out for (key, kind), for the unit's next player of that kind. */
  keep(key: object, kind: number, view: Buffer): void {
    this.lastKey = key;
    this.lastKind = kind;
    this.lastView = view;
  }

  /**
   * A write kept the last unit laid out (the kernel did not take it all): node holds it until it is sent, so later
   * units go after it. A whole slab given up for each such write was 128 KiB of external memory, which counts towards
   * V8's full collections, for a ~5 KiB unit (no CPU change measured: test/bench/README.md).
   */
  escape(): void {
    this.free = (this.lastEnd + 7) & ~7;
  }

  /**
   * Hands a view laid out here to `out` (past node's Writable when it can be; `clear` as for DirectWriter.send); one
   * the kernel did not take whole is held until sent, so the units after it go past it (escape).
   */
  send(out: DirectWriter, view: Buffer, clear: boolean | WritableAccount = false): void {
    // (past the Writable, what is not sent is `pending`; through it, node holds the view)
    if (!out.send(view, clear) || out.pending > 0) this.escape();
  }
}
