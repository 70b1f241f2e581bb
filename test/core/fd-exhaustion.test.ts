/**
 * The descriptor reserve against the real process: a gateway run under `ulimit -n 256` is flooded with idle connections
 * on its FLV and terminal ports until its descriptors run out. /healthz and /strm/keep must answer throughout (a keep
 * that cannot get through closes a live request), the process must not exit, and once the flood ends new
 * connections must be accepted again. Linux only (the limit and the count come from /proc).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { repoRoot, scratchDir } from '../support/paths';
import { metricSum } from '../e2e/helpers';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
const FD_LIMIT = 256;
const AUTH = 'Basic ' + Buffer.from('u:p').toString('base64');

interface Gateway {
  child: ChildProcess;
  ports: Record<string, number>;
  lines: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
}

async function startGateway(dir: string, gateway: Record<string, unknown> = {}): Promise<Gateway> {
  const site = {
    gateway: {
      // one process: the descriptor limit under test is a process's
      workers: 1,
      httpPort: 0,
      listenHost: '127.0.0.1',
      dataDir: path.join(dir, 'data'),
      store: { kind: 'memory' },
      applications: [{ appId: 'a', user: 'u', password: 'p' }],
      ...gateway,
    },
    plugins: [
      { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0, udp: false } },
      { name: 'flv-out', config: { port: 0 } },
    ],
  };
  const file = path.join(dir, 'site.json');
  fs.writeFileSync(file, JSON.stringify(site));
  const child = spawn('sh', ['-c', `ulimit -n ${FD_LIMIT} && exec "$0" "$1" "$2"`, process.execPath, MAIN, file], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let partial = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const started = new Promise<Record<string, number>>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      const text = partial + d.toString();
      const all = text.split('\n');
      partial = all.pop()!;
      for (const l of all) {
        if (!l.trim()) continue;
        const j = JSON.parse(l) as Record<string, unknown>;
        lines.push(j);
        if (j.msg === 'gateway started') resolve(j.ports as Record<string, number>);
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    void exited.then((code) => reject(new Error(`gateway exited (${code}) before it started: ${stderr}`)));
    setTimeout(() => reject(new Error('gateway did not start within 20 s')), 20_000).unref();
  });
  return { child, ports: await started, lines, exited };
}

function request(port: number, method: string, p: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: p,
        method,
        agent: false,
        timeout: 3000,
        headers: {
          authorization: AUTH,
          ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }),
        },
      },
      (res) => {
        let t = '';
        res.on('data', (c: Buffer) => {
          t += c.toString();
        });
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(t);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text: t });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(text);
  });
}

/** /healthz and a keep, over and over on fresh connections, each outcome kept */
class ApiProbe {
  readonly failures: string[] = [];
  healthz = 0;
  keeps = 0;
  private running = true;
  private readonly done: Promise<void>;

