/**
 * Units as samples: a video unit's NAL units without the parameter sets and delimiters that fMP4 keeps in the
 * init segment (avc1/hvc1: every parameter set in the sample entry, which Safari requires for hvc1), and an audio
 * unit's raw frame. The NAL units are read from the unit's index (no search) once, when the unit is copied into the
 * form's sample store; fragments then refer to those bytes.
 */
import type { AccessUnit } from '../../../plugin-sdk';
import { NalUnits } from '../../../plugin-sdk/formats';
import type { MuxSample, MuxTrack } from './mux-types';
import type { SampleStore } from './sample-store';

/** Whether a NAL unit (first byte `b`) goes in a sample: not H.264 SPS, PPS, AUD (7-9) nor H.265 VPS, SPS, PPS, AUD (32-35). */
function inSample(b: number, hevc: boolean): boolean {
  if (hevc) {
    const t = (b >> 1) & 0x3f;
    return t < 32 || t > 35;
  }
  const t = b & 0x1f;
  return t < 7 || t > 9;
}

/** reads a unit's index; pointed at one unit and read through within one call */
const nals = new NalUnits();

/**
 * A unit in its samples' form, copied into `store` (sample-store.ts): video as its NAL units with 4-byte lengths,
 * without the parameter sets and delimiters; audio as its frame. The segmenter keeps these, never the bus's units.
 */
export function sampleFormOf(unit: AccessUnit, store: SampleStore): AccessUnit {
  let payload: Buffer;
  const p = unit.payload;
  if (unit.kind === 'video') {
    const hevc = unit.codec === 'h265';
    const n = nals.of(unit);
    let size = 0;
    for (let i = 0; i < n; i++) if (inSample(p[nals.start(i)], hevc)) size += 4 + nals.end(i) - nals.start(i);
    payload = store.take(size);
    let at = 0;
    for (let i = 0; i < n; i++) {
      const from = nals.start(i);
      const to = nals.end(i);
      if (!inSample(p[from], hevc)) continue;
      payload.writeUInt32BE(to - from, at);
      at += 4 + p.copy(payload, at + 4, from, to);
    }
  } else {
    payload = store.take(p.length);
    p.copy(payload);
  }
  // a unit of the segmenter's own, never handed on: its video payload is not Annex-B, so it has no NAL index (made
  // by hand rather than through unitAt, which would index it)
  const { kind, codec, dts, pts, timescale, dtsTicks, ptsTicks, duration, keyframe, receivedAt } = unit;
  return { kind, codec, dts, pts, timescale, dtsTicks, ptsTicks, duration, keyframe, payload, receivedAt };
}

/** A video sample; its unit is in sample form (sampleFormOf). */
export class VideoSample implements MuxSample {
  readonly size: number;
  duration = 0;
  constructor(
    readonly unit: AccessUnit,
    readonly dts: number,
    readonly cto: number,
  ) {
    this.size = unit.payload.length;
  }

  get sync(): boolean {
    return this.unit.keyframe;
  }

  /** its NAL units with 4-byte lengths (fMP4) */
  get bytes(): Buffer {
    return this.unit.payload;
  }

  /** its NAL units after 4-byte start codes (MPEG-TS): the same size */
  writeAnnexB(out: Buffer, at: number): number {
    const p = this.unit.payload;
    for (let i = 0; i + 4 <= p.length;) {
      const len = p.readUInt32BE(i);
      out.writeUInt32BE(1, at);
      at += 4 + p.copy(out, at + 4, i + 4, i + 4 + len);
      i += 4 + len;
    }
    return at;
  }
}

export class AudioSample implements MuxSample {
  readonly size: number;
  readonly sync = true;
  readonly cto = 0;
  constructor(
    readonly unit: AccessUnit,
    readonly dts: number,
    public duration: number,
  ) {
    this.size = unit.payload.length;
  }

  get bytes(): Buffer {
    return this.unit.payload;
  }
}

function ticks(u: AccessUnit, timescale: number): { dts: number; pts: number } {
  if (u.timescale === timescale) return { dts: u.dtsTicks, pts: u.ptsTicks };
  return { dts: Math.round((u.dtsTicks * timescale) / u.timescale), pts: Math.round((u.ptsTicks * timescale) / u.timescale) };
}

/** the video units of a part as samples; `next` (the unit after them) ends the last one */
export function videoSamplesOf(units: AccessUnit[], t: MuxTrack, next: AccessUnit): VideoSample[] {
  const out = units.map((u) => {
    const { dts, pts } = ticks(u, t.timescale);
    return new VideoSample(u, dts, pts - dts);
  });
  const end = ticks(next, t.timescale).dts;
  for (let i = 0; i < out.length; i++) {
    const to = i + 1 < out.length ? out[i + 1].dts : end;
    out[i].duration = Math.max(0, to - out[i].dts);
  }
  return out;
}

/** audio units as samples: their own duration, else up to the next one (or `next`), else one AAC frame */
export function audioSamplesOf(units: AccessUnit[], t: MuxTrack, next: AccessUnit | undefined): AudioSample[] {
  const out = units.map((u) => new AudioSample(u, ticks(u, t.timescale).dts, 0));
  for (let i = 0; i < out.length; i++) {
    const u = out[i].unit;
    const own = u.duration > 0 ? (u.timescale === t.timescale ? u.duration : Math.round((u.duration * t.timescale) / u.timescale)) : 0;
    const nextDts = i + 1 < out.length ? out[i + 1].dts : next ? ticks(next, t.timescale).dts : undefined;
    out[i].duration = own || (nextDts !== undefined ? Math.max(0, nextDts - out[i].dts) : 1024);
  }
  return out;
}
