import cluster, { type Worker } from 'node:cluster';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import type { Logger } from 'pino';
import type { RouteDecision } from '../../plugin-sdk/cluster';
import type { Notice } from '../../plugin-sdk/notices';
import { CloseCause, closeReasonOf } from '../../plugin-sdk/sessions';
import { UDP_RECV_BUFFER, describeListenError } from '../plugin-net';
import type { ToPrimary, ToWorker } from './messages';
import { loadRouter } from './shard';
import { NodeClaims } from './node-claims';
import { parseAllowList } from '../gateway-config';
import type { ConnectionGuard } from '../connection-guard';
import { AddressCaps } from './address-caps';
import { HandOver } from './hand-over';
import { holdingGuard, type HoldingCaps } from './holding-guard';
import type { Listener } from './listener';
import { idleSlot, type Slot } from './worker-slot';
import { UdpBatches } from './udp-batches';
import { METRICS_METHOD, RetiredCounters } from './retired-counters';
import { RpcRelay, type PendingRpc } from './rpc-relay';

/** a worker that dies is started again after this, doubling while it keeps dying within a minute, up to 30 s */
const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;

export interface PrimaryOptions {
  workers: number;
  log: Logger;
  /** environment for the workers (the site argument travels in argv) */
  env: NodeJS.ProcessEnv;
  /** node options added to the primary's own for each worker (gc-flags.ts) */
  workerFlags?: string[];
  /**
   * the site's caps on what the primary itself holds (gateway.maxConnectionsPerListener, fdReserve, listenerLimits'
   * maxConnections): connections count from accept until they are handed to a worker. Unset: the defaults (automatic
   * per-listener cap, reserve 256)
   */
  connections?: HoldingCaps;
}

/**
 * The primary of a multi-worker gateway: it runs no plugin. It forks the workers, binds every routed port they ask
 * for (once, whatever the number of workers), reads each connection's first bytes to find the worker that owns its
 * stream and hands the socket over, forwards routed datagrams, relays calls between workers, keeps the directory of
 * request ids (unique across workers; which worker holds which) and, when a worker dies, sends its requests' closed
 * notices through another worker and starts it again.
 */
export class Primary {
  private readonly slots: Slot[] = [];
  private readonly listeners = new Map<string, Listener>();
  /** reqId -> the worker that holds it, its application, and its closed notice should that worker die */
  private readonly directory = new Map<string, { worker: number; appId: string; notice: Notice }>();
  /** open requests per application across workers, for its cap */
  private readonly perApp = new Map<string, number>();
  private readonly rpcs = new RpcRelay();
  private readonly retiredCounters = new RetiredCounters();
  private rr = 0;
  /** connections accepted before every worker had booted */
  private held: Array<() => void> = [];
  private stopping = false;
  private booted = false;
  private bootResolve!: () => void;
  private bootReject!: (err: Error) => void;
  private readonly log: Logger;
  private readonly handOver: HandOver;
  /** which worker owns each terminal: claimed by the worker that serves it, placed when a link or an open asks */
  private readonly claims: NodeClaims;
  /** the caps on connections the primary holds while it reads their first bytes (hand-over.ts holdingGuard) */
  private readonly guard: ConnectionGuard;

  constructor(private readonly o: PrimaryOptions) {
    this.log = o.log;
    this.handOver = new HandOver({
      slots: this.slots,
      log: this.log,
      booted: () => this.booted,
      hold: (go) => this.held.push(go),
      nextReady: () => this.nextReady(),
      send: (w, m, handle, written) => this.send(w, m, handle, written),
      ownerSlot: (key, place) => this.ownerSlot(key, place),
    });
    // what changes goes to every worker (they route forwarded requests and UDP peers by it)
    this.claims = new NodeClaims(o.workers, Date.now, (changes) => {
      for (const s of this.slots) if (s.ready && s.worker) this.send(s.worker, { t: 'owners', changes });
    });
    this.claims.startSweeping();
    this.guard = holdingGuard(o.connections, this.log, (name, reason, remote) => {
      const l = this.listeners.get(name);
      if (l) this.handOver.refused(l, reason, remote);
    });
  }

