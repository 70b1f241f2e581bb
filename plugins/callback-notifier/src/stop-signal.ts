/**
 * "Stop, or this, whichever comes first", for work that must not hold up a stop (a slow resolver).
 *
 * Why not `Promise.race([work, stopping])` with one long-lived `stopping` promise: every race adds a reaction to
 * `stopping`, and a promise that never settles keeps every reaction ever added, each holding the race's own promise
 * and its resolvers. The dispatcher raced once per delivery attempt: a 30-minute soak (test/bench/README.md) found
 * ~15,500 reactions chained on it after 10 minutes and the gateway's live heap growing ~30 MB an hour. Here a race
 * leaves a waiter only until its work settles.
 */
export class StopSignal {
  private fired = false;
  private readonly waiters = new Set<() => void>();

  get stopped(): boolean {
    return this.fired;
  }

  /** races waiting for their work, not yet settled */
  get waiting(): number {
    return this.waiters.size;
  }

  /** The work's outcome, or 'stopped' if the signal fires first (at once if it already has). */
  race<T>(work: Promise<T>): Promise<T | 'stopped'> {
    if (this.fired) return Promise.resolve('stopped');
    return new Promise<T | 'stopped'>((resolve, reject) => {
      const onStop = (): void => resolve('stopped');
      this.waiters.add(onStop);
      work.then(
        (v) => {
          this.waiters.delete(onStop);
          resolve(v);
        },
        (err: unknown) => {
          this.waiters.delete(onStop);
          reject(err);
        },
      );
    });
  }

  fire(): void {
    if (this.fired) return;
    this.fired = true;
    for (const w of this.waiters) w();
    this.waiters.clear();
  }
}
