import type { Logger } from 'pino';
import type { FormatEncoder, StreamInfo, UnitFormat } from '../../plugin-sdk/bus';
import type { AccessUnit, TrackInfo } from '../../plugin-sdk/media';
import { setForm, type Entry } from './entry';

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
 * from the latest keyframe on.
 */
export class StreamFormats {
  private slots: Array<Slot | undefined> = [];
  private active = 0;

  constructor(private readonly stream: StreamInfo, private readonly log: Logger) {}

  get inUse(): number {
    return this.active;
  }

  /** The slot of a format, created (and fed the GOP) for its first reader. */
  acquire(format: UnitFormat<unknown>, tracks: ReadonlyArray<TrackInfo>, gop: readonly Entry[]): number {
    let i = this.slots.findIndex((s) => s?.format === format);
    if (i < 0) {
      const encoder = format.createEncoder(this.stream);
      i = this.slots.indexOf(undefined);
      if (i < 0) i = this.slots.length;
      const slot: Slot = { format, encoder, readers: 0, failures: 0 };
      this.slots[i] = slot;
      this.active++;
      if (tracks.length) this.tracksTo(slot, tracks);
      for (const e of gop) setForm(e, i, this.encode(slot, e.unit));
    }
    this.slots[i]!.readers++;
    return i;
  }

  release(i: number, gop: readonly Entry[]): void {
    const slot = this.slots[i];
    if (!slot || --slot.readers > 0) return;
    this.slots[i] = undefined;
    this.active--;
    for (const e of gop) setForm(e, i, undefined);
    try {
      slot.encoder.close?.();
    } catch (err) {
      this.log.warn({ stream: this.stream.name, format: slot.format.name, err: (err as Error)?.message }, 'format encoder failed to close');
    }
  }

  tracks(tracks: ReadonlyArray<TrackInfo>): void {
    for (const s of this.slots) if (s) this.tracksTo(s, tracks);
  }

  /** The unit as an Entry, with its form in every format in use. */
  entryOf(unit: AccessUnit, seq: number, src: number): Entry {
    const e: Entry = { unit, seq, src, f0: undefined, more: undefined };
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
      try { s.encoder.close?.(); } catch { /* closing anyway */ }
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
    if (++s.failures <= 3) this.log.warn({ stream: this.stream.name, format: s.format.name, err: (err as Error)?.message ?? String(err) }, 'format encoder failed on a unit: left out for its readers');
  }
}