  /** resolves when every worker has booted; rejects (and stops the others) when one fails to */
  start(): Promise<void> {
    const extra = (this.o.workerFlags ?? []).filter((f) => !process.execArgv.includes(f));
    cluster.setupPrimary({ serialization: 'advanced', execArgv: [...process.execArgv, ...extra] });
    const booted = new Promise<void>((resolve, reject) => {
      this.bootResolve = resolve;
      this.bootReject = reject;
    });
    for (let i = 0; i < this.o.workers; i++) this.slots.push(idleSlot(i, RESTART_MIN_MS));
    // the first worker boots alone: a bad site fails once, with one message, and first-run work (stores, schemas)
    // is done before the others start
    this.fork(this.slots[0]);
    return booted;
  }

  private fork(slot: Slot): void {
    slot.ready = false;
    slot.startedAt = Date.now();
    const w = cluster.fork({ ...this.o.env, JTGW_WORKER_INDEX: String(slot.index), JTGW_WORKER_COUNT: String(this.o.workers) });
    slot.worker = w;
    w.on('message', (m: ToPrimary, handle: unknown) => this.onMessage(slot, w, m, handle));
    w.on('exit', (code, signal) => this.onExit(slot, w, code, signal));
  }

  private onExit(slot: Slot, w: Worker, code: number | null, signal: string | null): void {
    if (slot.worker !== w) return;
    const wasReady = slot.ready;
    slot.ready = false;
    slot.worker = undefined;
    this.retiredCounters.exited(slot.index);
    // its terminals are nobody's now: placed again when they come back
    this.claims.workerGone(slot.index);
    this.failRpcsTo(slot.index);
    for (const l of this.listeners.values()) l.caps?.workerGone(slot.index);
    this.handOver.rehome(slot);
    if (this.stopping) return;
    if (!this.booted) {
      // a boot failure is the site's fault (it printed why): every worker would fail the same way
      this.bootReject(new Error(`worker ${slot.index} exited during boot (code ${code ?? signal})`));
      return;
    }
    this.log.error({ worker: slot.index, code, signal, wasReady }, 'worker died: its streams are lost; closing its requests and starting it again');
    this.orphan(slot.index);
    const quick = Date.now() - slot.startedAt < 60_000;
    const delay = quick ? slot.restartMs : RESTART_MIN_MS;
    slot.restartMs = quick ? Math.min(slot.restartMs * 2, RESTART_MAX_MS) : RESTART_MIN_MS;
    setTimeout(() => {
      if (!this.stopping) this.fork(slot);
    }, delay).unref();
  }

  /** the requests a dead worker held get their closed notices (internalError) from a live worker */
  private orphan(index: number): void {
    const notices: Notice[] = [];
    for (const [reqId, e] of this.directory) {
      if (e.worker !== index) continue;
      this.forget(reqId, e.appId);
      notices.push({
        ...e.notice,
        payload: { ...e.notice.payload, act: 'closed', closeCause: CloseCause.internalError, closeReason: closeReasonOf[CloseCause.internalError] },
        last: true,
      });
    }
    if (notices.length === 0) return;
    const deliver = (attempt: number) => {
      const live = this.slots.find((s) => s.ready && s.worker);
      if (!live) {
        // the only worker was the one that died: its replacement sends them once it is up
        if (attempt < 120) setTimeout(() => deliver(attempt + 1), 500).unref();
        else this.log.error({ requests: notices.length }, 'closed notices of a dead worker could not be sent: no worker came up');
        return;
      }
      this.send(live.worker!, { t: 'rpc-in', id: 0, method: 'emit-notices', args: notices });
      this.log.warn({ worker: index, requests: notices.length, via: live.index }, 'closed notices sent for the requests of a dead worker');
    };
    deliver(0);
  }

  private forget(reqId: string, appId: string): void {
    this.directory.delete(reqId);
    const left = (this.perApp.get(appId) ?? 1) - 1;
    if (left > 0) this.perApp.set(appId, left);
    else this.perApp.delete(appId);
  }

  /**
   * `written`: a handle's message was written (null), or could not be (the worker died a moment ago and its exit is
   * not seen yet; Node then keeps the socket open here, where nothing reads it)
   */
  private send(w: Worker, m: ToWorker, handle?: net.Socket, written?: (err: Error | null) => void): boolean {
    if (!w.isConnected()) return false;
    try {
      if (handle) w.send(m, handle, { keepOpen: false } as never, (err: Error | null) => written?.(err));
      else w.send(m);
      return true;
    } catch (err) {
      this.log.warn({ err: (err as Error).message, t: m.t }, 'message to a worker failed');
      return false;
    }
  }

