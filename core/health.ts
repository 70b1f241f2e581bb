import type { Logger } from 'pino';
import type { Health } from '../plugin-sdk/plugin';

/**
 * Parts of the gateway that run but not fully (the recorder on a full disk): /healthz still answers 200, since
 * live media is served, with status 'degraded' and, for a reader allowed the details, what and why. A load balancer
 * keeps sending players; a monitor that reads the body sees the reason.
 */
export class HealthState {
  private readonly parts = new Map<string, { reason: string; since: number }>();

  constructor(
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** ctx.health for one plugin: its parts are named `<plugin>` or `<plugin>.<part>` */
  forPlugin(plugin: string): Health {
    const key = (part?: string) => (part ? `${plugin}.${part}` : plugin);
    return {
      degraded: (reason, part) => this.set(key(part), reason),
      ok: (part) => this.clear(key(part)),
    };
  }

  set(key: string, reason: string): void {
    const was = this.parts.get(key);
    if (was?.reason === reason) return;
    this.parts.set(key, { reason, since: was?.since ?? this.now() });
    this.log.warn({ part: key, reason }, 'health: degraded');
  }

  clear(key: string): void {
    const was = this.parts.get(key);
    if (!was) return;
    this.parts.delete(key);
    this.log.info({ part: key, degradedForMs: this.now() - was.since }, 'health: ok again');
  }

  clearPlugin(plugin: string): void {
    for (const k of [...this.parts.keys()]) if (k === plugin || k.startsWith(`${plugin}.`)) this.parts.delete(k);
  }

  get degraded(): boolean {
    return this.parts.size > 0;
  }

  /** part -> {reason, since (ISO)} */
  details(): Record<string, { reason: string; since: string }> {
    const out: Record<string, { reason: string; since: string }> = {};
    for (const [k, v] of this.parts) out[k] = { reason: v.reason, since: new Date(v.since).toISOString() };
    return out;
  }
}
