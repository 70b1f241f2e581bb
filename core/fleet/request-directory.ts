import type { Notice } from '../../plugin-sdk/notices';
import type { RequestDirectory, RequestInfo } from '../sessions/request-ids';
import type { WorkerLink } from '../cluster/worker-link';
import type { Directory } from '../directory/directory';
import { directoryDown } from './directory-down';

/**
 * The request directory a process's sessions use: the fleet's (Redis: ids unique across nodes, caps over the fleet),
 * the primary's (several workers: ids unique across workers, a dead worker's closed notices), both, or none (one
 * process with the in-process directory, whose SessionManager checks ids and caps itself).
 */
export function requestDirectoryFor(link: WorkerLink | undefined, fleet: Directory | undefined): RequestDirectory | undefined {
  const shared = fleet?.kind === 'redis' ? fleet : undefined;
  if (!link && !shared) return undefined;
  const entryOf = (reqId: string, appId: string, notice: Notice, info: RequestInfo) => ({
    reqId,
    appId,
    nodeId: shared!.me.nodeId,
    epoch: shared!.me.epoch,
    worker: shared!.me.worker,
    notice,
    ...info,
  });
  return {
    async reserve(reqId, appId, limit, notice, info) {
      if (shared) {
        // unreachable (or gone mid-call): the open answers -2 saying so, from whichever worker it ran in
        const held = await shared.reserve(entryOf(reqId, appId, notice, info), limit).catch(() => {
          throw directoryDown(shared);
        });
        if (held !== 'ok' || !link) return held;
        // unique across the fleet already; the primary keeps it for a dead worker's notices (the cap is the fleet's)
        const local = await link.reserve(reqId, appId, Infinity, notice).catch((err: Error) => {
          shared.forget(appId, reqId);
          throw err;
        });
        if (local !== 'ok') shared.forget(appId, reqId);
        return local;
      }
      return link!.reserve(reqId, appId, limit, notice);
    },
    release(reqId, appId) {
      shared?.forget(appId, reqId);
      link?.release(reqId);
    },
    kept(appId, reqId, keepDeadline) {
      shared?.touch(appId, [reqId], keepDeadline);
    },
  };
}