  private onMessage(slot: Slot, w: Worker, m: ToPrimary, _handle: unknown): void {
    switch (m.t) {
      case 'ready':
        slot.ready = true;
        this.send(w, { t: 'owners', changes: this.claims.snapshot(), all: true });
        if (!this.booted && slot.index === 0) for (const s of this.slots) if (!s.worker) this.fork(s);
        if (!this.booted && this.slots.every((s) => s.ready)) {
          this.booted = true;
          this.bootResolve();
          const held = this.held;
          this.held = [];
          for (const go of held) go();
        }
        return;
      case 'listen':
        this.listen(m).then(
          (port) => this.send(w, { t: 'listened', id: m.id, port }),
          (err: Error) => this.send(w, { t: 'listened', id: m.id, error: err.message }),
        );
        return;
      case 'udp-send': {
        const l = this.listeners.get(m.listener);
        l?.udp?.send(m.msg, m.port, m.address);
        return;
      }
      case 'conns-closed':
        for (const [listener, key] of m.items) this.listeners.get(listener)?.caps?.closed(slot.index, key);
        return;
      case 'udp-route': {
        const to = this.slots[m.to];
        if (to?.ready && to.worker) this.listeners.get(m.listener)?.batches?.add(to, m.msg, m.address, m.port);
        return;
      }
      case 'reserve': {
        const e = this.directory.get(m.reqId);
        if (e) {
          this.send(w, { t: 'reserved', id: m.id, result: e.appId === m.appId ? 'self' : 'other' });
          return;
        }
        const held = this.perApp.get(m.appId) ?? 0;
        if (held >= m.limit) {
          this.send(w, { t: 'reserved', id: m.id, result: 'cap' });
          return;
        }
        this.directory.set(m.reqId, { worker: slot.index, appId: m.appId, notice: m.notice });
        this.perApp.set(m.appId, held + 1);
        this.send(w, { t: 'reserved', id: m.id, result: 'ok' });
        return;
      }
      case 'release': {
        const e = this.directory.get(m.reqId);
        if (e && e.worker === slot.index) this.forget(m.reqId, e.appId);
        return;
      }
      case 'place': {
        const owner = this.ownerSlot(m.key, true);
        this.send(w, { t: 'placed', id: m.id, worker: owner?.index ?? -1 });
        return;
      }
      case 'held':
        this.claims.held(slot.index, m.key, m.delta);
        return;
      case 'reroute':
        this.handOver.routeAgain(this.listeners.get(m.listener), _handle, m);
        return;
      case 'lookup':
        this.send(w, { t: 'looked-up', id: m.id, owners: m.reqIds.map((id) => this.directory.get(id)?.worker ?? -1) });
        return;
      case 'rpc':
        this.relay(slot.index, m);
        return;
      case 'rpc-out': {
        if (m.ok && this.rpcs.get(m.id)?.method === METRICS_METHOD) this.retiredCounters.answered(slot.index, m.value);
        const done = this.rpcs.answer(m.id, slot.index, { ok: m.ok, value: m.value, error: m.error });
        if (done) this.finish(done);
        return;
      }
    }
  }

  /** a call from one worker to another (or to all), relayed; its answer goes back the same way */
  private relay(from: number, m: Extract<ToPrimary, { t: 'rpc' }>): void {
    const targets = m.to === 'all' ? this.slots.filter((s) => s.ready && s.worker) : [this.slots[m.to]].filter((s) => s?.ready && s.worker);
    const fromW = this.slots[from]?.worker;
    if (targets.length === 0) {
      if (fromW) this.send(fromW, { t: 'rpc-reply', id: m.id, ok: false, error: { message: `worker ${String(m.to)} is restarting`, errCode: -3 } });
      return;
    }
    const id = this.rpcs.open(
      from,
      m.id,
      m.method,
      m.to === 'all',
      targets.map((t) => t.index),
    );
    for (const t of targets) {
      if (!this.send(t.worker!, { t: 'rpc-in', id, method: m.method, args: m.args })) {
        const done = this.rpcs.answer(id, t.index, { ok: false, error: { message: `worker ${t.index} is restarting`, errCode: -3 } });
        if (done) this.finish(done);
      }
    }
  }

