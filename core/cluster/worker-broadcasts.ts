import type { Logger } from 'pino';
import type { Workers } from '../../plugin-sdk/plugin';
import type { WorkerLink } from './worker-link';

/**
 * `ctx.workers` of each plugin: this worker's place in the cluster, and broadcasts to the same plugin in the other
 * workers (through the primary). The core's own topics go under the empty plugin name, which no plugin can have.
 * In a single process: count 1, index 0, and a broadcast reaches nobody.
 */
export class WorkerBroadcasts {
  /** handlers by "<plugin>\0<topic>" */
  private readonly handlers = new Map<string, (payload: unknown) => void>();

  constructor(
    private readonly link: WorkerLink | undefined,
    private readonly log: Logger,
  ) {}

  for(plugin: string): Workers {
    const link = this.link;
    return {
      count: link?.count ?? 1,
      index: link?.index ?? 0,
      broadcast: (topic, payload) => {
        if (!link) return;
        link
          .callAll('broadcast', { from: link.index, plugin, topic, payload })
          .catch((err) => this.log.warn({ plugin, topic, err: (err as Error).message }, 'broadcast to the other workers failed'));
      },
      on: (topic, fn) => {
        this.handlers.set(`${plugin}\0${topic}`, fn);
      },
    };
  }

  /** a sibling worker's broadcast, for the plugin it names */
  deliver(plugin: string, topic: string, payload: unknown): void {
    const fn = this.handlers.get(`${plugin}\0${topic}`);
    if (!fn) return;
    try {
      fn(payload);
    } catch (err) {
      this.log.error({ plugin, topic, err }, 'broadcast handler failed');
    }
  }
}
