import type * as dgram from 'node:dgram';
import type * as net from 'node:net';
import type { Logger } from 'pino';
import { allowListed } from './address-lists';
import type { ListenerLimits } from './listener-limits';
import { FdCount, procFdProbe, type FdProbe } from './fd-probe';
import { addressKey } from './http/login-guard';

/**
 * What a listener is for: the API port ('api') may use half of the descriptor reserve that media and plugin ports
 * ('http' for plugins' HTTP ports, 'tcp' for their raw TCP ports) are refused, so keeps get through a flood.
 */
export type ListenerKind = 'api' | 'http' | 'tcp';
export type RefusalReason = 'address' | 'listener' | 'fds';

interface Window {
  lastLineAt: number;
  /** refusals (or errors) since the last line */
  pending: number;
  byRemote: Map<string, number>;
  fields: Record<string, unknown>;
  msg: string;
  timer?: NodeJS.Timeout;
}

/** addresses counted per window for the summary's top address; a flood from more is summed, not itemised */
const MAX_REMOTES_PER_WINDOW = 1024;

/**
 * One line per kind of event (listener and reason) at once, then at most one per interval saying how many came
 * since: a flood is 20,000 events, and its log must stay a few lines that still count every one.
 */
class RateLimitedLog {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly log: Logger,
    private readonly intervalMs: number,
    private readonly now: () => number,
  ) {}

  note(key: string, msg: string, fields: Record<string, unknown>, remote?: string): void {
    const at = this.now();
    let w = this.windows.get(key);
    if (!w || (!w.timer && at - w.lastLineAt >= this.intervalMs)) {
      this.log.warn(fields, msg);
      if (!w) {
        w = { lastLineAt: at, pending: 0, byRemote: new Map(), fields, msg };
        this.windows.set(key, w);
      }
      w.lastLineAt = at;
      return;
    }
    w.pending++;
    w.fields = fields;
    w.msg = msg;
    if (remote !== undefined && (w.byRemote.has(remote) || w.byRemote.size < MAX_REMOTES_PER_WINDOW)) {
      w.byRemote.set(remote, (w.byRemote.get(remote) ?? 0) + 1);
    }
    if (!w.timer) {
      const win = w;
      win.timer = setTimeout(() => this.flush(win), Math.max(0, win.lastLineAt + this.intervalMs - at));
      win.timer.unref();
    }
  }

  private flush(w: Window): void {
    w.timer = undefined;
    if (w.pending === 0) return;
    let top: { remote: string; n: number } | undefined;
    for (const [remote, n] of w.byRemote) if (!top || n > top.n) top = { remote, n };
    const { remote: _last, ...rest } = w.fields;
    this.log.warn(
      {
        ...rest,
        count: w.pending,
        sinceMs: Math.round(this.now() - w.lastLineAt),
        ...(w.byRemote.size ? { addresses: w.byRemote.size, top } : {}),
      },
      `${w.msg} (repeated)`,
    );
    w.lastLineAt = this.now();
    w.pending = 0;
    w.byRemote.clear();
  }

  /** writes what is pending now, so a stopping gateway's log still counts every refusal */
  stop(): void {
    for (const w of this.windows.values()) {
      if (w.timer) clearTimeout(w.timer);
      this.flush(w);
    }
  }
}

export interface ConnectionGuardOptions {
  maxHttpConnectionsPerAddress: number;
  maxTcpConnectionsPerAddress: number;
  /** 0: half of the descriptors below the reserve */
  maxConnectionsPerListener: number;
  fdReserve: number;
  /** addresses with no per-address cap */
  perAddressExempt: net.BlockList;
  /** the site's listenerLimits by listener name */
  overrides: ReadonlyMap<string, ListenerLimits>;
  log: Logger;
  probe?: FdProbe;
  /** the rate-limited warnings: one at once, then one per interval at most (default 10 s) */
  logIntervalMs?: number;
  /**
   * false: refusals are only passed to onRefused, not logged here (the primary of a multi-worker gateway tells them
   * to a worker, whose guard counts and logs them with its own)
   */
  logRefusals?: boolean;
  onRefused?: (listener: string, reason: RefusalReason, remote: string) => void;
  onListenerError?: (listener: string, code: string) => void;
}

/** One listener's caps and counts. */
export class ListenerGate {
  open = 0;
  private readonly byAddress = new Map<string, number>();

  constructor(
    private readonly guard: ConnectionGuard,
    readonly name: string,
    readonly kind: ListenerKind,
    readonly maxConnections: number,
    /** 0: none */
    readonly maxPerAddress: number,
  ) {}

  /**
   * Admits an accepted socket or resets it at once (RST: no descriptor held, no TIME_WAIT left here). An admitted
   * socket is counted until it closes.
   */
  admit(socket: net.Socket): boolean {
    return this.hold(socket) !== undefined;
  }

