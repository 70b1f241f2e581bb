/** Polls `cond` (every `everyMs`) until it holds; throws naming `what` once `ms` have passed. */
export async function until(cond: () => boolean, what: string, ms = 20_000, everyMs = 5): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