  constructor(port: number, reqId: string) {
    this.done = (async () => {
      for (let i = 0; this.running; i++) {
        try {
          const h = await request(port, 'GET', '/healthz');
          if (h.status === 200) this.healthz++;
          else this.failures.push(`healthz ${h.status}`);
          if (i % 4 === 0) {
            const k = await request(port, 'POST', '/strm/keep', { reqIds: [reqId] });
            if (k.json?.errCode === 0 && k.json.data?.[0]?.keep === true) this.keeps++;
            else this.failures.push(`keep ${k.status} ${k.text}`);
          }
        } catch (err) {
          this.failures.push((err as Error).message);
        }
        await sleep(25);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

/** idle connections to the ports, `batch` at a time, as a flood arrives; each settles connected or reset */
async function flood(ports: number[], perPort: number, batch = 50): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < perPort; i += batch) {
    await Promise.all(
      ports.flatMap((port) =>
        Array.from(
          { length: Math.min(batch, perPort - i) },
          () =>
            new Promise<void>((resolve) => {
              const s = net.connect({ host: '127.0.0.1', port });
              sockets.push(s);
              s.on('error', () => undefined);
              s.once('connect', () => resolve());
              s.once('close', () => resolve());
            }),
        ),
      ),
    );
    await sleep(20);
  }
  return sockets;
}

/** a new connection that is accepted and left open (not reset within holdMs) */
function staysOpen(port: number, holdMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.on('error', () => undefined);
    s.once('close', () => resolve(false));
    s.once('connect', () =>
      setTimeout(() => {
        s.removeAllListeners('close');
        s.destroy();
        resolve(true);
      }, holdMs),
    );
  });
}

describe('a gateway at its descriptor limit (real process under ulimit -n 256)', function () {
  this.timeout(90_000);
  let dir: string;
  let gw: Gateway | undefined;
  let sockets: net.Socket[] = [];

  before(function () {
    if (process.platform !== 'linux') this.skip();
  });
  beforeEach(() => {
    dir = scratchDir('fd-exhaustion');
  });
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets = [];
    if (gw && gw.child.exitCode === null) {
      gw.child.kill('SIGKILL');
      await gw.exited;
    }
    gw = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('flooded on its FLV and terminal ports: /healthz and keeps answer throughout, the process lives, media is accepted again after', async () => {
    gw = await startGateway(dir);
    const api = gw.ports['gateway.httpPort'];
    const started = gw.lines.find((l) => l.msg === 'gateway started')!;
    assert.equal((started.connections as { fdLimit: number }).fdLimit, FD_LIMIT);

    const open = await request(api, 'POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 1 });
    assert.equal(open.json.errCode, 0, open.text);
    const reqId = open.json.data[0].reqId as string;

    const probe = new ApiProbe(api, reqId);
    await sleep(200);
    const media = [gw.ports['flv-out.port'], gw.ports['jt1078-ingest.livePort2013'], gw.ports['jt1078-ingest.livePort2019']];
    sockets = await flood(media, 300);
    // the flood stays while the API is probed
    await sleep(2000);
    const metrics = (await request(api, 'GET', '/metrics')).text;
    await probe.stop();

    assert.deepEqual(probe.failures, [], `API calls failed during the flood (${probe.healthz} health checks and ${probe.keeps} keeps answered)`);
    assert.ok(probe.healthz >= 20 && probe.keeps >= 5, `${probe.healthz} health checks, ${probe.keeps} keeps`);
    const byFds = metricSum(metrics, 'gw_core_connections_refused_total', { reason: 'fds' });
    const byListener = metricSum(metrics, 'gw_core_connections_refused_total', { reason: 'listener' });
    assert.ok(byFds > 0, 'the descriptor reserve refused media connections');
    assert.equal(
      byFds +
        byListener +
        metricSum(metrics, 'gw_core_connections_open', {}) -
        metricSum(metrics, 'gw_core_connections_open', { listener: 'gateway.httpPort' }),
      900,
      'every flood connection was either admitted or refused and counted',
    );
    const fds = metricSum(metrics, 'gw_process_process_open_fds');
    assert.ok(fds > FD_LIMIT / 2 && fds < FD_LIMIT, `the process went near its limit and stayed below it (${fds} open)`);
    const refusalLines = gw.lines.filter((l) => String(l.msg).startsWith('connection refused'));
    assert.ok(refusalLines.length <= 6, `${refusalLines.length} refusal lines`);

    for (const s of sockets) s.destroy();
    sockets = [];
    await sleep(500);
    assert.equal(gw.child.exitCode, null, 'the gateway is still running');
    assert.equal(await staysOpen(gw.ports['jt1078-ingest.livePort2013'], 300), true, 'a terminal connects again');
    const play = await request(gw.ports['flv-out.port'], 'GET', `/live/013800138000_1_1.flv?reqId=${reqId}&token=wrong`);
    assert.ok(play.status >= 400 && play.status < 500, `flv-out answers again (${play.status})`);
    assert.equal((await request(api, 'GET', '/healthz')).status, 200);
    const keep = await request(api, 'POST', '/strm/keep', { reqIds: [reqId] });
    assert.equal(keep.json.data[0].keep, true, 'the request was kept alive through the flood');
  });

  it('with the reserve off (fdReserve 0) it still survives running out: libuv sheds connections, and accepts again once the flood ends', async () => {
    gw = await startGateway(dir, { fdReserve: 0 });
    const api = gw.ports['gateway.httpPort'];
    const media = [gw.ports['flv-out.port'], gw.ports['jt1078-ingest.livePort2013'], gw.ports['jt1078-ingest.livePort2019']];
    sockets = await flood(media, 300);
    await sleep(1000);
    // at the limit every port sheds new connections, the API's too: what the reserve is for
    const during = await request(api, 'GET', '/healthz').then(
      (r) => r.status,
      (err: Error) => err.message,
    );
    for (const s of sockets) s.destroy();
    sockets = [];
    await sleep(500);
    assert.equal(gw.child.exitCode, null, `the gateway is still running (health during the flood: ${during})`);
    assert.equal((await request(api, 'GET', '/healthz')).status, 200);
    assert.equal(await staysOpen(gw.ports['jt1078-ingest.livePort2013'], 300), true);
    const play = await request(gw.ports['flv-out.port'], 'GET', '/live/x.flv?reqId=nope&token=t');
    assert.ok(play.status >= 400 && play.status < 500, String(play.status));
  });
});
