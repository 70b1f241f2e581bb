/**
 * Soak: the real gateway under a long, churning load, watched for leaks and lost notices.
 *
 * N terminals push 1078 over TCP, each with the request that holds its stream and one HTTP-FLV player; C API clients
 * (one application each) loop open/keep/status/close on those SIMs and on SIMs nobody pushes; terminals drop their
 * links and come back (within the ingest's reconnect grace and past it), players leave and come back; every request
 * is opened with a cb pointing at a real HTTP receiver on loopback, which goes down for a while and comes back within
 * the notifier's retry budget. Reports at the start, every --report-seconds and at the end: gateway RSS, V8 heap,
 * descriptors, event-loop delay, requests and streams against what the clients believe is open, notices owed against
 * notices received; then a verdict, and a non-zero exit (a thrown error) on a leak or a lost notice.
 *
 *   node dist/test/bench/run.js soak [--minutes M] [--terminals N] [--clients N] ...   (see soak-options.ts)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { prng } from '../support/prng';
import { fixturePath, scratchDir } from '../support/paths';
import { CallbackReceiver } from './support/callback-receiver';
import {
  BOOT_TIMEOUT_MS,
  f1,
  freePort,
  mb,
  pinSelf,
  pool,
  runDeadline,
  startGateway,
  stopGateway,
  tail,
  waitHealthy,
  Api,
  canPin,
  writeSite,
  endScratch,
} from './support/gateway-harness';
import { NoticeLedger } from './support/notice-ledger';
import { parsePrometheus, rssBytes, sumOf, type Sample } from './support/process-probe';
import { ApiClient, leakedRequests, type ClientCounters } from './support/soak-clients';
import { Anomalies, poisson, uniform, type SoakCtx } from './support/soak-context';
import { SoakApi, type AppCredentials } from './support/soak-api';
import { growth, verdict, type Point } from './support/soak-stats';
import { keepHolders, TerminalSlot, type SlotCounters } from './support/soak-terminals';
import { SynthTerminal, synthesise } from './support/synth-terminals';
import { parseSoakArgs } from './soak-options';

const TICK_MS = 4;
/** /proc samples (RSS, descriptors) for the growth figures */
const SAMPLE_MS = 5000;
const HOLDERS_PER_APP = 900;
const BRING_UP_CONCURRENCY = 16;

export { parseSoakArgs };

