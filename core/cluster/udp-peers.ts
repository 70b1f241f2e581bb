import * as dgram from 'node:dgram';
import type { Logger } from 'pino';
import type { ConnectionRouter, RouteDecision } from '../../plugin-sdk/cluster';

/** what happened to a peer socket, for the worker's metrics */
export type UdpPeerEvent =
  /** connected to its peer */
  | 'opened'
  /** closed after idleMs without a datagram */
  | 'idle'
  /** closed: the peer also sends other workers' channels */
  | 'shared'
  /** closed on an error (bind, an ICMP error on the connected socket) */
  | 'failed'
  /** not opened: `max` sockets open */
  | 'full'
  /** not opened: descriptors near the process limit (the connection guard's reserve) */
  | 'fds';

/** the process's descriptors, as the connection guard counts them */
export interface UdpPeerFds {
  mayOpen(): boolean;
  opened(): void;
  closed(): void;
}

export interface UdpPeerSocketsOptions {
  type: 'udp4' | 'udp6';
  /** the routed listener's address and port (the primary's socket, bound with SO_REUSEADDR) */
  host: string;
  port: number;
  router: ConnectionRouter;
  /** true when this worker owns the routing key */
  owns(key: string): boolean;
  /** a datagram of this worker's, for the plugin */
  deliver(msg: Buffer, rinfo: dgram.RemoteInfo): void;
  /** a datagram another worker owns, sent back to the primary to be routed */
  reroute(msg: Buffer, rinfo: dgram.RemoteInfo, key: string): void;
  /** peer sockets at most (descriptors); past it peers stay on the primary's path */
  max: number;
  /** a peer socket silent this long is closed; the peer's next datagram goes through the primary again */
  idleMs: number;
  fds?: UdpPeerFds;
  /** datagrams the peer sockets took and delivered here, added to `counts.datagrams` (shared by a worker's listeners) */
  counts?: { datagrams: number };
  log: Logger;
  onEvent?(e: UdpPeerEvent): void;
}

interface Peer {
  sock: dgram.Socket;
  address: string;
  port: number;
  connected: boolean;
  lastSeen: number;
}

/** peer sockets at most per routed listener and worker; the descriptor reserve stops them sooner */
export const UDP_PEER_SOCKETS_MAX = 65_536;
/** a peer silent this long loses its socket (jt1078-ingest counts a UDP source gone after 10 s) */
export const UDP_PEER_IDLE_MS = 30_000;

/**
 * A peer gets a socket once the primary has routed this many of its datagrams here since the last sweep: any terminal
 * pushing media sends dozens a second, while a flood of forged source addresses sends one or two from each, and must
 * not turn into a descriptor per address (the descriptors TCP terminals and players need).
 */
export const UDP_PEER_PROOF = 8;
/** candidates counted at most; a flood past it clears the count (real peers reach the proof again within a second) */
const MAX_CANDIDATES = 4096;

/** a peer whose datagrams belong to several workers is left to the primary this long before a socket is tried again */
const SHARED_RETRY_MS = 60_000;

/**
 * Sockets of this worker's UDP peers on the routed port, each connected to one peer. With several workers a routed UDP
 * port is one socket of the primary's, so every datagram crosses the primary (~12 us of its JS each, and an IPC hop).
 * Linux delivers a datagram to the bound socket that matches it best, and a connected socket (remote address and
 * port set) beats an unconnected one on the same port. So once the primary has routed a peer's datagram here, this
 * worker binds a socket of its own to the same address and port (SO_REUSEADDR, which the primary's socket also
 * sets) and connects it to the peer: the kernel then hands that peer's datagrams to this worker directly, and
 * replies leave from the port the peer talks to, as they do from the primary's socket.
 *
 * What could go wrong, and what happens then:
 * - A peer that sends datagrams of channels other workers own (a terminal multiplexing its channels on one source
 *   port): each datagram is routed again here, and one that is another worker's goes back through the primary; the
 *   peer is then left to the primary (socket closed) for SHARED_RETRY_MS.
 * - Between bind and connect the socket is unconnected, and may take datagrams of other peers: those are routed
 *   the same way (this worker's are delivered, the rest go back through the primary), so none is lost.
 * - A datagram the primary had already read when the socket connected arrives through the primary a little later
 *   than the direct ones after it: UDP gives no order anyway (jt1078-ingest reorders).
 * - Errors on a peer socket (an ICMP port unreachable reported on a connected socket, EMFILE at bind): the socket is
 *   closed and the peer stays on the primary's path. A dead worker's sockets are closed by the kernel, and its
 *   peers' datagrams reach the primary again.
 * - A flood of forged source addresses naming channels: a socket only for a peer with UDP_PEER_PROOF datagrams
 *   between two sweeps, at most `max` sockets, none while descriptors are short, each closed after `idleMs` silent.
 */
export class UdpPeerSockets {
  private readonly peers = new Map<string, Peer>();
  /** datagrams the primary routed here from peers without a socket, since the last sweep */
  private readonly candidates = new Map<string, number>();
  private readonly sharedUntil = new Map<string, number>();
  private readonly sweep: NodeJS.Timeout;
  private closed = false;
  /** peers refused a socket since the last warning, and when that was */
  private refused = 0;
  private warnedAt = -Infinity;

