import type { Counter, Histogram } from 'prom-client';
import type { Metrics } from '../../../plugin-sdk';

/** The plugin's metrics, label children resolved once (the uplink path runs every 20 ms per talker). */
export interface IntercomMeters {
  talks: { talk: { inc(): void }; stomp: { inc(): void } };
  refused: Counter<'reason'>;
  uplinkFrames: Counter<string>;
  uplinkRefused: Counter<string>;
  dropped: { overflow: { inc(n?: number): void }; noTerminal: { inc(n?: number): void } };
  delay: Histogram<string>;
  downlinkFrames: Counter<string>;
  downlinkDropped: Counter<string>;
  malformed: Counter<'proto'>;
  stompErrors: Counter<string>;
}

const DELAY_BUCKETS = [0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1];

export function createMeters(m: Metrics, talkers: () => number): IntercomMeters {
  m.gauge('talkers', 'talk sessions open now', [], (g) => g.set(talkers()));
  const talks = m.counter('talks_total', 'talk sessions started', ['proto']);
  const dropped = m.counter('uplink_dropped_samples_total', 'client samples not sent: over the jitter buffer (overflow) or no terminal link yet', ['reason']);
  return {
    talks: { talk: talks.labels('talk'), stomp: talks.labels('talk-stomp') },
    refused: m.counter('talks_refused_total', 'talk sockets refused or closed for a rule (token, not-intercom, busy, fmt, malformed, oversized)', ['reason']),
    uplinkFrames: m.counter('uplink_frames_total', 'audio frames sent to terminals as JT/T 1078 packets'),
    uplinkRefused: m.counter('uplink_refused_total', 'audio frames the terminal link refused (gone, or its send backlog full)'),
    dropped: { overflow: dropped.labels('overflow'), noTerminal: dropped.labels('no-terminal') },
    delay: m.histogram(
      'uplink_delay_seconds',
      "from a client message's arrival to the packet carrying its first sample handed to the terminal's socket",
      DELAY_BUCKETS,
    ),
    downlinkFrames: m.counter('downlink_frames_total', 'terminal audio frames sent to talk clients'),
    downlinkDropped: m.counter(
      'downlink_dropped_total',
      'terminal audio frames not sent to talk clients: their socket backed up, or the frame could not be decoded',
    ),
    malformed: m.counter('malformed_messages_total', 'messages that closed a talk socket as malformed', ['proto']),
    stompErrors: m.counter('stomp_errors_total', 'STOMP ERROR frames sent'),
  };
}