  /**
   * admit() for a socket this process may pass on to another (the primary hands connections to workers: the socket
   * then never closes here). Counted until it closes or `release` is called, whichever comes first (release is
   * idempotent); undefined: refused and reset, as admit() does.
   */
  hold(socket: net.Socket): (() => void) | undefined {
    const remote = socket.remoteAddress;
    // gone before it was seen (reset by the peer while queued): nothing to count
    if (remote === undefined) {
      socket.destroy();
      return undefined;
    }
    const key = addressKey(remote);
    const reason = this.guard.verdict(this, key, remote);
    if (reason) {
      socket.on('error', () => undefined);
      socket.resetAndDestroy();
      this.guard.refused(this, reason, remote);
      return undefined;
    }
    this.open++;
    this.byAddress.set(key, (this.byAddress.get(key) ?? 0) + 1);
    this.guard.fdOpened();
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      socket.removeListener('close', release);
      this.open--;
      const n = (this.byAddress.get(key) ?? 1) - 1;
      if (n <= 0) this.byAddress.delete(key);
      else this.byAddress.set(key, n);
      this.guard.fdClosed();
    };
    socket.once('close', release);
    return release;
  }

  fromAddress(key: string): number {
    return this.byAddress.get(key) ?? 0;
  }
}

/**
 * Caps on what clients can open: per address and per listener, and a reserve of file descriptors the media and
 * plugin ports may not touch, so one client (or a flood from many) cannot take the descriptors the API port needs
 * to answer keeps and health checks. Everything refused is closed at once, counted and logged rate-limited.
 *
 * Why a reserve and not only caps: at the descriptor limit Node cannot refuse anything itself. libuv (1.46, in Node
 * 20) answers an accept() that fails with EMFILE/ENFILE by closing its one spare descriptor, accepting and closing
 * every pending connection of that listener, and reopening the spare; it never reports the failure to JavaScript
 * (no 'error' on the server). So at the limit every port, the API's included, sheds every new connection, and if the
 * spare cannot be reopened new connections wait unaccepted until descriptors free up. Staying below the limit is
 * the only way to keep choosing who gets in.
 */
export class ConnectionGuard {
  readonly fdLimit: number | undefined;
  /** the reserve in effect: fdReserve, at most a quarter of the limit; 0 when off or the limit is unknown */
  readonly fdReserve: number;
  private readonly fds: FdCount | undefined;
  private readonly gates: ListenerGate[] = [];
  private readonly log: RateLimitedLog;
  private readonly autoListenerCap: number;

  constructor(private readonly o: ConnectionGuardOptions) {
    const probe = o.probe ?? procFdProbe();
    this.fdLimit = probe.limit();
    this.fdReserve = this.fdLimit === undefined ? 0 : Math.min(o.fdReserve, Math.floor(this.fdLimit / 4));
    this.fds = this.fdLimit !== undefined && this.fdReserve > 0 ? new FdCount(probe, this.fdLimit - 2 * this.fdReserve) : undefined;
    this.autoListenerCap = this.fdLimit === undefined ? Number.MAX_SAFE_INTEGER : Math.max(1, Math.floor((this.fdLimit - this.fdReserve) / 2));
    this.log = new RateLimitedLog(o.log, o.logIntervalMs ?? 10_000, () => performance.now());
  }

  /**
   * The gate of a listener named `name` ("<plugin>.<key>", "gateway.httpPort"). Its caps: the site's listenerLimits
   * entry, else the plugin's own per-address default, else the gateway's for its kind.
   */
  gate(name: string, kind: ListenerKind, pluginPerAddress?: number): ListenerGate {
    const over = this.o.overrides.get(name) ?? {};
    const total = over.maxConnections || this.o.maxConnectionsPerListener || this.autoListenerCap;
    const perAddress =
      over.maxConnectionsPerAddress ?? pluginPerAddress ?? (kind === 'tcp' ? this.o.maxTcpConnectionsPerAddress : this.o.maxHttpConnectionsPerAddress);
    const g = new ListenerGate(this, name, kind, total, perAddress);
    this.gates.push(g);
    return g;
  }

  /**
   * Puts a gate in front of a server's 'connection' listeners (an HTTP server's parser is one): a refused socket
   * never reaches them. Call it once the server has them all, before it listens.
   */
  guardServer(server: net.Server, gate: ListenerGate): void {
    const downstream = server.listeners('connection') as Array<(this: net.Server, s: net.Socket) => void>;
    server.removeAllListeners('connection');
    server.on('connection', (socket: net.Socket) => {
      if (!gate.admit(socket)) return;
      for (const l of downstream) l.call(server, socket);
    });
  }

