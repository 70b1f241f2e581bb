/**
 * The plugin's metrics (gw_jt1078_ingest_*; README "Metrics"). Per-read byte counts are hot counters, folded in at
 * scrape time, since they are added to on every socket read. Per-stream series are one gauge table read in one pass a
 * scrape: a Gauge per column cost ~170 ms a scrape at 1,000 streams. Labels never carry a SIM or stream on the
 * takeover counters: a sender can make up as many of those as it likes.
 */
import type { Metrics } from '../../../plugin-sdk';
import type { TerminalLinkSet } from './link-set';
import type { ChannelSource } from './channel-source';
import type { LinkTotals } from './link-totals';
import type { TerminalLink } from './terminal-link';

export type IngestMetrics = ReturnType<typeof ingestMetrics>;

/** The counters, and the gauges over `links` and the publishing `sources`. */
export function ingestMetrics(metrics: Metrics, links: TerminalLinkSet, sources: () => Iterable<ChannelSource>) {
  const m = {
    bytes: metrics.hotCounter('bytes_total', 'bytes received from terminals', ['listener', 'transport']),
    links: metrics.counter('links_total', 'terminal connections (TCP) or sources (UDP) accepted', ['listener', 'transport']),
    layouts: metrics.counter('layouts_detected_total', 'links by the packet layout detected', ['listener', 'layout']),
    unmatched: metrics.counter('unmatched_packets_total', 'packets for channels nobody opened (dropped)', ['listener']),
    reconnects: metrics.counter('reconnects_total', 'terminals that came back within the disconnect grace'),
    graceExpired: metrics.counter('disconnects_total', 'streams closed because the terminal stayed away past the grace'),
    takeoversRefused: metrics.counter(
      'takeovers_refused_total',
      'packets dropped because another link publishes their stream (alive: it sent within the grace), or the stream is pinned to another address',
      ['listener', 'transport'],
    ),
    takeoversAccepted: metrics.counter(
      'takeovers_accepted_total',
      "streams taken over by another link: reason silent (the publisher's link was silent past the grace) or gone (its link closed and it did not come back)",
      ['listener', 'transport', 'reason'],
    ),
    downPackets: metrics.counter('downlink_packets_total', 'JT/T 1078 packets sent to terminals (intercom audio, raw writes)', ['transport']),
    downBytes: metrics.counter('downlink_bytes_total', 'bytes sent to terminals', ['transport']),
    downRefused: metrics.counter('downlink_refused_total', 'downlink frames refused: link closed, or its backlog over downlinkMaxPendingBytes', ['reason']),
  };
  metrics.gauge('links', 'open terminal links', [], (g) => g.set(links.size));
  const listenerGauge = (name: string, help: string, pick: (t: LinkTotals) => number) =>
    metrics.gauge(name, help, ['listener'], (g) => {
      g.reset();
      for (const [k, v] of links.sumByListener(pick)) g.set({ listener: k }, v);
    });
  listenerGauge('listener_packets', 'JT/T 1078 packets parsed, by listener', (t) => t.packets);
  listenerGauge('listener_frames', 'audio and video frames published, by listener', (t) => t.frames);
  listenerGauge('listener_lost_packets', 'packets lost (sequence gaps), by listener', (t) => t.lostPackets);
  listenerGauge('listener_dropped_frames', 'frames dropped for loss or bad reassembly, by listener', (t) => t.droppedFrames);
  listenerGauge('listener_resyncs', 'parser resynchronisations after junk, by listener', (t) => t.resyncs);
  const streamColumns: Array<[string, string, (s: ChannelSource) => number]> = [
    ['stream_packets', 'packets of a channel stream', (s) => s.assembler.stats.packets],
    ['stream_video_frames', 'video frames published', (s) => s.assembler.stats.videoUnits],
    ['stream_audio_frames', 'audio frames published', (s) => s.assembler.stats.audioUnits],
    ['stream_lost_packets', 'packets lost (sequence gaps)', (s) => s.assembler.stats.reorder.lost],
    ['stream_dropped_frames', 'frames dropped for loss or bad reassembly', (s) => s.assembler.stats.reassembly.droppedFrames],
    [
      'stream_audio_waiting_frames',
      "audio frames left out while the codec's parameters were unknown (raw AAC before ADTS, G.726 before its rate)",
      (s) => s.assembler.stats.audio.waitingForParameters,
    ],
    [
      'stream_audio_malformed_frames',
      'audio frames that could not be framed (broken ADTS, ADPCM without its header)',
      (s) => s.assembler.stats.audio.malformed,
    ],
    ['stream_audio_hisilicon_frames', 'audio frames that carried a HiSilicon header (removed)', (s) => s.assembler.stats.reassembly.hisiliconHeaders],
    ['stream_link_bytes', "bytes received on the stream's link", (s) => s.link.counters.bytes],
    ['stream_resyncs', "resynchronisations on the stream's link", (s) => s.link.parser.stats.resyncs],
  ];
  metrics.gaugeTable(
    streamColumns.map(([name, help]) => ({ name, help })),
    ['stream', 'layout', 'transport'],
    (emit) => {
      for (const s of sources()) {
        emit(
          { stream: s.stream.name, layout: s.link.layout ?? 'unknown', transport: s.link.transport },
          streamColumns.map((c) => c[2](s)),
        );
      }
    },
  );
  const refusedByListener = new Map<string, { inc(): void }>();
  return {
    ...m,
    /** one packet of `link` refused (takeovers_refused_total): the labelled child is looked up once per listener and transport */
    refused(link: TerminalLink): void {
      const k = `${link.listener}|${link.transport}`;
      let counter = refusedByListener.get(k);
      if (!counter) refusedByListener.set(k, (counter = m.takeoversRefused.labels(link.listener, link.transport)));
      counter.inc();
    },
  };
}