  private finish(p: PendingRpc): void {
    const w = this.slots[p.from]?.worker;
    if (!w) return;
    if (p.all) {
      // a call to all answers with every worker's result; failed ones are left out (a restarting worker holds nothing)
      const values = p.results.filter((r) => r.ok).map((r) => r.value);
      this.send(w, { t: 'rpc-reply', id: p.fromId, ok: true, value: p.method === METRICS_METHOD ? this.retiredCounters.withRetired(values) : values });
      return;
    }
    const r = p.results[0];
    this.send(w, { t: 'rpc-reply', id: p.fromId, ok: r.ok, value: r.value, error: r.error as never });
  }

  /** calls waiting on a worker that died answer now, as failed */
  private failRpcsTo(index: number): void {
    for (const p of this.rpcs.died(index)) this.finish(p);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // listeners

  private listen(m: Extract<ToPrimary, { t: 'listen' }>): Promise<number> {
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
      const srv = net.createServer({ pauseOnConnect: true }, (sock) => this.handOver.route(l, sock));
      srv.once('error', (err: NodeJS.ErrnoException) => reject(new Error(describeListenError(err, port, host))));
      srv.listen(port, host, () => {
        srv.removeAllListeners('error');
        srv.on('error', (err) => this.log.warn({ listener: l.name, err: err.message }, 'listener error'));
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
        if (slot.worker) this.send(slot.worker, { t: 'udp', listener: l.name, ...m });
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
        const slot = this.ownerSlot(d.key, true);
        if (!slot?.ready || !slot.worker) return;
        batches.add(slot, msg, rinfo.address, rinfo.port);
      });
      sock.bind(port, host, () => {
        sock.removeAllListeners('error');
        sock.on('error', (err) => this.log.warn({ listener: l.name, err: err.message }, 'UDP listener error'));
        l.udp = sock;
        resolve(sock.address().port);
      });
    });
  }

  private up = (i: number): boolean => !!this.slots[i]?.ready && !!this.slots[i].worker;

  /** the worker that owns a key's terminal; `place`: one nobody owns gets a worker now */
  private ownerSlot(key: string, place: boolean): Slot | undefined {
    const w = place ? this.claims.place(key, this.up) : this.claims.ownerOf(key);
    return w === undefined ? undefined : this.slots[w];
  }

  private nextReady(): Slot | undefined {
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[this.rr++ % this.slots.length];
      if (s.ready && s.worker) return s;
    }
    return undefined;
  }

  /** stops the workers (each stops its plugins), then the listeners */
  async stop(limitMs: number): Promise<void> {
    this.stopping = true;
    this.claims.stop();
    this.held = [];
    this.guard.stop();
    for (const l of this.listeners.values()) {
      l.server?.close();
      l.udp?.close();
    }
    const exits = this.slots.map(
      (s) =>
        new Promise<void>((resolve) => {
          const w = s.worker;
          if (!w || w.isDead()) {
            resolve();
            return;
          }
          w.once('exit', () => resolve());
          if (!this.send(w, { t: 'stop' })) w.kill('SIGTERM');
        }),
    );
    const timer = setTimeout(() => {
      for (const s of this.slots) s.worker?.process.kill('SIGKILL');
    }, limitMs);
    await Promise.all(exits);
    clearTimeout(timer);
  }

  /** the caps on what the primary holds (its descriptor limit and reserve, each routed TCP listener's cap), for the start line */
  describeConnections(): { fdLimit: number | undefined; fdReserve: number; listeners: Record<string, { maxConnections: number | null }> } {
    const d = this.guard.describe();
    const listeners = Object.fromEntries(Object.entries(d.listeners).map(([name, v]) => [name, { maxConnections: v.maxConnections }]));
    return { fdLimit: d.fdLimit, fdReserve: d.fdReserve, listeners };
  }

  /** for tests: which worker owns a key's terminal (-1: none) */
  ownerOf(key: string): number {
    return this.claims.ownerOf(key) ?? -1;
  }
}