  /**
   * Errors a bound listener reports: counted and logged rate-limited, and the server is left listening. (On Linux
   * with Node 20 accept failures never get here, see the class comment; other platforms and versions report them.)
   */
  watchErrors(server: net.Server | dgram.Socket, listener: string): void {
    server.on('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? 'unknown';
      this.o.onListenerError?.(listener, code);
      const fdsOut = code === 'EMFILE' || code === 'ENFILE';
      this.log.note(
        `error|${listener}|${code}`,
        fdsOut ? 'listener cannot accept: out of file descriptors (still listening)' : 'listener error (still listening)',
        {
          listener,
          code,
          syscall: err.syscall,
          err: err.message,
        },
      );
    });
  }

  /** why a connection from `key` may not open on `g` now, or undefined */
  verdict(g: ListenerGate, key: string, remote: string): RefusalReason | undefined {
    if (g.maxPerAddress > 0 && g.fromAddress(key) >= g.maxPerAddress && !allowListed(this.o.perAddressExempt, remote)) return 'address';
    if (g.open >= g.maxConnections) return 'listener';
    if (!this.fdsBelowCeiling(g.kind)) return 'fds';
    return undefined;
  }

  /** a refusal made elsewhere (the primary's per-address cap across workers) for the listener named `name` */
  refusedAt(name: string, reason: RefusalReason, remote: string): void {
    const g = this.gateNamed(name);
    if (g) this.refused(g, reason, remote);
  }

  /** the per-address cap of the listener named `name` (0: none, or no such listener) */
  maxPerAddressOf(name: string): number {
    return this.gateNamed(name)?.maxPerAddress ?? 0;
  }

  private gateNamed(name: string): ListenerGate | undefined {
    return this.gates.find((x) => x.name === name);
  }

  refused(g: ListenerGate, reason: RefusalReason, remote: string): void {
    this.o.onRefused?.(g.name, reason, remote);
    if (this.o.logRefusals === false) return;
    const fields: Record<string, unknown> = { listener: g.name, reason, remote };
    let msg: string;
    if (reason === 'address') {
      msg = 'connection refused: this address holds its maximum on the listener';
      fields.limit = g.maxPerAddress;
    } else if (reason === 'listener') {
      msg = 'connection refused: the listener holds its maximum of connections';
      fields.limit = g.maxConnections;
    } else {
      msg =
        g.kind === 'api'
          ? 'connection refused: open file descriptors at the process limit'
          : 'connection refused: open file descriptors near the process limit (the rest is kept for the API port)';
      fields.fdLimit = this.fdLimit;
      fields.fdReserve = this.fdReserve;
    }
    this.log.note(`refused|${g.name}|${reason}`, msg, fields, addressKey(remote));
  }

  /**
   * true while media ports may still take descriptors (the count is below the reserve): for sockets the gateway
   * opens on its own account (a UDP peer's socket in a worker, core/cluster/udp-peers.ts)
   */
  fdsFree(): boolean {
    return this.fdsBelowCeiling('tcp');
  }

  /** the API port may use half of the reserve, the other ports none of it */
  private fdsBelowCeiling(kind: ListenerKind): boolean {
    if (!this.fds || this.fdLimit === undefined) return true;
    const ceiling = this.fdLimit - (kind === 'api' ? Math.ceil(this.fdReserve / 2) : this.fdReserve);
    return this.fds.now(performance.now()) < ceiling;
  }

  fdOpened(): void {
    this.fds?.opened();
  }
  fdClosed(): void {
    this.fds?.closed();
  }

  /** open connections by listener name, for the gauge */
  openByListener(): Map<string, number> {
    const out = new Map<string, number>();
    for (const g of this.gates) out.set(g.name, (out.get(g.name) ?? 0) + g.open);
    return out;
  }

  /** what each listener allows, for the boot log and tests */
  describe(): {
    fdLimit: number | undefined;
    fdReserve: number;
    listeners: Record<string, { maxConnections: number | null; maxConnectionsPerAddress: number | null }>;
  } {
    const listeners: Record<string, { maxConnections: number | null; maxConnectionsPerAddress: number | null }> = {};
    for (const g of this.gates) {
      listeners[g.name] = {
        maxConnections: g.maxConnections >= Number.MAX_SAFE_INTEGER ? null : g.maxConnections,
        maxConnectionsPerAddress: g.maxPerAddress || null,
      };
    }
    return { fdLimit: this.fdLimit, fdReserve: this.fdReserve, listeners };
  }

  /** listenerLimits entries that name no listener of this site (a typo would otherwise cap nothing, silently) */
  unknownOverrides(): string[] {
    const names = new Set(this.gates.map((g) => g.name));
    return [...this.o.overrides.keys()].filter((n) => !names.has(n));
  }

  listenerNames(): string[] {
    return [...new Set(this.gates.map((g) => g.name))];
  }

  stop(): void {
    this.log.stop();
  }
}
