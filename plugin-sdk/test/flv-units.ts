/** Small helpers the FLV muxer tests share. */
import type { FlvMuxer, FlvTag } from '../formats/flv';
import { audioUnit, type AccessUnit } from '../media';

/** One G.711 frame at 8 kHz (160 bytes: 20 ms). */
export function g711(codec: 'g711a' | 'g711u', dts: number, payload: Buffer): AccessUnit {
  return audioUnit({ codec, dts, payload, timescale: 8000, duration: payload.length });
}

/** Every tag the muxer gives for the units, in order. */
export function muxAll(muxer: FlvMuxer, units: AccessUnit[]): FlvTag[] {
  const tags: FlvTag[] = [];
  for (const au of units) tags.push(...muxer.push(au));
  return tags;
}
