/**
 * What a request costs node's HTTP server alone (floor/bare-http.ts, pinned to core 0), at the request rate of
 * LL-HLS readers: N keep-alive clients on core 1, each R requests a second, paced. Prints the server's CPU per
 * request, the µs no HLS server on node's HTTP can go under (issue 47 asks LL-HLS readers to cost no more than 1.15
 * times FLV players: about 25 µs a request over an FLV player's cost at 6.9 requests a second a reader).
 *
 *   node dist/test/bench/run.js http-floor [--clients N] [--rate R] [--body BYTES] [--seconds S] [--no-pin]
 */
import { spawn } from 'node:child_process';
import * as http from 'node:http';
import { once } from 'node:events';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BenchArgs } from './support/bench-args';
import { canPin, f1, freePort, pinSelf } from './support/gateway-harness';
import { keepAwake } from './support/keep-awake';
import { cpuSeconds } from './support/process-probe';

export const USAGE = `usage: npm run bench -- http-floor [--clients N] [--rate R] [--body BYTES] [--seconds S] [--no-pin]
  --clients N   keep-alive HTTP clients, one connection each (default 500: ingest-hls's readers at 500 terminals)
  --rate R      requests a second each client makes (default 7: an LL-HLS reader of 0.33 s parts, ~6.9)
  --body BYTES  the answer's body (default 4000: a part of 1 Mbit/s video is ~40 KB, a playlist ~1-2 KB)
  --seconds S   measured window (default 20), after 3 s of warm-up
  --no-pin      do not pin the server to core 0 and the clients to core 1`;

export interface HttpFloorOptions {
  clients: number;
  rate: number;
  body: number;
  seconds: number;
  pin: boolean;
}

export function parseArgs(args: string[]): HttpFloorOptions {
  const o: HttpFloorOptions = { clients: 500, rate: 7, body: 4000, seconds: 20, pin: true };
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    if (a === '--clients') o.clients = r.num(a, 1, 5000, true);
    else if (a === '--rate') o.rate = r.num(a, 0.1, 100, false);
    else if (a === '--body') o.body = r.num(a, 0, 4 * 1024 * 1024, true);
    else if (a === '--seconds') o.seconds = r.num(a, 1, 3600, false);
    else if (a === '--no-pin') o.pin = false;
    else r.unknown(a);
  }
  return o;
}

export interface HttpFloorResult {
  requests: number;
  errors: number;
  serverCpuPct: number;
  usPerRequest: number;
}

export async function run(args: string[]): Promise<HttpFloorResult> {
  const o = parseArgs(args);
  const pin = canPin(o.pin, 'http-floor');
  const port = await freePort();
  const main = path.join(__dirname, 'floor', 'bare-http.js');
  const cmd = pin ? 'taskset' : process.execPath;
  const child = spawn(cmd, [...(pin ? ['-c', '0', process.execPath] : []), main, String(port), String(o.body)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.clients });
  const timers: NodeJS.Timeout[] = [];
  let done = 0;
  let errors = 0;
  let stopSpinning: (() => void) | undefined;
  try {
    // (AbortSignal.timeout's timer does not hold the process open once the server is up)
    await once(child.stdout, 'data', { signal: AbortSignal.timeout(10_000) }).catch(() => {
      throw new Error('http-floor: the bare server did not start in 10 s');
    });
    if (pin && !pinSelf(1)) console.warn('http-floor: could not pin this process to core 1');
    stopSpinning = keepAwake();
    const fetchOne = (): void => {
      const req = http.get({ host: '127.0.0.1', port, path: '/hls/13900000000_1/part-12.3.m4s?reqId=r&token=t', agent }, (res) => {
        res.on('data', () => undefined);
        res.on('end', () => {
          if (res.statusCode === 200) done++;
          else errors++;
        });
      });
      req.on('error', () => errors++);
    };
    const periodMs = 1000 / o.rate;
    for (let i = 0; i < o.clients; i++) {
      // spread over one period, so the requests do not come in bursts
      timers.push(setTimeout(() => timers.push(setInterval(fetchOne, periodMs)), (i * periodMs) / o.clients));
    }
    await sleep(3000);
    const pid = child.pid as number;
    const c0 = cpuSeconds(pid);
    const d0 = done;
    const e0 = errors;
    const t0 = performance.now();
    await sleep(o.seconds * 1000);
    const secs = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(pid) - c0;
    const requests = done - d0;
    const result = { requests, errors: errors - e0, serverCpuPct: (100 * cpu) / secs, usPerRequest: (cpu * 1e6) / Math.max(1, requests) };
    console.log(
      `http-floor: ${o.clients} keep-alive clients x ${o.rate} requests a second, ${o.body}-byte answers, ${f1(secs)} s` +
        `${pin ? ' (server on core 0, clients on core 1)' : ''}\n` +
        `  ${requests} requests answered (${f1(requests / secs)} a second, asked ${f1(o.clients * o.rate)}), ${result.errors} errors\n` +
        `  bare node HTTP server: ${f1(result.serverCpuPct)} % of a core -> ${f1(result.usPerRequest)} µs of CPU a request (kernel included)`,
    );
    return result;
  } finally {
    for (const t of timers) clearInterval(t);
    stopSpinning?.();
    agent.destroy();
    child.kill('SIGKILL');
    process.off('exit', kill);
  }
}
