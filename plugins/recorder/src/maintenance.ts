/**
 * The recorder's maintenance pass: final rows still to write, rows naming no node claimed (a shared catalog), rows an
 * unclean stop left in recording closed from their files, then retention. Passes run one at a time; a caller gets the
 * next pass to start, never one already under way: a write that has just failed needs totals counted after its failure.
 */
import type { Counter } from 'prom-client';
import type { PluginContext } from '../../../plugin-sdk';
import type { NodeScope, RecordCatalog } from './catalog';
import type { RecorderConfig } from './config';
import type { Recording } from './recording';
import { claimUnnamed, recoverUnfinished } from './recovery';
import { applyRetention, type RetentionPolicy } from './retention';

export interface MaintenanceDeps {
  ctx: PluginContext<RecorderConfig>;
  storeRoot: string;
  /** the catalog, once open */
  catalog: () => RecordCatalog | undefined;
  /** recordings in progress */
  active: ReadonlyMap<string, Recording>;
  /** ended recordings whose final row the catalog has not taken yet (settled here, and removed when they are) */
  unsettled: Map<string, Recording>;
  /** other writers share the catalog (gateways on one PostgreSQL, or this gateway's workers) */
  sharedCatalog: boolean;
  metrics: {
    catalogErrors: Counter;
    recovered: Counter<'state'>;
    removed: Counter;
    freed: Counter;
  };
}

export class Maintenance {
  readonly policy: RetentionPolicy;
  // A PostgreSQL catalog may be shared by a fleet of nodes that each keep their own store: this node's passes treat
  // only its own rows (those naming its apiBase) and those naming no node whose file its store holds (claimed at
  // the first pass). An SQLite catalog is this node's alone, and its store holds every file it lists, whatever
  // apiBase its rows name (one that changed, say): its passes treat every row.
  private readonly node: NodeScope | undefined;
  private claimed: boolean;
  private passes: Promise<unknown> = Promise.resolve();
  private nextPass: Promise<number> | undefined;

  constructor(private readonly d: MaintenanceDeps) {
    const cfg = d.ctx.config;
    this.policy = {
      ...(cfg.maxAgeDays > 0 ? { maxAgeDays: cfg.maxAgeDays } : {}),
      ...(cfg.maxTotalBytes > 0 ? { maxTotalBytes: cfg.maxTotalBytes } : {}),
    };
    this.node = cfg.postgresUrl ? { apiBase: d.ctx.site.apiBase } : undefined;
    this.claimed = !this.node;
  }

  /** The next pass to start (shared by every caller until it starts); the bytes it freed on disk. */
  run(): Promise<number> {
    if (this.nextPass) return this.nextPass;
    const p = this.passes.then(() => {
      this.nextPass = undefined;
      return this.pass();
    });
    this.nextPass = p;
    this.passes = p;
    return p;
  }

  /** resolves once the passes started so far are over */
  idle(): Promise<unknown> {
    return this.passes;
  }

  private async pass(): Promise<number> {
    const { ctx, storeRoot, active, unsettled, metrics: m } = this.d;
    const cat = this.d.catalog();
    if (!cat) return 0;
    const node = this.node;
    let freed = 0;
    try {
      for (const rec of [...unsettled.values()]) if (await rec.settle()) unsettled.delete(rec.reqId);
      if (!this.claimed) {
        const c = await claimUnnamed(cat, storeRoot, node!);
        for (const e of c.errors)
          ctx.log.error({ reqId: e.reqId, err: e.message }, 'could not look for the file of a row naming no node; will retry at the next pass');
        this.claimed = c.errors.length === 0;
        if (c.claimed || c.left)
          ctx.log.info(
            { claimed: c.claimed, left: c.left, apiBase: node!.apiBase },
            'rows naming no node (catalogued before api_base): those whose file is in this store now name this node',
          );
      }
      const rec = await recoverUnfinished(cat, storeRoot, {
        now: new Date(ctx.clock.now()),
        // other writers of the catalog: gateways sharing a PostgreSQL one, or this gateway's other workers (one
        // SQLite file for all), whose live recordings this worker cannot see
        quietMs: this.d.sharedCatalog ? ctx.config.orphanQuietSec * 1000 : 0,
        // a row whose final update is pending is ours: recovery would close it as 'done' from its file
        isActive: (id) => active.has(id) || unsettled.has(id),
        node,
      });
      for (const r of rec.recovered) {
        m.recovered.inc({ state: r.state });
        ctx.log.warn(
          { reqId: r.reqId, state: r.state, sz: r.sz, truncated: r.truncated || undefined },
          'closed a recording left unfinished by an unclean stop',
        );
      }
      for (const e of rec.errors) ctx.log.error({ reqId: e.reqId, err: e.message }, 'could not examine an unfinished recording; will retry');
      const policy = this.policy;
      if (policy.maxAgeDays !== undefined || policy.maxTotalBytes !== undefined) {
        let uncataloguedBytes = 0;
        for (const a of active.values()) uncataloguedBytes += a.uncataloguedBytes;
        for (const u of unsettled.values()) uncataloguedBytes += u.uncataloguedBytes;
        const r = await applyRetention(cat, storeRoot, policy, { now: new Date(ctx.clock.now()), uncataloguedBytes, node });
        freed = r.freedBytes + (r.unlinkedBytes ?? 0);
        if (r.removed.length) {
          m.removed.inc(r.removed.length);
          m.freed.inc(r.freedBytes);
          ctx.log.info({ removed: r.removed.length, freedBytes: r.freedBytes, oldest: r.removed[0]?.reqId }, 'retention removed records');
        }
        if (r.unlinkedBytes) m.freed.inc(r.unlinkedBytes);
        if (r.error) ctx.log.error({ reqId: r.error.reqId, err: r.error.message, unlinkedBytes: r.unlinkedBytes }, 'retention could not finish; will retry');
      }
    } catch (err) {
      m.catalogErrors.inc();
      ctx.log.error({ err: (err as Error).message }, 'recorder maintenance failed; will retry');
    }
    return freed;
  }
}