function fdCount(pid: number): number {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

const clock = (s: number): string => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}`;

export async function run(args: string[]): Promise<void> {
  const o = parseSoakArgs(args);
  const stream = synthesise(fixturePath('jt1078/glaciall-cif-h264-2013.bin'), o.mbps);
  const budgetMs = BOOT_TIMEOUT_MS + o.terminals * 300 + o.minutes * 60_000 + o.retryForMs + 180_000;
  const deadline = runDeadline(budgetMs);
  const dir = scratchDir('bench-soak');
  const pin = canPin(o.pin, 'soak');

  const holderApps: AppCredentials[] = Array.from({ length: Math.max(1, Math.ceil(o.terminals / HOLDERS_PER_APP)) }, (_x, i) => ({
    appId: `hold${i + 1}`,
    user: `hold${i + 1}`,
    password: `hold${i + 1}`,
  }));
  const clientApps: AppCredentials[] = Array.from({ length: o.clients }, (_x, i) => ({ appId: `cli${i + 1}`, user: `cli${i + 1}`, password: `cli${i + 1}` }));
  const receiver = new CallbackReceiver((n) => ledger.receive(n));
  const cbPort = await receiver.start();
  const httpPort = await freePort();
  const site = {
    gateway: {
      httpPort,
      listenHost: '127.0.0.1',
      publicHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      logLevel: 'warn',
      instId: 'soak',
      metricsAccess: 'open',
      applications: [...holderApps, ...clientApps],
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false, disconnectGraceMs: o.graceMs } },
      { name: 'flv-out', config: { port: 0, schemes: ['http'] } },
      { name: 'callback-notifier', config: { allowLoopback: true, retryForMs: o.retryForMs, maxQueuePerHost: o.maxQueue } },
    ],
  };
  const siteFile = writeSite(dir, site);

  const runS = o.minutes * 60;
  console.log(
    `soak: ${o.minutes} min, ${o.terminals} terminals x ${((stream.bytesPerSecond * 8) / 1e6).toFixed(2)} Mbit/s with one HTTP-FLV player each, ` +
      `${o.clients} API clients; churn: ${o.terminalChurn} link drops per terminal-minute (${Math.round(o.longShare * 100)} % past the ` +
      `${o.graceMs / 1000} s grace), ${o.playerChurn} player departures per player-minute; callback receiver on 127.0.0.1:${cbPort} ` +
      `down (${o.outageMode}) from ${clock(o.outageAt)} for ${o.outageSeconds} s (retry budget ${o.retryForMs / 1000} s); seed ${o.seed}`,
  );

  const gw = startGateway({ siteFile, dir, pin, nodeOpts: o.nodeOpts });
  const killGateway = () => gw.child.kill('SIGKILL');
  process.once('exit', killGateway);
  const signal = deadline.signal;
  const api = new SoakApi(httpPort, signal);
  const ledger = new NoticeLedger();
  const anomalies = new Anomalies();
  const stopper = new AbortController();
  const rnd = prng(o.seed);
  const runTag = Date.now().toString(36).slice(-5);
  let reqSeq = 0;
  const ctx: SoakCtx = {
    api,
    ledger,
    deadline: signal,
    stop: stopper.signal,
    rnd,
    anomalies,
    graceMs: o.graceMs,
    keepIntv: o.keepIntv,
    cb: (owner) => `http://127.0.0.1:${cbPort}/cb/${owner}`,
    newReqId: () => `soak${runTag}-${(reqSeq++).toString(36).padStart(6, '0')}`,
  };
  const live = new Set<SynthTerminal>();
  const slotN: SlotCounters = { holderOpens: 0, openRetries: 0, shortDrops: 0, longDrops: 0, playerChurns: 0, playersCut: 0 };
  const cliN: ClientCounters = { opens: 0, openRetries: 0, openRefused: 0, keeps: 0, statuses: 0, closes: 0, endedByGateway: 0, failedCalls: 0 };
  const slots = Array.from(
    { length: o.terminals },
    (_x, i) => new TerminalSlot(i, String(13900000000 + i), holderApps[Math.floor(i / HOLDERS_PER_APP)], ctx, stream, live, slotN),
  );
  const idleSims = Array.from({ length: Math.max(10, Math.ceil(o.clients / 4)) }, (_x, i) => String(14900000000 + i));
  const pickSim = (idle: boolean) => (idle ? idleSims[Math.floor(rnd() * idleSims.length)] : slots[Math.floor(rnd() * slots.length)].sim);
  const clients = clientApps.map((app, i) => new ApiClient(i, app, ctx, o, pickSim, cliN));
  const timers: NodeJS.Timeout[] = [];
  const background: Array<Promise<unknown>> = [];
  const samples = { rss: [] as Point[], fds: [] as Point[], fdOther: [] as Point[] };
  let loadStart = 0;
  /** seconds into the load, and the same on the soak's clock (ms) */
  const outage: { downAt?: number; upAt?: number; downPerf?: number; upPerf?: number } = {};
  const heap: Point[] = [];
  let fatal: Error | undefined;
  const onFatal = (err: unknown) => {
    fatal ??= err instanceof Error ? err : new Error(String(err));
    stopper.abort();
  };

  try {
    await waitHealthy(gw, new Api(httpPort, signal), signal);
    if (pin && !pinSelf(1)) console.warn('soak: could not pin this process to core 1');
    await sleep(2000, undefined, { signal });
    const idleStart = { rss: rssBytes(gw.pid), fds: fdCount(gw.pid) };
    const m0 = parsePrometheus(await api.metricsText());
    console.log(
      `  gateway pid ${gw.pid}${pin ? ' on core 0' : ''}; idle: RSS ${f1(mb(idleStart.rss))} MB, heap ${f1(mb(sumOf(m0, 'gw_process_nodejs_heap_size_used_bytes')))} MB, ${idleStart.fds} descriptors`,
    );

    // --- one timer paces every terminal
    timers.push(
      setInterval(() => {
        const now = performance.now();
        for (const t of live) t.sendDue(now, 64);
      }, TICK_MS),
    );

    // --- terminals, their requests and players
    const t0 = performance.now();
    await pool(slots, BRING_UP_CONCURRENCY, 0, (s) => s.step(() => s.bringUp()), signal);
    console.log(`  ${o.terminals} terminals pushing and playing in ${f1((performance.now() - t0) / 1000)} s`);
    loadStart = performance.now();
    const since = () => (performance.now() - loadStart) / 1000;

    // --- holders' keeps, the clients, churn, outage, samples, reports
    timers.push(
      setInterval(
        () => {
          keepHolders(ctx, slots).catch((err: Error) => anomalies.note('holder keep failed', err.message));
        },
        (o.keepIntv * 1000) / 3,
      ),
    );
    for (const c of clients) background.push(c.run().catch(onFatal));
    // churn events arrive as a Poisson process: rate per slot per minute, drawn each second
    const churn = (rate: number, act: (s: TerminalSlot) => Promise<void>) => () => {
      const now = performance.now();
      for (let n = poisson(rnd, (rate * o.terminals) / 60); n > 0; n--) {
        // a steady slot (not churning, pushing and playing for a while); a few tries, then the event is skipped
        for (let k = 0; k < 8; k++) {
          const s = slots[Math.floor(rnd() * slots.length)];
          if (!s.isSteady(now)) continue;
          background.push(s.step(() => act(s)).catch(onFatal));
          break;
        }
      }
    };
    const dropTick = churn(o.terminalChurn, (s) => {
      const long = rnd() < o.longShare;
      return s.dropTerminal(long, long ? o.graceMs + uniform(rnd, 2000, 8000) : uniform(rnd, 300, 0.6 * o.graceMs));
    });
    const playerTick = churn(o.playerChurn, (s) => s.churnPlayer(uniform(rnd, 500, 8000)));
    timers.push(
      setInterval(() => {
        dropTick();
        playerTick();
      }, 1000),
    );
    if (o.outageSeconds > 0) {
      timers.push(
        setTimeout(() => {
          outage.downAt = since();
          outage.downPerf = performance.now();
          receiver
            .goDown(o.outageMode)
            .then(() => console.log(`  [${clock(since())}] callback receiver DOWN (${o.outageMode})`))
            .catch(onFatal);
          timers.push(
            setTimeout(() => {
              receiver
                .comeBack()
                .then(() => {
                  outage.upAt = since();
                  outage.upPerf = performance.now();
                  console.log(`  [${clock(since())}] callback receiver back after ${f1(outage.upAt - (outage.downAt ?? 0))} s`);
                })
                .catch(onFatal);
            }, o.outageSeconds * 1000),
          );
        }, o.outageAt * 1000),
      );
    }
    const ours = () => {
      let players = 0;
      for (const s of slots) if (s.player && !s.player.closed) players++;
      return live.size + players + api.openSockets + receiver.openConnections;
    };
    const sample = () => {
      const t = since();
      const fds = fdCount(gw.pid);
      samples.rss.push({ t, v: mb(rssBytes(gw.pid)) });
      samples.fds.push({ t, v: fds });
      samples.fdOther.push({ t, v: fds - ours() });
    };
    timers.push(
      setInterval(() => {
        try {
          sample();
        } catch (err) {
          onFatal(err);
        }
      }, SAMPLE_MS),
    );
    const holderSuspects = new Set<string>();
    const report = async (label: string) => {
      const m = parsePrometheus(await api.metricsText());
      const h = await api.health();
      const now = performance.now();
      const t = since();
      const rss = mb(rssBytes(gw.pid));
      const fds = fdCount(gw.pid);
      heap.push({ t, v: mb(sumOf(m, 'gw_process_nodejs_heap_size_used_bytes')) });
      const leaks = await checkHolders(ctx, slots, holderApps, holderSuspects);
      const believed = slots.filter((s) => s.reqId).length + clients.reduce((n, c) => n + c.openCount, 0);
      const sum = ledger.summary(now);
      const oldest = sum.pendingFinals[0];
      const stalled = slots.filter((s) => s.isStalled(now)).length;
      console.log(
        `  [${label.padStart(5)}] RSS ${f1(rss)} MB, heap ${f1(heap[heap.length - 1].v)} MB, fds ${fds} (ours ${ours()}), ` +
          `loop p99 ${f1(sumOf(m, 'gw_process_nodejs_eventloop_lag_p99_seconds') * 1000)} / max ${f1(sumOf(m, 'gw_process_nodejs_eventloop_lag_max_seconds') * 1000)} ms | ` +
          `requests gw ${h.requests ?? '?'} / clients ${believed}, streams ${h.streams ?? '?'}, links ${sumOf(m, 'gw_jt1078_ingest_links')}, ` +
          `players ${sumOf(m, 'gw_flv_out_players')} (stalled ${stalled}) | notices rx ${sum.noticesReceived}, finals owed ${sum.pendingFinals.length}` +
          `${oldest ? ` (oldest ${f1(oldest.ageMs / 1000)} s)` : ''}, dup ${sum.duplicates.length}, order ${sum.orderViolations.length}; ` +
          `notifier delivered ${sumOf(m, 'gw_callback_notifier_delivered_total')} retried ${sumOf(m, 'gw_callback_notifier_retried_total')} ` +
          `failed ${sumOf(m, 'gw_callback_notifier_failed_total')} dropped ${sumOf(m, 'gw_callback_notifier_dropped_total')} queued ${sumOf(m, 'gw_callback_notifier_queue_depth')}` +
          `${receiver.isDown ? ' [receiver DOWN]' : ''}${leaks > 0 ? ` | LEAKED holder requests ${leaks}` : ''}`,
      );
    };
    sample();
    await report('start');
    let nextReport = o.reportSeconds;
    while (since() < runS && !stopper.signal.aborted) {
      await sleep(Math.max(10, Math.min(1000, (nextReport - since()) * 1000)), undefined, { signal });
      if (gw.child.exitCode !== null) throw new Error(`gateway exited (code ${gw.child.exitCode}):\n${tail(gw.logFile)}`);
      if (since() >= nextReport && since() < runS) {
        await report(clock(since()));
        nextReport += o.reportSeconds;
      }
    }
    if (fatal) throw fatal;

    // --- end of the load: everyone closes what it holds, then the notices are drained
    console.log(`  [${clock(since())}] load ends: clients and terminals close everything`);
    sample();
    stopper.abort();
    for (const t of timers) clearInterval(t);
    timers.length = 0;
    await Promise.all(background);
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- a background task sets fatal during the await; tsc keeps the narrowing to undefined from the check above
    if (fatal) throw fatal;
    if (receiver.isDown) await receiver.comeBack();
    await pool(clients, 32, 0, (c) => c.shutdown(), signal);
    await pool(slots, BRING_UP_CONCURRENCY, 0, (s) => s.shutdown(), signal);
    for (const t of live) t.socket.destroy();
    const drainStart = performance.now();
    // every final owed must come; one queued during the outage may wait out its backoff (30 s at most) past the return
    const drainBy = Math.max(drainStart + 40_000, loadStart + ((outage.upAt ?? 0) + 40) * 1000);
    while (performance.now() < drainBy && ledger.summary(performance.now()).pendingFinals.length > 0) await sleep(500, undefined, { signal });
    console.log(`  drained in ${f1((performance.now() - drainStart) / 1000)} s`);
    // the gateway lets go of streams within 5 s of their last request; players and links go with their sockets
    let left = { requests: NaN, streams: NaN, links: NaN, players: NaN };
    let mEnd = new Map<string, Sample[]>();
    for (let i = 0; i < 40; i++) {
      const h = await api.health();
      mEnd = parsePrometheus(await api.metricsText());
      left = {
        requests: h.requests ?? NaN,
        streams: h.streams ?? NaN,
        links: sumOf(mEnd, 'gw_jt1078_ingest_links'),
        players: sumOf(mEnd, 'gw_flv_out_players'),
      };
      if (left.requests === 0 && left.streams === 0 && left.links === 0 && left.players === 0) break;
      await sleep(500, undefined, { signal });
    }
    const holderLeaks = await checkHolders(ctx, slots, holderApps, holderSuspects, true);
    // idle again: the soak's API connections and the notifier's pooled connections to the receiver closed
    api.closeAll();
    receiver.closeIdle();
    await sleep(3000, undefined, { signal });
    const idleEnd = { rss: rssBytes(gw.pid), fds: fdCount(gw.pid) };
    const final = ledger.summary(performance.now());

    // --- the end report and the verdict
    const rssG = growth(samples.rss, o.warmupSeconds);
    const fdOtherG = growth(samples.fdOther, o.warmupSeconds);
    const heapG = growth(heap, o.warmupSeconds);
    const lines: string[] = [];
    lines.push(
      `  end: gateway idle RSS ${f1(mb(idleEnd.rss))} MB (${f1(mb(idleStart.rss))} at the start), ${idleEnd.fds} descriptors (${idleStart.fds} at the start)`,
    );
    lines.push(
      `  RSS from ${clock(o.warmupSeconds)} on (${rssG.samples} samples): ${f1(rssG.first)} -> ${f1(rssG.last)} MB (quarter medians), slope ${f1(rssG.perHour)} MB/h; ` +
        `heap slope ${f1(heapG.perHour)} MB/h (${heapG.samples} scrapes); descriptors beyond the soak's own connections: ${f1(fdOtherG.first)} -> ${f1(fdOtherG.last)}`,
    );
    lines.push(
      `  terminals: ${slotN.holderOpens} holding requests opened (${slotN.openRetries} opens retried on a closing stream), ${slotN.shortDrops} drops within the grace, ` +
        `${slotN.longDrops} past it, ${slotN.playerChurns} player departures, ${slotN.playersCut} players cut off unexpectedly`,
    );
    lines.push(
      `  clients: ${cliN.opens} opens (${cliN.openRetries} retried, ${cliN.openRefused} refused), ${cliN.keeps} keeps, ${cliN.statuses} status, ${cliN.closes} closes, ` +
        `${cliN.endedByGateway} requests ended by the gateway, ${cliN.failedCalls} failed calls; API calls ${api.calls}, transport errors ${api.transportErrors}`,
    );
    lines.push(
      `  notices: ${final.requests} requests, ${final.noticesReceived} notices received (${receiver.accepted} POSTs answered, ${receiver.refused} refused while down), ` +
        `${final.finalsReceived} finals and ${final.readyReceived} ready; gateway delivered ${sumOf(mEnd, 'gw_callback_notifier_delivered_total')}, ` +
        `retried ${sumOf(mEnd, 'gw_callback_notifier_retried_total')}, gave up ${sumOf(mEnd, 'gw_callback_notifier_failed_total')}, dropped ${sumOf(mEnd, 'gw_callback_notifier_dropped_total')}; ` +
        `close -> final notice p50 ${f1(final.finalDelayMs.p50)} ms, p99 ${f1(final.finalDelayMs.p99)} ms, max ${f1(final.finalDelayMs.max / 1000)} s`,
    );
    lines.push(
      `  final notices by closeCause: ${
        Object.entries(final.causes)
          .map(([c, n]) => `${c}: ${n}`)
          .join(', ') || 'none'
      }; unknown reqIds ${final.unknown}`,
    );
    if (outage.downPerf !== undefined) {
      const during = ledger.endedBetween(outage.downPerf, outage.upPerf ?? performance.now());
      const late = during.filter((d) => d.finalAt !== undefined).map((d) => (d.finalAt! - (outage.upPerf ?? 0)) / 1000);
      lines.push(
        `  outage: down at ${clock(outage.downAt!)}, back at ${outage.upAt !== undefined ? clock(outage.upAt) : '(end of load)'}; ` +
          `${during.length} requests ended while it was down, ${late.length} of their finals arrived, the last ${f1(Math.max(0, ...late))} s after the receiver came back`,
      );
    }
    const show = <T>(what: string, list: T[], fmt: (x: T) => string) => {
      if (list.length) lines.push(`  ${what} (${list.length}): ${list.slice(0, 5).map(fmt).join('; ')}${list.length > 5 ? '; ...' : ''}`);
    };
    show('LOST final notices', final.pendingFinals, (p) => `${p.owner} ${p.reqId} (ended ${f1(p.ageMs / 1000)} s ago)`);
    show('LOST ready notices', final.missingReady, (p) => `${p.owner} ${p.reqId}`);
    show('DUPLICATE notices', final.duplicates, (d) => `${d.reqId} ${d.act}`);
    show('notices OUT OF ORDER or not due', final.orderViolations, (d) => `${d.reqId}: ${d.what}`);
    show('unexpected closeCause', final.unexpectedCauses, (u) => `${u.owner} ${u.reqId} cause ${u.cause} (expected ${u.expected})`);
    for (const a of anomalies.lines()) lines.push(`  anomaly: ${a}`);
    lines.push(...logSummary(gw.logFile));
    const v = verdict(
      {
        rss: rssG,
        fdIdleStart: idleStart.fds,
        fdIdleEnd: idleEnd.fds,
        fdOther: fdOtherG,
        leakedRequests: leakedRequests.size + holderLeaks,
        requestsLeft: left.requests,
        streamsLeft: left.streams,
        linksLeft: left.links,
        playersLeft: left.players,
        lostFinals: final.pendingFinals.length,
        lostReady: final.missingReady.length,
        duplicates: final.duplicates.length,
        orderViolations: final.orderViolations.length,
        notifierFailed: sumOf(mEnd, 'gw_callback_notifier_failed_total'),
        notifierDropped: sumOf(mEnd, 'gw_callback_notifier_dropped_total'),
        unexpectedCauses: final.unexpectedCauses.length,
      },
      { rssMBPerHour: o.rssMBPerHour, rssMinRiseMB: o.rssMinRiseMB, fdSlack: o.fdSlack },
    );
    for (const w of v.warnings) lines.push(`  warning: ${w}`);
    lines.push(
      `  VERDICT: ${v.ok ? 'PASS' : 'FAIL'}: RSS ${f1(rssG.perHour)} MB/h (rise ${f1(rssG.rise)} MB), descriptors ${idleEnd.fds - idleStart.fds >= 0 ? '+' : ''}${idleEnd.fds - idleStart.fds} idle-to-idle, ` +
        `${final.pendingFinals.length + final.missingReady.length} lost notices of ${final.requests} requests, ${leakedRequests.size + holderLeaks} leaked requests` +
        (v.ok ? '' : ` | ${v.failures.join('; ')}`),
    );
    console.log(lines.join('\n'));
    if (!v.ok) throw new Error(`verdict FAIL: ${v.failures.join('; ')}`);
  } catch (err) {
    if (signal.aborted && !(err instanceof Error && err.message.startsWith('verdict'))) {
      throw new Error(`benchmark aborted: ${signal.reason instanceof Error ? signal.reason.message : String(signal.reason)}`, { cause: err });
    }
    throw err;
  } finally {
    stopper.abort();
    for (const t of timers) clearInterval(t);
    for (const s of slots) {
      s.player?.close();
      s.term?.socket.destroy();
    }
    api.closeAll();
    await stopGateway(gw);
    await receiver.stop();
    process.off('exit', killGateway);
    deadline.dispose();
    endScratch(dir, o.keepDir);
  }
}

