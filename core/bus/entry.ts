import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';

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
