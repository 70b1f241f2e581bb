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

/**
 * Runs started at once whose measured windows open together: each is given a gate to await just before its window,
 * which opens once every run has reached it (and fails the waiting ones when another run failed before reaching it).
 * Every run is waited for, so none is left tearing down after the first failure is thrown.
 */
export async function together<K extends string, R>(runs: Record<K, (gate: () => Promise<void>) => Promise<R>>): Promise<Record<K, R>> {
  const names = Object.keys(runs) as K[];
  let waiting = names.length;
  let open = (): void => undefined;
  let fail = (_err: unknown): void => undefined;
  const opened = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  opened.catch(() => undefined); // a failure is thrown by the run that had it
  const gate = (): Promise<void> => {
    if (--waiting === 0) open();
    return opened;
  };
  const settled = await Promise.allSettled(
    names.map((name) =>
      runs[name](gate).catch((err: unknown) => {
        fail(new Error(`${name} failed before the window opened: ${(err as Error).message}`));
        throw err;
      }),
    ),
  );
  const out = {} as Record<K, R>;
  for (const [i, s] of settled.entries()) {
    if (s.status === 'rejected') throw s.reason;
    out[names[i]] = s.value;
  }
  return out;
}
