/**
 * Units as samples: a video unit's NAL units without the parameter sets and delimiters that fMP4 keeps in the
 * init segment (avc1/hvc1: every parameter set in the sample entry, which Safari requires for hvc1), and an audio
 * unit's raw frame. The NAL units stay views of the unit's payload until a fragment copies them into place.
 */
import type { AccessUnit } from '../../../plugin-sdk';
import { h264NalType, h265NalType, splitAnnexB } from '../../../plugin-sdk/formats';
import type { MuxSample, MuxTrack } from './mux-types';

/** H.264 SPS, PPS, AUD; H.265 VPS, SPS, PPS, AUD */
const H264_OUT_OF_BAND = new Set([7, 8, 9]);
const H265_OUT_OF_BAND = new Set([32, 33, 34, 35]);

export class VideoSample implements MuxSample {
  readonly nals: Buffer[];
  readonly size: number;
  duration = 0;
  constructor(readonly unit: AccessUnit, readonly dts: number, readonly cto: number) {
    const hevc = unit.codec === 'h265';
    const drop = hevc ? H265_OUT_OF_BAND : H264_OUT_OF_BAND;
    this.nals = splitAnnexB(unit.payload).filter((n) => n.length > 0 && !drop.has(hevc ? h265NalType(n) : h264NalType(n)));
    let size = 0;
    for (const n of this.nals) size += 4 + n.length;
    this.size = size;
  }

  get sync(): boolean {
    return this.unit.keyframe;
  }

  writeTo(out: Buffer, at: number): number {
    for (const n of this.nals) {
      out.writeUInt32BE(n.length, at);
      n.copy(out, at + 4);
      at += 4 + n.length;
    }
    return at;
  }
}

export class AudioSample implements MuxSample {
  readonly size: number;
  readonly sync = true;
  readonly cto = 0;
  constructor(readonly unit: AccessUnit, readonly dts: number, public duration: number) {
    this.size = unit.payload.length;
  }

  writeTo(out: Buffer, at: number): number {
    this.unit.payload.copy(out, at);
    return at + this.size;
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
