/**
 * "Full jitter" exponential backoff: a uniform delay in [0, min(max, base * 2^(attempt-1))). Spreading retries over
 * the whole window keeps many notices failing at once (a receiver restart) from coming back in lockstep.
 */
export function fullJitterDelay(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

/**
 * A Retry-After header (delta-seconds or an HTTP date) as a delay in ms, or undefined when absent or unreadable.
 * The caller caps it: a receiver must not be able to park a notice for longer than the retry budget.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
