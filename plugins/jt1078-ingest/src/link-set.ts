/**
 * The open terminal links, and per listener what the closed ones carried: the listener_* gauges count since start,
 * so a link's totals are folded into its listener's when it closes rather than lost with it.
 */
import type { LinkTotals } from './link-totals';
import type { TerminalLink } from './terminal-link';

export class TerminalLinkSet {
  private readonly open = new Set<TerminalLink>();
  /** per listener: what its closed links carried */
  private readonly closedTotals = new Map<string, LinkTotals>();

  get size(): number {
    return this.open.size;
  }

  add(link: TerminalLink): void {
    this.open.add(link);
  }

  /** the link closed: it leaves the set, its totals stay with its listener */
  closed(link: TerminalLink): void {
    this.open.delete(link);
    const t = this.closedTotals.get(link.listener);
    const add = link.totals();
    if (!t) this.closedTotals.set(link.listener, add);
    else for (const k of Object.keys(add) as Array<keyof LinkTotals>) t[k] += add[k];
  }

  /** one of the totals per listener, open and closed links together */
  sumByListener(pick: (t: LinkTotals) => number): Map<string, number> {
    const sum = new Map<string, number>();
    for (const [k, t] of this.closedTotals) sum.set(k, pick(t));
    for (const l of this.open) sum.set(l.listener, (sum.get(l.listener) ?? 0) + pick(l.totals()));
    return sum;
  }

  closeAll(reason: string): void {
    for (const link of [...this.open]) link.close(reason);
  }
}
