/**
 * Liveness of UDP readers across workers.
 *
 * With several workers the RTP and RTCP ports are one socket that every worker reads (Node's cluster shares an
 * unrouted UDP handle), so a datagram from a reader lands on whichever worker the kernel wakes, not necessarily the
 * one holding the reader's session. Nothing in a receiver report or a NAT keep-alive names a stream to route it by
 * (an empty RR has no report block at all), and a session whose only sign of life is its reports (RFC 2326: sessions
 * outlive their connection; live555-based players keep UDP sessions alive with RTCP alone) would time out on its
 * worker while its reports were being read by another.
 *
 * So a worker that hears a peer it holds no session for passes the peer's address to the others, and the one that
 * holds it counts it as heard. Addresses are batched (one message per `PEER_BATCH_MS` at most, each address once),
 * and a batch holds at most `PEER_BATCH_MAX` of them: datagrams from unknown addresses are anyone's to send, and a
 * flood of them must not become a flood of messages between workers.
 */
import { BatchedBroadcast } from '../../../plugin-sdk';
import type { Clock } from '../../../plugin-sdk';
import type { Workers } from '../../../plugin-sdk';

/** well inside any session timeout */
const PEER_BATCH_MS = 100;
const PEER_BATCH_MAX = 1024;
/** "host:port", an IPv6 host included */
const PEER_MAX_LENGTH = 64;

export function udpPeerRelay(o: {
  workers: Workers;
  clock: Clock;
  /** peers another worker heard: refresh the sessions this worker holds for them */
  heard: (peers: readonly string[]) => void;
  relayed: (n: number) => void;
  dropped: () => void;
}): BatchedBroadcast {
  return new BatchedBroadcast({
    workers: o.workers,
    topic: 'udp-peers-heard',
    clock: o.clock,
    batchMs: PEER_BATCH_MS,
    maxBatch: PEER_BATCH_MAX,
    maxItemLength: PEER_MAX_LENGTH,
    distinct: true,
    received: o.heard,
    sent: o.relayed,
    dropped: o.dropped,
  });
}