  constructor(private readonly o: UdpPeerSocketsOptions) {
    this.sweep = setInterval(() => this.closeIdle(), Math.max(100, Math.floor(o.idleMs / 4)));
    this.sweep.unref();
  }

  get size(): number {
    return this.peers.size;
  }

  /** a datagram of this peer came through the primary: give it a socket of its own once it has shown it is one */
  seen(address: string, port: number): void {
    const k = peerKey(address, port);
    const p = this.peers.get(k);
    if (p || this.closed) return;
    const until = this.sharedUntil.get(k);
    if (until !== undefined) {
      if (performance.now() < until) return;
      this.sharedUntil.delete(k);
    }
    const n = (this.candidates.get(k) ?? 0) + 1;
    if (n < UDP_PEER_PROOF) {
      if (this.candidates.size >= MAX_CANDIDATES && n === 1) this.candidates.clear();
      this.candidates.set(k, n);
      return;
    }
    this.candidates.delete(k);
    if (this.peers.size >= this.o.max) {
      this.refuse('full');
      return;
    }
    if (this.o.fds && !this.o.fds.mayOpen()) {
      this.refuse('fds');
      return;
    }
    this.open(k, address, port);
  }

  /** one warning a minute at most: the peers still work, through the primary, at its cost */
  private refuse(why: 'full' | 'fds'): void {
    this.o.onEvent?.(why);
    this.refused++;
    const now = performance.now();
    if (now - this.warnedAt < 60_000) return;
    this.o.log.warn(
      { refused: this.refused, open: this.peers.size, max: this.o.max, reason: why },
      why === 'full'
        ? 'UDP peers refused a socket of their own: this listener holds its maximum (their datagrams cross the primary)'
        : 'UDP peers refused a socket of their own: descriptors near the process limit (their datagrams cross the primary)',
    );
    this.warnedAt = now;
    this.refused = 0;
  }

  /** sends on the peer's own socket when it has a connected one; false: use the primary's */
  send(msg: Uint8Array, port: number, address: string, cb?: (err: Error | null) => void): boolean {
    const p = this.peers.get(peerKey(address, port));
    if (!p?.connected) return false;
    p.sock.send(msg, cb);
    return true;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweep);
    for (const k of [...this.peers.keys()]) this.drop(k);
  }

  private open(k: string, address: string, port: number): void {
    const sock = dgram.createSocket({ type: this.o.type, reuseAddr: true });
    const peer: Peer = { sock, address, port, connected: false, lastSeen: performance.now() };
    this.peers.set(k, peer);
    this.o.fds?.opened();
    sock.on('error', (err: NodeJS.ErrnoException) => {
      this.o.log.debug({ peer: `${address}:${port}`, err: err.message, code: err.code }, 'UDP peer socket failed: the peer goes through the primary');
      this.o.onEvent?.('failed');
      this.drop(k);
    });
    sock.on('message', (msg, rinfo) => this.onDirect(k, peer, msg, rinfo));
    sock.bind({ port: this.o.port, address: this.o.host, exclusive: true }, () => {
      if (this.peers.get(k) !== peer) return;
      sock.connect(port, address, () => {
        if (this.peers.get(k) !== peer) return;
        peer.connected = true;
        this.o.onEvent?.('opened');
      });
    });
  }

  private onDirect(k: string, peer: Peer, msg: Buffer, rinfo: dgram.RemoteInfo): void {
    let d: RouteDecision;
    try {
      d = this.o.router(msg, true);
    } catch {
      d = 'any';
    }
    // as on the primary's socket: a datagram that names no stream is junk to a routed listener
    if (typeof d !== 'object') return;
    const fromPeer = rinfo.port === peer.port && rinfo.address === peer.address;
    if (this.o.owns(d.key)) {
      if (fromPeer) peer.lastSeen = performance.now();
      if (this.o.counts) this.o.counts.datagrams++;
      this.o.deliver(msg, rinfo);
      return;
    }
    this.o.reroute(msg, rinfo, d.key);
    // only the peer's own datagrams say it is shared: before connect the socket may take anyone's
    if (peer.connected && fromPeer && this.peers.get(k) === peer) {
      this.o.log.debug({ peer: `${rinfo.address}:${rinfo.port}`, key: d.key }, 'UDP peer sends channels of several workers: it goes through the primary');
      this.o.onEvent?.('shared');
      this.sharedUntil.set(k, performance.now() + SHARED_RETRY_MS);
      this.drop(k);
    }
  }

  private closeIdle(): void {
    const now = performance.now();
    for (const [k, p] of this.peers) {
      if (now - p.lastSeen > this.o.idleMs) {
        this.o.onEvent?.('idle');
        this.drop(k);
      }
    }
    for (const [k, until] of this.sharedUntil) if (now >= until) this.sharedUntil.delete(k);
    this.candidates.clear();
  }

  private drop(k: string): void {
    const p = this.peers.get(k);
    if (!p) return;
    this.peers.delete(k);
    p.connected = false;
    this.o.fds?.closed();
    try {
      p.sock.close();
    } catch {
      /* closed already (an error closed it) */
    }
  }
}

/** a peer's key in the maps (its sockets, candidates, shared peers): one socket per source address and port */
function peerKey(address: string, port: number): string {
  return `${address}|${port}`;
}
