import { UNIT_SHAPE_SEED, small, type AccessUnit, type TrackInfo } from '../../plugin-sdk/media';

/**
 * A unit as the bus holds it: the publisher's immutable unit and its forms in the formats the stream's readers
 * use. One Entry is shared by every reader's queue, so each form is made once (and by the GOP cache while a format
 * without catchUp is in use: gop-cache.ts). Slot 0 (nearly always the only format a stream has) is a field, further
 * slots an array: one object fewer per unit is less for the collector to copy and trace.
 */
export interface Entry {
  readonly unit: AccessUnit;
  /** the unit's number on its stream, in push order (what payload memory reuse measures progress by) */
  readonly seq: number;
  /**
   * The number payload reuse measures this unit by, on the stream whose memory holds its payload: `seq` on that
   * stream; for a unit a stage passed through (StageDefinition.passes), its number on the input; for a unit a stage
   * made, the number of the last unit passed before it (what follows it was passed later, so numbers never fall).
   */
  readonly src: number;
  f0: unknown;
  /** slots 1.. (index slot - 1) */
  more: unknown[] | undefined;
}

/**
 * Every Entry is made here: one object literal, so one hidden class for all of them, first made with fields that are
 * not numbers (as units are: plugin-sdk/media.ts, makeUnit).
 *
 * Why: the GOP cache makes Entries again for a player that joins, from numbers it read back from a Float64Array, which
 * are heap numbers even when whole. One such Entry turned the class's `seq` and `src` from small integers to doubles,
 * and V8 marked the class deprecated; but code it had already optimised with this literal inlined (the bus's push)
 * went on making Entries of the deprecated class, and the first property load to meet each one migrated it in the
 * runtime. One player joining mid-GOP once the push was optimised was enough, so a gateway in service ran that way
 * for good: in the worst case GopCache.add, never optimised again, took 6.8 % of the gateway's CPU samples at 500
 * terminals instead of 1.8 % (test/bench/README.md).
 * `seq` and `src` are also made small integers where they are whole, so they stay inline.
 */
export function newEntry(unit: AccessUnit, seq: number, src: number): Entry {
  return { unit, seq: small(seq), src: small(src), f0: undefined, more: undefined };
}

/** kept so the hidden class it made stays the one every Entry takes; null, then 0: as UNIT_SHAPE_SEED, to any value */
export const ENTRY_SHAPE_SEED: Entry = newEntry(UNIT_SHAPE_SEED, null as unknown as number, null as unknown as number);
newEntry(UNIT_SHAPE_SEED, 0, 0);

export function formOf(e: Entry, slot: number): unknown {
  return slot === 0 ? e.f0 : e.more?.[slot - 1];
}

export function setForm(e: Entry, slot: number, form: unknown): void {
  if (slot === 0) e.f0 = form;
  else (e.more ??= [])[slot - 1] = form;
}

/** A track change queued between units, so a reader gets it in order with the units around it. */
export type TrackChange = ReadonlyArray<TrackInfo>;

export type QueueItem = Entry | TrackChange;

export function isTrackChange(x: QueueItem): x is TrackChange {
  return Array.isArray(x);
}
