import { f2 } from './gateway-harness';
import { DISTURBED_CORES } from './perf-probes';

/**
 * Two or more bench runs on the same load, alternated round by round: this machine's speed drifts, so only figures
 * from one alternation compare, and the ratio of their sums over the rounds is the figure a note carries.
 */

/** `k` rounds of the named runs, each round in the order given */
export async function alternate<K extends string, R>(k: number, runs: Record<K, () => Promise<R>>): Promise<Array<Record<K, R>>> {
  const rounds: Array<Record<K, R>> = [];
  for (let i = 0; i < k; i++) {
    const round = {} as Record<K, R>;
    for (const name of Object.keys(runs) as K[]) round[name] = await runs[name]();
    rounds.push(round);
  }
  return rounds;
}

/** a figure summed over the rounds */
export function total<R>(rounds: readonly R[], f: (r: R) => number): number {
  return rounds.reduce((n, r) => n + f(r), 0);
}

/** what other processes took in a round's two runs, flagged when either was disturbed */
export function othersNote(a: { othersCores: number }, b: { othersCores: number }): string {
  const disturbed = Math.max(a.othersCores, b.othersCores) > DISTURBED_CORES;
  return `; others ${f2(a.othersCores)} / ${f2(b.othersCores)} cores${disturbed ? ' (DISTURBED)' : ''}`;
}
