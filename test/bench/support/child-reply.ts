/** One request to a forked helper process (players, probes) and its reply. */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/**
 * Sends `msg` to `child` and waits for the message `pick` settles on: `{ ok }` resolves, `{ err }` rejects, undefined
 * keeps waiting. Rejects when the child exits, after `timeoutMs` (with `timeoutText`) or on the signal; the listeners
 * are removed whichever comes first. `who` names the child in the errors.
 */
export function replyFrom<M, T>(
  child: ChildProcess,
  msg: unknown,
  pick: (m: M) => { ok: T } | { err: Error } | undefined,
  o: { who: string; timeoutMs: number; timeoutText: string; signal: AbortSignal },
): Promise<T> {
  const reply = new Promise<T>((resolve, reject) => {
    const onMsg = (m: M) => {
      const r = pick(m);
      if (r === undefined) return;
      if ('ok' in r) done(() => resolve(r.ok));
      else done(() => reject(r.err));
    };
    const onExit = (code: number | null) => done(() => reject(new Error(`${o.who} exited (code ${code})`)));
    const timer = setTimeout(() => done(() => reject(new Error(`${o.who}: ${o.timeoutText}`))), o.timeoutMs);
    const onAbort = () => done(() => reject(o.signal.reason instanceof Error ? o.signal.reason : new Error('aborted')));
    const done = (f: () => void) => {
      clearTimeout(timer);
      child.off('message', onMsg);
      child.off('exit', onExit);
      o.signal.removeEventListener('abort', onAbort);
      f();
    };
    child.on('message', onMsg);
    child.once('exit', onExit);
    o.signal.addEventListener('abort', onAbort, { once: true });
  });
  child.send(msg as never);
  return reply;
}

/** stops a helper process: SIGTERM, then SIGKILL after 5 s; resolves once it has exited */
export async function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = once(c, 'exit');
  c.kill('SIGTERM');
  const t = setTimeout(() => c.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}
