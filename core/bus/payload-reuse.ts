import { BufferSlab, FRAME_SLAB_BYTES } from '../../plugin-sdk/buffer-slab';
import { PayloadArena } from './payload-arena';
import type { StreamDeps } from './stream-deps';
import { Buffer } from 'node:buffer';

/**
 * A stream's payload memory (Publisher.alloc): an arena reused once nothing can read it (payload-arena.ts), or,
 * while some reader cannot say when it is done with what it gets (a sink without MediaReader.holdsPayloads: a
 * "keeper"), small slabs the collector frees. It knows which readers keep reuse off, says so once per stream in
 * the log, and tells /metrics (`offBy`).
 *
 * On a stage's stream fed by `passes`, payloads are the input's: its own units get slabs, and its readers count as
 * holders of the input's memory (`follow`).
 */
export class PayloadReuse {
  private arenaNow: PayloadArena | undefined;
  private slab: BufferSlab | undefined;
  /** names of the keepers reading now, here or on a stage's stream this one passes to, in the order they came */
  private readonly keepers: string[] = [];
  /** keepers.length, read by every alloc without loading the array (at 1,000 streams, one cache miss fewer a frame) */
  private keeping = 0;
  /** of a stage's stream: the input's, whose memory its passed units' payloads are */
  private input: PayloadReuse | undefined;
  private closed = false;
  /** Publisher.alloc was called: payload memory is the bus's to reuse, so a keeper costs something */
  private allocates = false;
  /** the log said that reuse is off on this stream */
  private told = false;

  constructor(
    private readonly stream: string,
    private readonly deps: Pick<StreamDeps, 'limits' | 'log' | 'chunks'>,
    /** whether nothing of the stream can read the units numbered up to `lastSrc` (Entry.src) any more */
    private readonly done: (lastSrc: number) => boolean,
  ) {}

  /** the arena units' payloads are carved from now, if any */
  get arena(): PayloadArena | undefined {
    return this.arenaNow;
  }

  /** Publisher.alloc: memory for a payload, reused once every holder is done with it. */
  alloc(bytes: number): Buffer {
    if (this.closed) return Buffer.allocUnsafe(bytes);
    // small chunks the collector frees: a chunk pins its memory as long as any slice of it lives. A stage's
    // stream numbers its units on its input's count (Entry.src), which its own chunks cannot be measured by.
    if (this.keeping > 0 || this.input !== undefined || this.deps.limits.reusePayloads === false) return this.fresh(bytes);
    return (this.arenaNow ??= this.newArena()).alloc(bytes);
  }

  /** Publisher.discard: memory from alloc that no unit will carry. */
  discard(payload: Buffer): void {
    this.arenaNow?.discard(payload);
  }

  /** The stream is a stage's, fed by `input`'s units: what its readers hold is input's memory. */
  follow(input: PayloadReuse): void {
    this.input = input;
  }

  /** payloads may be read where no one can tell when: nothing of the arena (here, or the input's) is reused */
  escaped(): void {
    this.dropArena();
    this.input?.escaped();
  }

  /**
   * A reader that cannot say when it is done joined, here or on a stage's stream this one passes to. It may keep
   * what it gets for as long as it likes: the arena goes (nothing of it is ever reused; its chunks are freed by the
   * collector once their units are gone) and a new one starts when no such reader is left.
   */
  keeperJoined(name: string): void {
    // a closed stream gave back all it counted when it closed
    if (this.closed) return;
    this.keeping = this.keepers.push(name);
    this.dropArena();
    this.tellOff();
    this.input?.keeperJoined(name);
  }

  /** such a reader left */
  keeperLeft(name: string): void {
    if (this.closed) return;
    const i = this.keepers.indexOf(name);
    if (i >= 0) this.keepers.splice(i, 1);
    this.keeping = this.keepers.length;
    this.input?.keeperLeft(name);
  }

  /**
   * The reader keeping this stream's payload memory from being reused now (the first of them to come), or
   * undefined: reused, not in use (no alloc, or gateway.reusePayloads false), or a stage's stream (its input is).
   */
  get offBy(): string | undefined {
    if (!this.allocates || this.input !== undefined || this.deps.limits.reusePayloads === false) return undefined;
    return this.keepers[0];
  }

  /**
   * The stream closed. `readersLeft`: it still had readers, which may hold what they were passed (a socket's
   * buffer), so a stage's input reuses nothing of it.
   */
  close(readersLeft: boolean): void {
    if (this.closed) return;
    this.closed = true;
    const input = this.input;
    if (input) {
      if (readersLeft) input.escaped();
      for (const name of this.keepers) input.keeperLeft(name);
    }
    this.keepers.length = 0;
    this.keeping = 0;
    // sockets may still hold its units' bytes: the collector frees its chunks once they are gone
    this.dropArena(false);
  }

  private fresh(bytes: number): Buffer {
    if (!this.allocates) {
      this.allocates = true;
      this.tellOff();
    }
    return (this.slab ??= new BufferSlab(FRAME_SLAB_BYTES)).take(bytes);
  }

  private newArena(): PayloadArena {
    this.allocates = true;
    return new PayloadArena((lastSeq) => this.done(lastSeq), this.deps.chunks);
  }

  private dropArena(escaped = true): void {
    this.arenaNow?.forgetAll(escaped);
    this.arenaNow = undefined;
  }

  /** Once per stream: its payload memory is not reused, and which reader made it so. */
  private tellOff(): void {
    const by = this.offBy;
    if (this.told || by === undefined) return;
    this.told = true;
    this.deps.log.info(
      { stream: this.stream, reader: by },
      'payload memory of this stream is not reused while this reader reads: its sink cannot say when it is done with what it gets (MediaReader.holdsPayloads)',
    );
  }
}
