/**
 * The soak's command line (kept apart from soak.ts so it is unit-tested without loading the run's machinery).
 */
import { BenchArgs } from './support/bench-args';

export interface SoakOptions {
  minutes: number;
  terminals: number;
  clients: number;
  mbps: number;
  /** the ingest's disconnectGraceMs on the soak's site */
  graceMs: number;
  /** keepIntv of every open, s */
  keepIntv: number;
  /** terminal drops per terminal per minute, and the share of them that stay away past the grace */
  terminalChurn: number;
  longShare: number;
  /** player departures per player per minute */
  playerChurn: number;
  /** the callback outage: start (s after the load is up), length (s), how the receiver is down */
  outageAt: number;
  outageSeconds: number;
  outageMode: 'refuse' | '503';
  /** the notifier's retryForMs and maxQueuePerHost on the soak's site */
  retryForMs: number;
  maxQueue: number;
  reportSeconds: number;
  /** growth is judged on samples from this many seconds after the load is up */
  warmupSeconds: number;
  rssMBPerHour: number;
  rssMinRiseMB: number;
  fdSlack: number;
  /** API clients' cycle: requests opened (1..maxOpen), hold (s), think (s), share on SIMs nobody pushes */
  maxOpen: number;
  holdMin: number;
  holdMax: number;
  thinkMin: number;
  thinkMax: number;
  idleShare: number;
  seed: number;
  pin: boolean;
  keepDir: boolean;
  nodeOpts: string[];
}

export const USAGE = `usage: npm run bench -- soak [--minutes M] [--terminals N] [--clients N] [--mbps X] [--grace-ms MS] [--keep-intv S]
                      [--terminal-churn R] [--long-share F] [--player-churn R] [--outage-at S] [--outage-seconds S]
                      [--outage-mode refuse|503] [--retry-for-ms MS] [--max-queue N] [--report-seconds S] [--warmup-seconds S]
                      [--rss-mb-per-hour X] [--rss-min-rise-mb X] [--fd-slack N] [--max-open N] [--hold MIN,MAX]
                      [--think MIN,MAX] [--idle-share F] [--seed N] [--pin] [--keep-dir] [--node-opt OPT]...
  --minutes M          length of the load (default 30)
  --terminals N        simulated terminals, each with its holding request and one HTTP-FLV player (default 500)
  --clients N          API clients, each its own application, in open/keep/status/close loops (default 200)
  --mbps X             rate per terminal (default 1)
  --grace-ms MS        the ingest's disconnectGraceMs on the soak's site (default 5000)
  --keep-intv S        keepIntv of every open (default 60; clients and the keeper keep every third of it)
  --terminal-churn R   link drops per terminal per minute (default 0.02)
  --long-share F       share of drops that stay away past the grace (default 0.3)
  --player-churn R     player departures per player per minute (default 0.05)
  --outage-at S        the callback receiver goes down S seconds into the load (default a third of the run)
  --outage-seconds S   and stays down this long (default 60, at most a quarter of the run; must leave 35 s of the budget)
  --outage-mode M      refuse (port closed, open connections cut) or 503 (answers 503) (default refuse)
  --retry-for-ms MS    the notifier's retry budget on the soak's site (default 120000, its default)
  --max-queue N        the notifier's maxQueuePerHost (default 100000: an outage must not overflow it, see README)
  --report-seconds S   a report line every S seconds (default 60; 30 for runs of 5 minutes or less)
  --warmup-seconds S   growth is judged from S seconds into the load (default a fifth of the run, at most 300)
  --rss-mb-per-hour X  RSS slope above which (with the rise below) memory is said to leak (default 50)
  --rss-min-rise-mb X  rise from the first to the last quarter of the samples a leak must also show (default 20)
  --fd-slack N         descriptors the gateway may hold idle at the end beyond its idle count at the start (default 16)
  --max-open N         requests a client opens per cycle, 1..N (default 3)
  --hold MIN,MAX       seconds a cycle keeps its requests (default 5,45; under the site's open and consumption timeouts)
  --think MIN,MAX      seconds between cycles (default 1,5)
  --idle-share F       share of clients' opens on SIMs no terminal pushes (default 0.2)
  --seed N             seed of the churn and the clients' choices (default 1)
  --pin                pin the gateway to core 0 and this process to core 1 (default: unpinned)
  --keep-dir           keep the scratch directory (site file, gateway log)
  --node-opt OPT       a node option for the gateway process`;

