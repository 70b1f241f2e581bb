#!/usr/bin/env node
import 'reflect-metadata';
import cluster from 'node:cluster';
import { randomBytes } from 'node:crypto';
import * as os from 'node:os';
import pino from 'pino';
import { Kernel } from './kernel';
import { repoRoot } from './repo-root';
import { BootError, buildConfig } from './config';
import { GatewayConfig } from './gateway-config';
import { parseListenerLimits, type ListenerLimits } from './listener-limits';
import { loadSite } from './site';
import { removeInternalSockets } from './cluster/forwarder';
import { Primary } from './cluster/primary';
import { WorkerLink } from './cluster/worker-link';
import { gcNodeFlags, SEMI_SPACE, setHeapGrowth, singleThreadedGc, SINGLE_THREADED_GC, startedSemiSpaceMB, turnOffPretenuring } from './gc-flags';
import { setWideInlining, WIDE_INLINING_FLAGS } from './jit-flags';

const STOP_LIMIT_MS = 10_000;

function bootFailed(err: unknown): never {
  const msg = err instanceof BootError ? err.message : `unexpected error: ${(err as Error | undefined)?.message ?? String(err)}`;
  process.stderr.write(`boot failed: ${msg}\n`);
  if (!(err instanceof BootError) && process.env.GW_DEBUG) process.stderr.write(`${(err as Error | undefined)?.stack}\n`);
  process.exit(1);
}

