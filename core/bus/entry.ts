import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';

/**
 * A unit as the bus holds it: the publisher's immutable unit and its forms in the formats the stream's readers
 * use (slot i of `forms` belongs to the stream's i-th format; undefined when no format is in use). One Entry is
 * shared by the GOP cache and every reader's queue, so each form is made once.
 */
export interface Entry {
  readonly unit: AccessUnit;
  forms: unknown[] | undefined;
}

/** A track change queued between units, so a reader gets it in order with the units around it. */
export type TrackChange = ReadonlyArray<TrackInfo>;

export type QueueItem = Entry | TrackChange;

export function isTrackChange(x: QueueItem): x is TrackChange {
  return Array.isArray(x);
}
