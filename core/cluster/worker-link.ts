import type { RemoteInfo } from 'node:dgram';
import type { Socket } from 'node:net';
import { ErrCode, GatewayError, type ErrCodeValue } from '../../plugin-sdk/errors';
import type { Notice } from '../../plugin-sdk/notices';
import type { ListenerKind, RefusalReason } from '../connection-guard';
import type { RouteSpec, ToPrimary, ToWorker, WireError } from './messages';
import { simOf } from './node-claims';

type RpcHandler = (args: unknown) => unknown;

/** an error as it crosses to another worker: a GatewayError keeps its code, status and message */
export function toWire(err: unknown): WireError {
  if (err instanceof GatewayError) return { message: err.message, errCode: err.errCode, status: err.httpStatus };
  return { message: (err as Error | undefined)?.message ?? String(err) };
}

export function fromWire(e: WireError | undefined): Error {
  if (e?.errCode !== undefined) return new GatewayError(e.errCode as ErrCodeValue, e.message, e.status);
  return new GatewayError(ErrCode.EXECUTION_ERROR, 'Internal error.');
}

/**
 * A worker's side of the cluster: asks the primary to bind routed ports and receives their connections and
 * datagrams, calls other workers, and keeps request ids unique across workers through the primary's directory.
 */
export class WorkerLink {
  private seq = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly onConn = new Map<string, (sock: Socket, head: Buffer, replayed: boolean) => void>();
  private readonly onUdp = new Map<string, (msg: Buffer, rinfo: RemoteInfo) => void>();
  private readonly handlers = new Map<string, RpcHandler>();
  /** SIM -> the worker that owns it, as the primary tells (node-claims.ts) */
  private readonly owners = new Map<string, number>();
  /** set by main: what a 'stop' from the primary does */
  onStop: () => void = () => undefined;
  /**
   * set by the kernel: connections the primary refused, to count and log, and why: their address's cap across
   * workers, or the primary's own per-listener cap or descriptor reserve (messages.ts)
   */
  onRefused: (listener: string, remotes: string[], more: number, reason: RefusalReason) => void = () => undefined;
  private closedConns: Array<[string, string]> = [];

  constructor(
    readonly index: number,
    readonly count: number,
  ) {
    process.on('message', (m: ToWorker, handle: unknown) => this.onMessage(m, handle as Socket | undefined));
  }

  /** the worker that owns a routing key's terminal, as the primary last told (node-claims.ts); undefined: none */
  ownerOf(key: string): number | undefined {
    return this.owners.get(simOf(key));
  }