export function parseSoakArgs(args: string[]): SoakOptions {
  const o: SoakOptions = {
    minutes: 30,
    terminals: 500,
    clients: 200,
    mbps: 1,
    graceMs: 5000,
    keepIntv: 60,
    terminalChurn: 0.02,
    longShare: 0.3,
    playerChurn: 0.05,
    outageAt: NaN,
    outageSeconds: NaN,
    outageMode: 'refuse',
    retryForMs: 120_000,
    maxQueue: 100_000,
    reportSeconds: NaN,
    warmupSeconds: NaN,
    rssMBPerHour: 50,
    rssMinRiseMB: 20,
    fdSlack: 16,
    maxOpen: 3,
    holdMin: 5,
    holdMax: 45,
    thinkMin: 1,
    thinkMax: 5,
    idleShare: 0.2,
    seed: 1,
    pin: false,
    keepDir: false,
    nodeOpts: [],
  };
  const r = new BenchArgs(args, USAGE);
  const pair = (flag: string, max: number): [number, number] => {
    const v = r.value() ?? '';
    const m = /^(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)$/.exec(v);
    const lo = m ? Number(m[1]) : NaN;
    const hi = m ? Number(m[2]) : NaN;
    if (!m || lo > hi || hi > max) throw r.error(`${flag} needs MIN,MAX seconds (MIN <= MAX <= ${max}), got '${v}'`);
    return [lo, hi];
  };
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--minutes':
        o.minutes = r.num(a, 0.5, 24 * 60);
        break;
      case '--terminals':
        o.terminals = r.num(a, 1, 5000, true);
        break;
      case '--clients':
        o.clients = r.num(a, 0, 2000, true);
        break;
      case '--mbps':
        o.mbps = r.num(a, 0.01, 100);
        break;
      case '--grace-ms':
        o.graceMs = r.num(a, 1000, 60_000, true);
        break;
      case '--keep-intv':
        o.keepIntv = r.num(a, 15, 600, true);
        break;
      case '--terminal-churn':
        o.terminalChurn = r.num(a, 0, 10);
        break;
      case '--long-share':
        o.longShare = r.num(a, 0, 1);
        break;
      case '--player-churn':
        o.playerChurn = r.num(a, 0, 10);
        break;
      case '--outage-at':
        o.outageAt = r.num(a, 0, 24 * 3600);
        break;
      case '--outage-seconds':
        o.outageSeconds = r.num(a, 0, 3600);
        break;
      case '--outage-mode': {
        const v = r.value();
        if (v !== 'refuse' && v !== '503') throw r.error(`--outage-mode is refuse or 503, got '${v}'`);
        o.outageMode = v;
        break;
      }
      case '--retry-for-ms':
        o.retryForMs = r.num(a, 1000, 3_600_000, true);
        break;
      case '--max-queue':
        o.maxQueue = r.num(a, 1, 1_000_000, true);
        break;
      case '--report-seconds':
        o.reportSeconds = r.num(a, 5, 3600);
        break;
      case '--warmup-seconds':
        o.warmupSeconds = r.num(a, 0, 24 * 3600);
        break;
      case '--rss-mb-per-hour':
        o.rssMBPerHour = r.num(a, 0, 100_000);
        break;
      case '--rss-min-rise-mb':
        o.rssMinRiseMB = r.num(a, 0, 100_000);
        break;
      case '--fd-slack':
        o.fdSlack = r.num(a, 0, 100_000, true);
        break;
      case '--max-open':
        o.maxOpen = r.num(a, 1, 100, true);
        break;
      case '--hold':
        [o.holdMin, o.holdMax] = pair(a, 3600);
        break;
      case '--think':
        [o.thinkMin, o.thinkMax] = pair(a, 3600);
        break;
      case '--idle-share':
        o.idleShare = r.num(a, 0, 1);
        break;
      case '--seed':
        o.seed = r.num(a, 0, 2 ** 32 - 1, true);
        break;
      case '--pin':
        o.pin = true;
        break;
      case '--keep-dir':
        o.keepDir = true;
        break;
      case '--node-opt':
        o.nodeOpts.push(r.nodeOpt());
        break;
      default:
        r.unknown(a);
    }
  }
  const runS = o.minutes * 60;
  if (!Number.isFinite(o.outageSeconds)) o.outageSeconds = Math.min(60, runS / 4);
  if (!Number.isFinite(o.outageAt)) o.outageAt = runS / 3;
  if (!Number.isFinite(o.reportSeconds)) o.reportSeconds = o.minutes <= 5 ? 30 : 60;
  if (!Number.isFinite(o.warmupSeconds)) o.warmupSeconds = Math.min(300, runS / 5);
  // A notice queued when the receiver goes down must still be within its budget when it is back, plus the longest
  // backoff step (30 s) and a little: otherwise the soak would provoke the losses it is looking for.
  if (o.outageSeconds > 0 && o.outageSeconds * 1000 + 35_000 > o.retryForMs) {
    throw new Error(
      `--outage-seconds ${o.outageSeconds} leaves less than 35 s of the notifier's retry budget (${o.retryForMs} ms): the receiver must come back within the budget`,
    );
  }
  if (o.outageSeconds > 0 && o.outageAt + o.outageSeconds > runS)
    throw new Error(`the outage (${o.outageAt} s + ${o.outageSeconds} s) must end within the run (${runS} s)`);
  if (o.holdMax >= 55) throw new Error('--hold MAX must stay under 55 s: the site closes requests nobody plays after 120 s and waiting streams after 60 s');
  return o;
}
