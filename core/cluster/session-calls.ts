import { channelKey } from '../../plugin-sdk/cluster';
import type { Application } from '../../plugin-sdk/http';
import type { Notice } from '../../plugin-sdk/notices';
import { normaliseSim, SIM_PATTERN } from '../../plugin-sdk/sim';
import type { Kernel } from '../kernel';
import { answerByHolder, checkReqIds } from '../sessions/request-ids';
import type { WorkerLink } from './worker-link';
import { aggregateText, scrapeJson, type WorkerMetric } from '../metrics-scrape';
import { METRICS_METHOD } from './retired-counters';

type KeepItem = { reqId: string; keep: boolean };
type CloseItem = { reqId: string; closed: boolean };

/**
 * The worker an open belongs to: the one that owns its terminal, or the one the primary places it on now (every
 * channel of a terminal in one worker); undefined when the body names none (this worker answers the error).
 */
export async function openOwner(link: WorkerLink, body: Record<string, unknown>): Promise<number | undefined> {
  const sim = body.simNo;
  const chan = body.chanId ?? body.channelId;
  if (typeof sim !== 'string' || !SIM_PATTERN.test(sim) || typeof chan !== 'number' || !Number.isInteger(chan)) return undefined;
  return link.place(channelKey(normaliseSim(sim), chan));
}

/** What a worker answers to its siblings. */
export function registerClusterCalls(k: Kernel, link: WorkerLink): void {
  // the primary keeps which worker owns each terminal from what its workers serve (node-claims.ts)
  k.sessions.onStreamOpened((s) => link.held(channelKey(s.normSim, s.chanId), 1));
  k.sessions.onStreamClosed((s) => link.held(channelKey(s.normSim, s.chanId), -1));
  link.handle('open', (a) => {
    const { app, body } = a as { app: Application; body: Record<string, unknown> };
    return k.sessions.open(app, body);
  });
  link.handle('keep', (a) => {
    const { app, reqIds } = a as { app: Application; reqIds: string[] };
    return k.sessions.keep(app, reqIds);
  });
  link.handle('close', (a) => {
    const { app, reqIds } = a as { app: Application; reqIds: string[] };
    return k.sessions.close(app, reqIds);
  });
  link.handle('status', (a) => k.sessions.status((a as { app: Application }).app));
  link.handle('counts', () => ({ requests: k.sessions.requestCount, streams: k.sessions.streamCount }));
  link.handle('health', (): WorkerHealth => ({ worker: link.index, parts: k.health.details() }));
  link.handle(METRICS_METHOD, () => scrapeJson(k.registry));
  link.handle('broadcast', (a) => {
    const { from, plugin, topic, payload } = a as { from: number; plugin: string; topic: string; payload: unknown };
    if (from !== link.index) k.broadcasts.deliver(plugin, topic, payload);
    return true;
  });
  link.handle('emit-notices', (a) => {
    for (const n of a as Notice[]) {
      // a dead worker's requests: gone from the fleet's directory with their notice
      k.fleet?.dir.forget(n.appId, n.payload.reqId);
      k.notices.emit(n);
    }
    return true;
  });
}

interface WorkerHealth {
  worker: number;
  parts: Record<string, { reason: string; since: string }>;
}

/** a degraded part of a multi-worker gateway, as /healthz shows it */
export interface ClusterHealthPart {
  reason: string;
  since: string;
  workers: number[];
}

/** The session API over every worker: each call goes to the worker that holds the channel or the request. */
export class ClusterSessions {
  constructor(
    private readonly k: Kernel,
    private readonly link: WorkerLink,
  ) {}

  async open(app: Application, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const owner = await openOwner(this.link, body);
    if (owner === undefined || owner === this.link.index) return this.k.sessions.open(app, body);
    return this.link.call(owner, 'open', { app, body });
  }

  keep(app: Application, reqIds: unknown): Promise<KeepItem[]> {
    return this.each<KeepItem>(app, reqIds, 'keep');
  }

  close(app: Application, reqIds: unknown): Promise<CloseItem[]> {
    return this.each<CloseItem>(app, reqIds, 'close');
  }

  /** one call per worker that holds some of the ids, answers put back in the caller's order */
  private async each<T extends { reqId: string }>(app: Application, reqIds: unknown, method: 'keep' | 'close'): Promise<T[]> {
    const ids = checkReqIds(reqIds);
    const owners = await this.link.lookup(ids);
    const key = method === 'keep' ? 'keep' : 'closed';
    return answerByHolder(
      ids,
      key,
      (i) => (owners[i] >= 0 ? owners[i] : undefined),
      (w, sub) => this.link.call(w, method, { app, reqIds: sub }),
    ) as unknown as Promise<T[]>;
  }

  async status(app: Application): Promise<unknown[]> {
    const parts = await this.link.callAll<unknown[]>('status', { app });
    return parts.flat();
  }

  /** every worker's metrics, summed per series (prom-client's cluster aggregation) in the Prometheus text format */
  async metrics(): Promise<string> {
    // (with the retired part of dead workers' counters the primary adds: retired-counters.ts)
    const parts = await this.link.callAll<WorkerMetric[]>(METRICS_METHOD, {});
    return aggregateText(parts);
  }

  /**
   * Every worker's degraded parts, merged by part (the earliest one's reason and time, and which workers say so), plus
   * a `workers` part while some worker is not running (restarting after a crash): its channels cannot be served then.
   * Without this a health check saw only the worker its request landed on.
   */
  async health(): Promise<Record<string, ClusterHealthPart>> {
    const answers = await this.link.callAll<WorkerHealth>('health', {});
    const out: Record<string, ClusterHealthPart> = {};
    for (const a of answers.sort((x, y) => x.worker - y.worker)) {
      for (const [part, v] of Object.entries(a.parts)) {
        const o = out[part];
        if (!o) out[part] = { ...v, workers: [a.worker] };
        else {
          o.workers.push(a.worker);
          if (v.since < o.since) Object.assign(o, { reason: v.reason, since: v.since });
        }
      }
    }
    const answered = new Set(answers.map((a) => a.worker));
    const missing = Array.from({ length: this.link.count }, (_, i) => i).filter((i) => !answered.has(i));
    if (missing.length) {
      out.workers = {
        reason: `worker ${missing.join(', ')} not running (restarting): the channels it owns cannot be opened or played until it is back`,
        since: new Date().toISOString(),
        workers: missing,
      };
    }
    return out;
  }

  async counts(): Promise<{ requests: number; streams: number }> {
    const parts = await this.link.callAll<{ requests: number; streams: number }>('counts', {});
    return parts.reduce((a, b) => ({ requests: a.requests + b.requests, streams: a.streams + b.streams }), { requests: 0, streams: 0 });
  }
}
