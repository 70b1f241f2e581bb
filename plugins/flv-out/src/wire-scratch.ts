/**
 * Memory for a unit's bytes laid out contiguously for one write. A player in step with its stream gets each unit as
 * one Buffer instead of five pieces through a corked socket: node's Writable takes a write per piece (an object
 * each, a view each) and the handle a writev of five buffers, which together cost more than copying the unit once
 * (see Transport.send).
 *
 * A write the kernel takes whole leaves nothing referring to this memory, so every unit is laid out from the start
 * of the same slab, overwriting the last one. A write the kernel cannot take whole is held by node until sent: the
 * slab is then left to it (and to the collector after), and the next unit gets a new one. The last unit laid out
 * stays shared (its bytes no longer change) with its stream's other players of the same kind (fan-out).
 */
const SLAB = 128 * 1024;

export class WireScratch {
  private slab: Buffer | undefined;
  private lastKey: object | undefined;
  private lastKind = 0;
  private lastView: Buffer | undefined;

  /** the most one unit laid out can take */
  static readonly MAX = SLAB;

  /** the view of (key, kind) if it is the last one laid out */
  cached(key: object, kind: number): Buffer | undefined {
    return this.lastKey === key && this.lastKind === kind ? this.lastView : undefined;
  }

  /** Room for a unit (at most MAX bytes), from offset 0: whatever was laid out before is gone. */
  take(): Buffer {
    this.lastKey = undefined;
    this.lastView = undefined;
    return (this.slab ??= Buffer.allocUnsafeSlow(SLAB));
  }

  /** Remembers the view just laid out for (key, kind), for the unit's next player of that kind. */
  keep(key: object, kind: number, view: Buffer): void {
    this.lastKey = key;
    this.lastKind = kind;
    this.lastView = view;
  }

  /** A write kept a view of the slab (the kernel did not take it all): the slab is node's now. */
  escape(): void {
    this.slab = undefined;
  }
}
