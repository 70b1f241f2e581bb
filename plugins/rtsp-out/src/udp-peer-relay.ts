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
 * holds it counts it as heard. Addresses are batched (one broadcast per `batchMs` at most), so the cost is one small
 * message per batch however many datagrams came, and a batch holds at most `maxBatch` distinct peers: datagrams from
 * unknown addresses are anyone's to send, and a flood of them must not become a flood of messages between workers.
 */
import type { Cancel, Clock } from '../../../plugin-sdk/clock';
import type { Workers } from '../../../plugin-sdk/plugin';

const TOPIC = 'udp-peers-heard';

export interface UdpPeerRelayOptions {
  workers: Workers;
  clock: Clock;
  /** how long unknown peers are gathered before they go to the other workers */
  batchMs: number;
  /** distinct peers in one batch; more are dropped (and counted) */
  maxBatch: number;
  /** peers another worker heard: refresh the sessions this worker holds for them */
  heard(peers: readonly string[]): void;
  /** `n` peers were passed to the other workers */
  relayed(n: number): void;
  /** a peer was not passed on: the batch was full */
  dropped(): void;
}

export class UdpPeerRelay {
  private pending = new Set<string>();
  private cancel: Cancel | undefined;

  constructor(private readonly o: UdpPeerRelayOptions) {
    if (o.workers.count > 1) o.workers.on(TOPIC, (payload) => this.onSibling(payload));
  }

  /** a datagram from `peer` ("host:port") that this worker holds no session for */
  unknown(peer: string): void {
    if (this.o.workers.count <= 1 || this.pending.has(peer)) return;
    if (this.pending.size >= this.o.maxBatch) {
      this.o.dropped();
      return;
    }
    this.pending.add(peer);
    this.cancel ??= this.o.clock.setTimeout(() => this.flush(), this.o.batchMs);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
    this.pending.clear();
  }

  private flush(): void {
    this.cancel = undefined;
    if (this.pending.size === 0) return;
    const peers = [...this.pending];
    this.pending.clear();
    this.o.workers.broadcast(TOPIC, peers);
    this.o.relayed(peers.length);
  }

  private onSibling(payload: unknown): void {
    // a sibling's message, but still checked: its shape is all this code relies on
    if (!Array.isArray(payload)) return;
    const peers = payload.slice(0, this.o.maxBatch).filter((p): p is string => typeof p === 'string' && p.length <= 64);
    if (peers.length) this.o.heard(peers);
  }
}
