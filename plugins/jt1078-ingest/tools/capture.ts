/**
 * A capture file as the simulator replays it: its packets (parsed by the gateway's own parser, so a capture the
 * gateway cannot read is refused here too) and the pacing offset of each.
 */
import * as fs from 'node:fs';
import type { Jt1078Layout, Jt1078Packet } from '../src/packet';
import { Jt1078Parser } from '../src/parser';
import { UsageError } from './simulator-args';

export interface Capture {
  layout: Jt1078Layout;
  packets: Jt1078Packet[];
  sim: string;
  channel: number;
  /** media time of each packet from the first, ms, non-decreasing (pacing) */
  offsets: Float64Array;
  /** timestamp shift per loop pass (span of the capture plus one frame) */
  loopShift: number;
}

/** Parses a capture file into packets and pacing offsets. */
export function loadCapture(file: string): Capture {
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read capture file '${file}': ${(err as Error).message}`);
  }
  const packets: Jt1078Packet[] = [];
  const parser = new Jt1078Parser((p) => packets.push(p));
  parser.push(data);
  parser.end();
  if (packets.length === 0) throw new UsageError(`no JT/T 1078 packets found in '${file}'`);
  const offsets = new Float64Array(packets.length);
  let t = 0;
  let minTs = Infinity;
  let maxTs = -Infinity;
  for (let i = 0; i < packets.length; i++) {
    const ts = packets[i].timestamp;
    if (ts < minTs) minTs = ts;
    if (ts > maxTs) maxTs = ts;
    if (i > 0) {
      // Audio and video timestamps interleave and captures contain jumps: pace by forward steps only,
      // each capped, so one odd timestamp cannot stall the replay.
      let step = ts - packets[i - 1].timestamp;
      if (step < 0) step = 0;
      if (step > 1000) step = 1000;
      t += step;
    }
    offsets[i] = t;
  }
  return {
    layout: parser.layout ?? '2013',
    packets,
    sim: packets[0].sim,
    channel: packets[0].channel,
    offsets,
    loopShift: maxTs - minTs + 40,
  };
}
