import type * as net from 'node:net';
import { addressKey } from '../http/login-guard';
import { allowListed } from '../address-lists';

/** where one connection is counted: routing (the primary reads its first bytes), in a worker, or nowhere any more */
export interface CountedConnection {
  readonly key: string;
  at: 'routing' | 'gone' | { slot: number; epoch: number };
}

/**
 * A routed TCP listener's per-address cap (maxHttpConnectionsPerAddress, maxTcpConnectionsPerAddress, a plugin's own,
 * listenerLimits), counted by the primary across workers. Each worker's gate counts only the connections it holds,
 * and the primary deals an address's connections to several workers (by stream, or in turn), so with N workers an
 * address could hold N times its cap. Here an address's connections are counted from accept: while the primary reads
 * their first bytes, then in the worker they were handed to until that worker says they closed (in batches) or dies.
 * Addresses in perAddressExempt are counted but never refused, as in a worker's gate.
 */
export class AddressCaps {
  private readonly routing = new Map<string, number>();
  private readonly bySlot: Array<Map<string, number>> = [];
  /** bumped when a worker dies: what was counted in it before is gone with it */
  private readonly epochs: number[] = [];
  private readonly total = new Map<string, number>();

  constructor(
    readonly max: number,
    private readonly exempt: net.BlockList,
  ) {}

  /** a connection just accepted, counted as routing; undefined: refused, its address is at the cap */
  admit(remote: string): CountedConnection | undefined {
    const key = addressKey(remote);
    if ((this.total.get(key) ?? 0) >= this.max && !allowListed(this.exempt, remote)) return undefined;
    add(this.routing, key, 1);
    add(this.total, key, 1);
    return { key, at: 'routing' };
  }

  /** the connection is handed to worker `slot` (counted there until it says it closed), or gone */
  move(c: CountedConnection, to: number | 'gone'): void {
    if (c.at === 'gone') return;
    if (c.at === 'routing') {
      add(this.routing, c.key, -1);
      add(this.total, c.key, -1);
    } else if (c.at.epoch === (this.epochs[c.at.slot] ?? 0)) {
      this.closed(c.at.slot, c.key);
    }
    if (to === 'gone') {
      c.at = 'gone';
      return;
    }
    c.at = { slot: to, epoch: this.epochs[to] ?? 0 };
    add((this.bySlot[to] ??= new Map()), c.key, 1);
    add(this.total, c.key, 1);
  }

  /** a connection worker `slot` held closed */
  closed(slot: number, key: string): void {
    const m = this.bySlot[slot];
    // a count the worker's death already removed
    if (!m?.has(key)) return;
    add(m, key, -1);
    add(this.total, key, -1);
  }

  /** a worker died: its connections died with it */
  workerGone(slot: number): void {
    this.epochs[slot] = (this.epochs[slot] ?? 0) + 1;
    const m = this.bySlot[slot];
    if (!m) return;
    for (const [key, n] of m) add(this.total, key, -n);
    m.clear();
  }

  /** connections counted for an address */
  of(remote: string): number {
    return this.total.get(addressKey(remote)) ?? 0;
  }
}

function add(m: Map<string, number>, key: string, n: number): void {
  const v = (m.get(key) ?? 0) + n;
  if (v > 0) m.set(key, v);
  else m.delete(key);
}
