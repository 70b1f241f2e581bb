/** Polls `cond` (every `everyMs`) until it holds; throws naming `what` once `ms` have passed. */
export async function until(cond: () => boolean, what: string, ms = 20_000, everyMs = 5): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Polls `fn`, which may be async, until it gives a truthy value, and returns that value (`() => list.length >= 2 &&
 * list` waits for the list); throws naming `what` once `ms` have passed.
 */
export async function waitFor<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, ms = 10_000, everyMs = 10): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
