/**
 * Memory for a unit's bytes laid out contiguously for one write, valid until the end of the tick. A player in step
 * with its stream gets each unit as one Buffer instead of five pieces through a corked socket: node's Writable takes
 * a write per piece (an object each, a view each) and the handle a writev of five buffers, which together cost more
 * than copying the unit once (see Transport.send). A write the kernel takes whole leaves nothing referring to this
 * memory, so the same slab serves every tick; a write it cannot take is held by node until sent, and the slab it
 * refers to is left to the collector once node lets go.
 */
const SLAB = 128 * 1024;

export class WireScratch {
  private slab: Buffer | undefined;
  private at = 0;
  /** a write still refers to the slab: nothing in it is reused, the next room comes after it or from a new slab */
  private escaped = false;
  /** the last unit laid out, for the next player of the same stream in this tick (fan-out) */
  private lastKey: object | undefined;
  private lastKind = 0;
  private lastView: Buffer | undefined;

  /** the most one unit laid out can take */
  static readonly MAX = SLAB;

  /** the view laid out for (key, kind) this tick, if any */
  cached(key: object, kind: number): Buffer | undefined {
    return this.lastKey === key && this.lastKind === kind ? this.lastView : undefined;
  }

  /** Room for n bytes (n <= MAX): returns the slab; the room starts at `start`. */
  take(n: number): Buffer {
    let s = this.slab;
    if (s === undefined || this.at + n > SLAB) {
      if (s === undefined || this.escaped) {
        s = Buffer.allocUnsafeSlow(SLAB);
        this.slab = s;
        this.escaped = false;
      }
      this.at = 0;
      this.lastKey = undefined;
    }
    this.start = this.at;
    this.at += n;
    return s;
  }

  start = 0;

  /** Remembers the view just laid out for (key, kind), to share with the unit's other players this tick. */
  keep(key: object, kind: number, view: Buffer): void {
    this.lastKey = key;
    this.lastKind = kind;
    this.lastView = view;
  }

  /** a write kept a view of the slab (the kernel did not take it all) */
  escape(): void {
    this.escaped = true;
  }

  /** The tick's writes are out: the room is free again unless a write still refers to it. */
  reset(): void {
    this.lastKey = undefined;
    this.lastView = undefined;
    if (this.escaped) {
      this.slab = undefined;
      this.escaped = false;
    }
    this.at = 0;
  }
}
