/**
 * What the soak's actors (terminal slots with their players, API clients) share: the API, the notice ledger, the
 * run's signals, a seeded random source, and a tally of anomalies (things that should not happen, kept by kind with
 * a few examples each for the report).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { NoticeLedger } from './notice-ledger';
import type { SoakApi } from './soak-api';

export class Anomalies {
  private readonly kinds = new Map<string, { count: number; examples: string[] }>();

  note(kind: string, detail: string): void {
    let k = this.kinds.get(kind);
    if (!k) this.kinds.set(kind, (k = { count: 0, examples: [] }));
    k.count++;
    if (k.examples.length < 3) k.examples.push(detail);
  }

  count(kind: string): number {
    return this.kinds.get(kind)?.count ?? 0;
  }

  get total(): number {
    let n = 0;
    for (const k of this.kinds.values()) n += k.count;
    return n;
  }

  lines(): string[] {
    return [...this.kinds.entries()].sort((a, b) => b[1].count - a[1].count).map(([kind, k]) => `${kind}: ${k.count} (e.g. ${k.examples.join('; ')})`);
  }
}

export interface SoakCtx {
  api: SoakApi;
  ledger: NoticeLedger;
  /** the run's deadline (budget, Ctrl-C): past it everything throws */
  deadline: AbortSignal;
  /** the load phase's end: loops finish what they do and return */
  stop: AbortSignal;
  rnd: () => number;
  anomalies: Anomalies;
  /** the callback base an owner's requests are opened with */
  cb(owner: string): string;
  /** a fresh reqId (the soak picks them, see NoticeLedger.opening) */
  newReqId(): string;
  /** the ingest's disconnectGraceMs on the soak's site */
  graceMs: number;
  /** keepIntv of every open, s */
  keepIntv: number;
}

/** Sleeps up to `ms`; returns early (false) when the load phase ends, throws when the run's deadline passed. */
export async function nap(ctx: SoakCtx, ms: number): Promise<boolean> {
  if (ctx.stop.aborted) return false;
  try {
    await sleep(Math.max(0, ms), undefined, { signal: AbortSignal.any([ctx.stop, ctx.deadline]) });
  } catch {
    // aborted: by the stop (fine) or the deadline (checked below)
  }
  if (ctx.deadline.aborted) throw new Error('benchmark aborted: the overall time budget ran out or it was interrupted');
  return !ctx.stop.aborted;
}

export const uniform = (rnd: () => number, lo: number, hi: number): number => lo + (hi - lo) * rnd();

/** events in one interval of a Poisson process with `mean` events per interval (Knuth; fine for small means) */
export function poisson(rnd: () => number, mean: number): number {
  if (!(mean > 0)) return 0;
  if (mean > 30) return Math.max(0, Math.round(mean + Math.sqrt(mean) * Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd())));
  const limit = Math.exp(-mean);
  let k = 0;
  let p = rnd();
  while (p > limit) {
    k++;
    p *= rnd();
  }
  return k;
}