/**
 * Requests the holders' applications list that no slot holds (nor expects the gateway to end): a suspect is a leak
 * once it shows in two checks in a row (an open answered between the status call and its answer is no leak).
 * `last`: after the shutdown, anything listed is a leak at once. Returns the leaks found in this check.
 */
async function checkHolders(ctx: SoakCtx, slots: TerminalSlot[], apps: AppCredentials[], suspects: Set<string>, last = false): Promise<number> {
  const known = new Set<string>();
  for (const s of slots) {
    if (s.reqId) known.add(s.reqId);
    if (s.pendingGone) known.add(s.pendingGone);
  }
  let leaks = 0;
  const seen = new Set<string>();
  for (const app of apps) {
    const r = await ctx.api.call<Array<{ reqId: string; ready: boolean }>>('GET', '/strm/status', app);
    for (const st of r.data ?? []) {
      if (known.has(st.reqId)) {
        if (st.ready) ctx.ledger.sawReady(st.reqId);
        continue;
      }
      seen.add(st.reqId);
      if (last || suspects.has(st.reqId)) {
        if (!leakedRequests.has(st.reqId)) {
          leakedRequests.add(st.reqId);
          ctx.anomalies.note('leaked holder request', st.reqId);
        }
        leaks++;
      }
    }
  }
  suspects.clear();
  for (const id of seen) suspects.add(id);
  return leaks;
}

/** The gateway's warn and error lines (JSON, pino), counted by message: what it complained about during the soak. */
function logSummary(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const byMsg = new Map<string, number>();
  let other = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      const j = JSON.parse(line) as { level?: number; msg?: string };
      const lvl = j.level === 40 ? 'warn' : j.level !== undefined && j.level >= 50 ? 'error' : 'info';
      const key = `${lvl} '${j.msg ?? ''}'`;
      byMsg.set(key, (byMsg.get(key) ?? 0) + 1);
    } catch {
      other++;
    }
  }
  const top = [...byMsg.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
  const out = top.length ? [`  gateway log: ${top.map(([k, n]) => `${n} x ${k}`).join(', ')}`] : ['  gateway log: no warn or error line'];
  if (other > 0)
    out.push(
      `  gateway log: ${other} lines not JSON (stderr), e.g. ${text
        .split('\n')
        .find((l) => l && !l.startsWith('{'))
        ?.slice(0, 160)}`,
    );
  return out;
}
