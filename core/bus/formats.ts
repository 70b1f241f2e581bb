import type { Logger } from 'pino';
import type { FormatEncoder, StreamInfo, UnitFormat } from '../../plugin-sdk/bus';
import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import { newEntry, setForm, type Entry } from './entry';
import type { GopCache } from './gop-cache';

interface Slot {
  format: UnitFormat<unknown>;
  encoder: FormatEncoder<unknown>;
  readers: number;
  failures: number;
}

/**
 * The formats a stream's readers use, one encoder each: every unit pushed is framed once per format in use, into
 * its Entry, and shared by all that format's readers (MediaMTX's per-format unit encoding; Monibuca's forms cached
 * on the frame). An encoder created while the stream runs first frames the GOP cache, so it has seen every unit
 * from the latest keyframe on. A reader that joins later gets the GOP's forms from its encoder's `catchUp`, or, for
 * a format without it, the forms the cache kept (gop-cache.ts).
 */
export class StreamFormats {
  private slots: Array<Slot | undefined> = [];
  private active = 0;
  /** slots whose encoder has no catchUp: while any is in use the GOP cache keeps its Entries */
  private keeping = 0;

  constructor(
    private readonly stream: StreamInfo,
    private readonly log: Logger,
  ) {}

  get inUse(): number {
    return this.active;
  }

  /**
   * A reader of `format` joins: its slot (created, and fed the GOP, for the format's first reader) and, when it
   * `wantsGop`, the GOP's Entries with their forms in that slot.
   */
  join(format: UnitFormat<unknown>, tracks: ReadonlyArray<TrackInfo>, gop: GopCache, wantsGop: boolean): { slot: number; entries: readonly Entry[] } {
    let i = this.slots.findIndex((s) => s?.format === format);
    let slot = i < 0 ? undefined : this.slots[i];
    let entries: Entry[];
    if (slot === undefined) {
      const encoder = format.createEncoder(this.stream);
      i = this.slots.indexOf(undefined);
      if (i < 0) i = this.slots.length;
      slot = { format, encoder, readers: 0, failures: 0 };
      this.slots[i] = slot;
      this.active++;
      if (tracks.length) this.tracksTo(slot, tracks);
      // a format that cannot frame the GOP again for a later joiner has its forms kept, and so the cache's Entries
      const keeps = encoder.catchUp === undefined;
      if (keeps) this.keeping++;
      entries = keeps && !gop.keepsEntries ? this.keepEntries(gop, tracks) : gop.entryList();
      // the encoder sees the GOP whether or not this reader starts from it
      for (const e of entries) setForm(e, i, this.encode(slot, e.unit));
      if (!wantsGop) entries = [];
    } else if (!wantsGop) {
      entries = [];
    } else {
      entries = gop.entryList();
      if (!gop.keepsEntries) this.catchUp(slot, i, entries, tracks);
    }
    slot.readers++;
    return { slot: i, entries };
  }

  release(i: number, gop: GopCache): void {
    const slot = this.slots[i];
    if (!slot || --slot.readers > 0) return;
    this.slots[i] = undefined;
    this.active--;
    if (gop.keepsEntries) for (const e of gop.entryList()) setForm(e, i, undefined);
    if (slot.encoder.catchUp === undefined && --this.keeping === 0) gop.dropEntries();
    try {
      slot.encoder.close?.();
    } catch (err) {
      this.log.warn({ stream: this.stream.name, format: slot.format.name, err: (err as Error | undefined)?.message }, 'format encoder failed to close');
    }
  }

  /** The GOP's Entries kept from now on, with the forms of the formats already in use made again. */
  private keepEntries(gop: GopCache, tracks: ReadonlyArray<TrackInfo>): Entry[] {
    const entries = gop.keepEntries();
    for (let k = 0; k < this.slots.length; k++) {
      const s = this.slots[k];
      if (s !== undefined && s.encoder.catchUp !== undefined) this.catchUp(s, k, entries, tracks);
    }
    return entries;
  }

  /** The forms of `entries` in slot i from its encoder's catchUp; a unit it fails on is left out for the reader. */
  private catchUp(s: Slot, i: number, entries: Entry[], tracks: ReadonlyArray<TrackInfo>): void {
    if (entries.length === 0) return;
    let forms: ReadonlyArray<unknown> = [];
    try {
      forms = s.encoder.catchUp!(
        entries.map((e) => e.unit),
        tracks,
      );
    } catch (err) {
      this.failed(s, err);
    }
    for (let k = 0; k < entries.length; k++) setForm(entries[k], i, forms[k]);
  }

  tracks(tracks: ReadonlyArray<TrackInfo>): void {
    for (const s of this.slots) if (s) this.tracksTo(s, tracks);
  }

  /** The unit as an Entry, with its form in every format in use. */
  entryOf(unit: AccessUnit, seq: number, src: number): Entry {
    const e = newEntry(unit, seq, src);
    if (this.active === 0) return e;
    const n = this.slots.length;
    for (let i = 0; i < n; i++) {
      const s = this.slots[i];
      if (s !== undefined) setForm(e, i, this.encode(s, unit));
    }
    return e;
  }

  readersOf(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const s of this.slots) if (s) out[s.format.name] = s.readers;
    return out;
  }

  closeAll(): void {
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[i];
      if (!s) continue;
      this.slots[i] = undefined;
      try {
        s.encoder.close?.();
      } catch {
        /* closing anyway */
      }
    }
    this.active = 0;
  }

  private tracksTo(s: Slot, tracks: ReadonlyArray<TrackInfo>): void {
    try {
      s.encoder.tracks?.(tracks);
    } catch (err) {
      this.failed(s, err);
    }
  }

  private encode(s: Slot, unit: AccessUnit): unknown {
    try {
      return s.encoder.encode(unit);
    } catch (err) {
      this.failed(s, err);
      return undefined;
    }
  }

  private failed(s: Slot, err: unknown): void {
    // a unit it cannot frame is left out for its readers; logged the first times, not for every unit
    if (++s.failures <= 3)
      this.log.warn(
        { stream: this.stream.name, format: s.format.name, err: (err as Error | undefined)?.message ?? String(err) },
        'format encoder failed on a unit: left out for its readers',
      );
  }
}