function onSignals(stop: (signal: string) => Promise<void>, log: { info(o: object, m: string): void }): void {
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown did not finish within ${STOP_LIMIT_MS / 1000} s; exiting\n`);
      process.exit(1);
    }, STOP_LIMIT_MS);
    timer.unref();
    stop(signal).then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`shutdown failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

/** how many workers the site asks for (0: one per core) */
function workersOf(siteArg: string | undefined): { workers: number; gateway: GatewayConfig; site: string; listenerLimits: Map<string, ListenerLimits> } {
  const site = loadSite(siteArg ?? process.env.GW_SITE, repoRoot);
  const gateway = buildConfig(GatewayConfig, site.gateway, { where: `${site.file}: gateway`, envPrefix: 'GW', env: process.env });
  const listenerLimits = parseListenerLimits(gateway.listenerLimits, `${site.file}: gateway`);
  return { workers: gateway.workers === 0 ? os.availableParallelism() : gateway.workers, gateway, site: site.name, listenerLimits };
}

async function runPrimary(workers: number, gateway: GatewayConfig, siteName: string, listenerLimits: Map<string, ListenerLimits>): Promise<void> {
  const log = pino({ level: gateway.logLevel, base: { site: siteName, role: 'primary' } }, pino.destination({ fd: 1, sync: false }));
  const primary = new Primary({
    workers,
    log,
    workerFlags: gcNodeFlags(gateway.gcHelperThreads, gateway.gcSemiSpaceMB),
    // the caps on connections the primary holds while it reads their first bytes (a worker applies them to its own)
    connections: { maxConnectionsPerListener: gateway.maxConnectionsPerListener, fdReserve: gateway.fdReserve, listenerLimits },
    // JTGW_NODE_EPOCH: this run of the node, shared by its workers (a worker restarted is the same run; the node
    // restarted is a new one, whose last run's requests the fleet closes: core/directory/)
    env: {
      ...process.env,
      JTGW_CLUSTER_ID: String(process.pid),
      JTGW_CLUSTER_SECRET: randomBytes(18).toString('base64url'),
      JTGW_NODE_EPOCH: randomBytes(6).toString('base64url'),
    },
  });
  process.on('exit', () => removeInternalSockets(String(process.pid)));
  // a signal during boot stops the workers booted so far
  onSignals(() => primary.stop(STOP_LIMIT_MS - 1000), log);
  try {
    await primary.start();
  } catch (err) {
    // the worker that failed printed why on the shared stderr; the others stop
    log.error({ err: (err as Error).message }, 'boot failed');
    await primary.stop(2000).catch(() => undefined);
    log.flush();
    process.exit(1);
  }
  log.info({ workers, connections: primary.describeConnections() }, 'gateway started with workers');
}

/** what a single process started by hand lacks of the GC flags its site asks for (they only count at start) */
interface StartFlags {
  singleThreadMissing: boolean;
  /** the semi-space (MB) the process was started with (0: V8's own), when the site asks for another */
  semiSpaceStarted?: number;
}

async function runSingle(siteArg: string | undefined, link?: WorkerLink, flags?: StartFlags): Promise<void> {
  const kernel = new Kernel({
    site: siteArg,
    cluster: link ? { link, id: process.env.JTGW_CLUSTER_ID ?? String(process.ppid), secret: process.env.JTGW_CLUSTER_SECRET ?? '' } : undefined,
  });
  if (link) {
    // asked to stop while booting: nothing of its own is listening yet (the primary holds the ports)
    link.onStop = () => process.exit(0);
    process.on('disconnect', () => process.exit(0));
  }
  try {
    await kernel.start();
  } catch (err) {
    bootFailed(err);
  }
  onSignals(() => kernel.stop(), kernel.log);
  const growth = kernel.gateway.gcHeapGrowthPercent;
  if (growth > 0) {
    setHeapGrowth(growth);
    kernel.log.info(
      { key: 'gateway.gcHeapGrowthPercent', percent: growth },
      `the old generation grows to ${1 + growth / 100} times what a full collection kept before the next`,
    );
  }
  if (!kernel.gateway.gcPretenuring) {
    turnOffPretenuring();
    kernel.log.info(
      { key: 'gateway.gcPretenuring', pretenuring: false },
      "V8's allocation-site pretenuring is off: short-lived objects are not sent to the old generation on a survival guess",
    );
  }
  if (kernel.gateway.wideInlining) {
    // before any media makes the per-frame code hot: TurboFan reads the budgets at each compilation
    setWideInlining();
    kernel.log.info({ key: 'gateway.wideInlining', flags: WIDE_INLINING_FLAGS }, `V8 inlines callees up to ${WIDE_INLINING_FLAGS.join(' ')}`);
  }
  const startCommand = ['node', ...gcNodeFlags(kernel.gateway.gcHelperThreads, kernel.gateway.gcSemiSpaceMB), 'dist/core/main.js <site>'].join(' ');
  if (flags?.semiSpaceStarted !== undefined) {
    const want = kernel.gateway.gcSemiSpaceMB;
    const got = flags.semiSpaceStarted;
    kernel.log.warn(
      { nodeFlag: SEMI_SPACE, key: 'gateway.gcSemiSpaceMB', wanted: want, started: got || 'V8 default' },
      `started with ${got ? `${SEMI_SPACE}=${got}` : `V8's own young generation`} where gateway.gcSemiSpaceMB asks for ${want} MB, which only counts ` +
        `at start (core/gc-flags.ts): start it as ${startCommand} (npm start passes ${SEMI_SPACE}=8), or set gcSemiSpaceMB to ${got}`,
    );
  }
  if (flags?.singleThreadMissing) {
    kernel.log.warn(
      { nodeFlag: SINGLE_THREADED_GC, key: 'gateway.gcHelperThreads' },
      `started without ${SINGLE_THREADED_GC}: V8's GC helper threads share the cores with the event loop and delay frames at load (core/gc-flags.ts); ` +
        `start it as npm start does (${startCommand}), or set gcHelperThreads: true to keep the helpers`,
    );
  }
  if (link) {
    // the primary asks its workers to stop; a worker whose primary is gone (killed) stops by itself
    link.onStop = () => process.kill(process.pid, 'SIGTERM');
    process.removeAllListeners('disconnect');
    process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
    link.ready();
  }
  // One bad packet or plugin bug must not take every vehicle's stream down with it: log and carry on.
  process.on('uncaughtException', (err) => kernel.log.fatal({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => kernel.log.error({ err }, 'unhandled promise rejection'));
}

async function main(): Promise<void> {
  const siteArg = process.argv[2] ?? process.env.GW_SITE;
  if (cluster.isWorker) {
    const link = new WorkerLink(Number(process.env.JTGW_WORKER_INDEX), Number(process.env.JTGW_WORKER_COUNT));
    await runSingle(siteArg, link);
    return;
  }
  let plan: ReturnType<typeof workersOf>;
  try {
    plan = workersOf(siteArg);
  } catch (err) {
    bootFailed(err);
  }
  if (plan.workers > 1) {
    await runPrimary(plan.workers, plan.gateway, plan.site, plan.listenerLimits);
    return;
  }
  const semi = plan.gateway.gcSemiSpaceMB;
  const started = startedSemiSpaceMB();
  await runSingle(siteArg, undefined, {
    singleThreadMissing: !plan.gateway.gcHelperThreads && !singleThreadedGc(),
    semiSpaceStarted: semi > 0 && started !== semi ? started : undefined,
  });
}

void main();