  /** the worker that owns a routing key's terminal, placed now by the primary if none does */
  async place(key: string): Promise<number> {
    const w = await this.ask<number>((id) => ({ t: 'place', id, key }));
    if (w < 0) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'No worker of the gateway is running; retry.');
    return w;
  }

  /**
   * Gives a connection of a 'late' listener to the primary, for the worker of `key` (placed now if nobody owns it and
   * `place`), with the bytes read from it here. The socket is this worker's no more: Node closes it here once sent.
   */
  reroute(listener: string, sock: Socket, key: string, place: boolean, replay: Buffer): boolean {
    if (!process.connected) return false;
    try {
      process.send!({ t: 'reroute', listener, key, place, replay } satisfies ToPrimary, sock, { keepOpen: false } as never);
      return true;
    } catch {
      return false;
    }
  }

  /** this worker opened (+1) or closed (-1) a stream of a routing key's terminal: the primary keeps its claim */
  held(key: string, delta: 1 | -1): void {
    this.post({ t: 'held', key, delta });
  }

  private post(m: ToPrimary): void {
    if (process.connected) process.send!(m);
  }

  private ask<T>(build: (id: number) => ToPrimary): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      if (!process.connected) {
        reject(new GatewayError(ErrCode.EXECUTION_ERROR, 'The gateway is stopping.'));
        return;
      }
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      process.send!(build(id));
    });
  }

  private settle(id: number, ok: boolean, value: unknown, error?: WireError | string): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if (ok) w.resolve(value);
    else w.reject(typeof error === 'string' ? new Error(error) : fromWire(error));
  }

  private onMessage(m: ToWorker, handle: Socket | undefined): void {
    switch (m.t) {
      case 'listened':
        this.settle(m.id, m.error === undefined, m.port, m.error);
        return;
      case 'reserved':
        this.settle(m.id, true, m.result);
        return;
      case 'looked-up':
        this.settle(m.id, true, m.owners);
        return;
      case 'placed':
        this.settle(m.id, true, m.worker);
        return;
      case 'owners':
        if (m.all) this.owners.clear();
        for (const [sim, w] of m.changes) {
          if (w < 0) this.owners.delete(sim);
          else this.owners.set(sim, w);
        }
        return;
      case 'rpc-reply':
        this.settle(m.id, m.ok, m.value, m.error);
        return;
      case 'conn': {
        const h = this.onConn.get(m.listener);
        if (!handle) return;
        if (!h) {
          handle.destroy();
          return;
        }
        h(handle, Buffer.from(m.head.buffer, m.head.byteOffset, m.head.byteLength), m.replayed === true);
        return;
      }
      case 'udp': {
        const h = this.onUdp.get(m.listener);
        if (!h) return;
        let at = m.data.byteOffset;
        for (let i = 0; i < m.sizes.length; i++) {
          const size = m.sizes[i];
          const address = m.addresses[i];
          h(Buffer.from(m.data.buffer, at, size), { address, port: m.ports[i], family: address.includes(':') ? 'IPv6' : 'IPv4', size });
          at += size;
        }
        return;
      }
      case 'refused':
        this.onRefused(m.listener, m.remotes, m.more, m.reason);
        return;
      case 'rpc-in':
        void this.serve(m.id, m.method, m.args);
        return;
      case 'stop':
        this.onStop();
        return;
    }
  }

  private async serve(id: number, method: string, args: unknown): Promise<void> {
    const h = this.handlers.get(method);
    try {
      if (!h) throw new Error(`no handler for ${method}`);
      const value = await h(args);
      if (id) this.post({ t: 'rpc-out', id, ok: true, value });
    } catch (err) {
      if (id) this.post({ t: 'rpc-out', id, ok: false, error: toWire(err) });
    }
  }

  /** what this worker answers when another calls `method` */
  handle(method: string, fn: RpcHandler): void {
    this.handlers.set(method, fn);
  }

  /** calls `method` on another worker (its errors come back as GatewayErrors) */
  call<T>(to: number, method: string, args: unknown): Promise<T> {
    if (to === this.index) {
      const h = this.handlers.get(method);
      if (!h) return Promise.reject(new Error(`no handler for ${method}`));
      return Promise.resolve(h(args) as T);
    }
    return this.ask<T>((id) => ({ t: 'rpc', id, to, method, args }));
  }

  /** calls `method` on every live worker, this one included; the results of those that answered */
  callAll<T>(method: string, args: unknown): Promise<T[]> {
    return this.ask<T[]>((id) => ({ t: 'rpc', id, to: 'all', method, args }));
  }

  /**
   * binds (in the primary) a routed listener; its connections or datagrams for this worker come to the handler.
   * `perAddress`: the listener's per-address cap, which the primary counts across workers (report closes: connClosed);
   * `kind`: what the listener is for (the primary's share of its descriptor reserve)
   */
  listenTcp(
    listener: string,
    port: number,
    host: string,
    route: RouteSpec,
    perAddress: { max: number; exempt: string[] } | undefined,
    onConn: (sock: Socket, head: Buffer, replayed: boolean) => void,
    kind: ListenerKind = 'tcp',
  ): Promise<number> {
    this.onConn.set(listener, onConn);
    return this.ask<number>((id) => ({ t: 'listen', id, listener, proto: 'tcp', port, host, route, perAddress, kind }));
  }

  /** a connection of a capped listener closed here: told to the primary with the others of the next 10 ms */
  connClosed(listener: string, addressKey: string): void {
    if (this.closedConns.push([listener, addressKey]) > 1) return;
    setTimeout(() => {
      const items = this.closedConns;
      this.closedConns = [];
      this.post({ t: 'conns-closed', items });
    }, 10).unref();
  }

  /** `reuseAddr`: the primary's socket lets workers bind peers' own sockets to its port (udp-peers.ts) */
  listenUdp(
    listener: string,
    port: number,
    host: string,
    route: RouteSpec,
    reuseAddr: boolean,
    onMsg: (msg: Buffer, rinfo: RemoteInfo) => void,
  ): Promise<number> {
    this.onUdp.set(listener, onMsg);
    return this.ask<number>((id) => ({ t: 'listen', id, listener, proto: 'udp', port, host, route, reuseAddr }));
  }

  /** a datagram a peer socket of this worker took that another worker owns: the primary passes it on */
  udpReroute(listener: string, to: number, msg: Uint8Array, address: string, port: number): void {
    this.post({ t: 'udp-route', listener, to, msg, address, port });
  }

  /** a datagram out of a routed UDP listener's socket (the one the peer talks to) */
  udpSend(listener: string, msg: Uint8Array, port: number, address: string): void {
    this.post({ t: 'udp-send', listener, msg, port, address });
  }

  /** takes a request id for this worker; 'self'/'other': held for the same/another application; 'cap': the application is at its limit */
  reserve(reqId: string, appId: string, limit: number, notice: Notice): Promise<'ok' | 'self' | 'other' | 'cap'> {
    return this.ask((id) => ({ t: 'reserve', id, reqId, appId, limit, notice }));
  }

  release(reqId: string): void {
    this.post({ t: 'release', reqId });
  }

  /** the worker holding each request id, -1 for none */
  lookup(reqIds: string[]): Promise<number[]> {
    return this.ask((id) => ({ t: 'lookup', id, reqIds }));
  }

  ready(): void {
    this.post({ t: 'ready' });
  }
}
