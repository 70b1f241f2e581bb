/**
 * What a terminal link counts as it carries packets, and the totals the per-listener metrics read from it
 * (link-set.ts, ingest-metrics.ts). A channel's frames and losses are counted by its assembler; a link folds them
 * into its own totals when the channel's source goes, so the listener's counts keep what the link carried.
 */
import type { ChannelSource } from './channel-source';

export interface LinkCounters {
  bytes: number;
  packets: number;
  unmatchedPackets: number;
  /** packets for a stream another link publishes (or pinned to another address): dropped */
  refusedPackets: number;
}

/** What a link has carried so far, its channels' frames and losses included, for per-listener metrics. */
export interface LinkTotals {
  packets: number;
  unmatchedPackets: number;
  frames: number;
  lostPackets: number;
  droppedFrames: number;
  resyncs: number;
}

/** Adds what a channel's assembler counted to a link's totals. */
export function addChannelStats(into: Pick<LinkTotals, 'frames' | 'lostPackets' | 'droppedFrames'>, src: ChannelSource): void {
  const s = src.assembler.stats;
  into.frames += s.videoUnits + s.audioUnits;
  into.lostPackets += s.reorder.lost;
  into.droppedFrames += s.reassembly.droppedFrames;
}
