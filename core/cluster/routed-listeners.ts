/**
 * The routed ports the primary binds for the workers: each TCP or UDP listener a worker asks for is bound once,
 * whatever the number of workers, and its connections and datagrams go to the worker that owns their stream.
 *
 * Why the primary binds them: a terminal's stream must reach the one worker that serves it, and only the process
 * that accepts the connection (or reads the datagram) can choose. TCP connections go to hand-over.ts, which reads
 * their first bytes; datagrams are routed here by the listener's router and sent in batches (udp-batches.ts).
 */
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { RouteDecision } from '../../plugin-sdk/cluster';
import { UDP_RECV_BUFFER, describeListenError } from '../plugin-net';
import type { ConnectionGuard } from '../connection-guard';
import { parseAllowList } from '../address-lists';
import { AddressCaps } from './address-caps';
import type { HandOver } from './hand-over';
import { holdingGuard, type HoldingCaps } from './holding-guard';
import type { Listener } from './listener';
import type { Slot } from './worker-slot';
import type { ToPrimary } from './messages';
import { loadRouter } from './shard';
import { UdpBatches } from './udp-batches';
import type { WorkerPool } from './worker-pool';

export interface RoutedListenersHost {
  pool: WorkerPool;
  handOver: HandOver;
  /** the site's caps on what the primary holds (PrimaryOptions.connections) */
  connections?: HoldingCaps;
  /** the worker that owns a key's terminal; `place`: one nobody owns gets a worker now */
  ownerSlot(key: string, place: boolean): Slot | undefined;
}

export class RoutedListeners {
  private readonly listeners = new Map<string, Listener>();
  /** the caps on connections the primary holds while it reads their first bytes (holding-guard.ts) */
  private readonly guard: ConnectionGuard;

  constructor(private readonly o: RoutedListenersHost) {
    this.guard = holdingGuard(o.connections, o.pool.log, (name, reason, remote) => {
      const l = this.listeners.get(name);
      if (l) this.o.handOver.refused(l, reason, remote);
    });
  }

  /** the listener of that name, once a worker has asked for it */
  get(name: string): Listener | undefined {
    return this.listeners.get(name);
  }

  /** the worker in a slot exited: its connections no longer count against any address's cap */
  workerGone(index: number): void {
    for (const l of this.listeners.values()) l.caps?.workerGone(index);
  }

  /** the port a worker asked for, bound on the first ask; later asks get the same promise */
  listen(m: Extract<ToPrimary, { t: 'listen' }>): Promise<number> {
    const existing = this.listeners.get(m.listener);
    if (existing) return existing.bound;
    const router = loadRouter(m.route);
    // a plugin's router reads terminals' packets: a link nobody's worker owns is placed, and that worker claims it
    const l: Listener = { name: m.listener, proto: m.proto, router, bound: Promise.resolve(0), places: !('builtin' in m.route) };
    if (m.proto === 'tcp' && m.perAddress && m.perAddress.max > 0)
      l.caps = new AddressCaps(m.perAddress.max, parseAllowList(m.perAddress.exempt, 'gateway', 'perAddressExempt'));
    if (m.proto === 'tcp') l.gate = this.guard.gate(m.listener, m.kind ?? 'tcp', 0);
    l.bound = m.proto === 'tcp' ? this.bindTcp(l, m.port, m.host) : this.bindUdp(l, m.port, m.host, m.reuseAddr === true);
    this.listeners.set(m.listener, l);
    // a failed bind is asked again by nobody (boot stops): keep the rejection for the other workers' asks
    return l.bound;
  }

  private bindTcp(l: Listener, port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const srv = net.createServer({ pauseOnConnect: true }, (sock) => this.o.handOver.route(l, sock));
      srv.once('error', (err: NodeJS.ErrnoException) => reject(new Error(describeListenError(err, port, host))));
      srv.listen(port, host, () => {
        srv.removeAllListeners('error');
        srv.on('error', (err) => this.o.pool.log.warn({ listener: l.name, err: err.message }, 'listener error'));
        l.server = srv;
        resolve((srv.address() as net.AddressInfo).port);
      });
    });
  }

  /** `reuseAddr`: workers bind sockets of their peers to this port too (core/cluster/udp-peers.ts) */
  private bindUdp(l: Listener, port: number, host: string, reuseAddr: boolean): Promise<number> {
    return new Promise((resolve, reject) => {
      // terminals' datagrams pass through this one socket until their worker has a socket for them (all of them
      // without udpPeerSockets): room for a burst while the primary is busy
      const sock = dgram.createSocket({ type: host.includes(':') ? 'udp6' : 'udp4', recvBufferSize: UDP_RECV_BUFFER, reuseAddr });
      const batches = new UdpBatches<Slot>((slot, m) => {
        if (slot.worker) this.o.pool.send(slot.worker, { t: 'udp', listener: l.name, ...m });
      });
      l.batches = batches;
      sock.once('error', (err: NodeJS.ErrnoException) => reject(new Error(`${describeListenError(err, port, host)} (UDP)`)));
      sock.on('message', (msg, rinfo) => {
        let d: RouteDecision;
        try {
          d = l.router(msg, true);
        } catch {
          d = 'any';
        }
        // a datagram that names no stream is junk to a routed listener: no worker would know what to do with it
        if (typeof d !== 'object') return;
        const slot = this.o.ownerSlot(d.key, true);
        if (!slot?.ready || !slot.worker) return;
        batches.add(slot, msg, rinfo.address, rinfo.port);
      });
      sock.bind(port, host, () => {
        sock.removeAllListeners('error');
        sock.on('error', (err) => this.o.pool.log.warn({ listener: l.name, err: err.message }, 'UDP listener error'));
        l.udp = sock;
        resolve(sock.address().port);
      });
    });
  }

  /** the guard stops, and every listener closes */
  stop(): void {
    this.guard.stop();
    for (const l of this.listeners.values()) {
      l.server?.close();
      l.udp?.close();
    }
  }

  /** the caps on what the primary holds (its descriptor limit and reserve, each routed TCP listener's cap), for the start line */
  describeConnections(): { fdLimit: number | undefined; fdReserve: number; listeners: Record<string, { maxConnections: number | null }> } {
    const d = this.guard.describe();
    const listeners = Object.fromEntries(Object.entries(d.listeners).map(([name, v]) => [name, { maxConnections: v.maxConnections }]));
    return { fdLimit: d.fdLimit, fdReserve: d.fdReserve, listeners };
  }
}
