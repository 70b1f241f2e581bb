/**
 * One client must not take every file descriptor. Floods on loopback against the real listeners: a plugin's
 * raw TCP port (ctx.net.listenTcp), jt1078-ingest's terminal port and flv-out's player port through the test kit, and
 * a process made to look close to its descriptor limit (a fake probe), so the API's reserve is tried in bounded time.
 * The real limit, with a child process under `ulimit -n`, is fd-exhaustion.test.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { IsInt, Max, Min } from 'class-validator';
import { Kernel } from '../../core/kernel';
import type { FdProbe } from '../../core/fd-probe';
import { parseFdLimit } from '../../core/fd-probe';
import { definePlugin, type PluginDefinition } from '../../plugin-sdk/plugin';
import { DEMO_APP, startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';
import { CAPTURES, TcpTerminal, capture, encodeCapture, openLive, waitFor } from '../e2e/helpers';
import { kernelOf } from '../support/kernel-of';

class EchoConfig {
  @IsInt()
  @Min(0)
  @Max(65535)
  port = 7999;
}

/** A plugin with a raw TCP port that echoes what it reads: a connection that still works answers. */
function echoPlugin(name = 'echo-port'): { def: PluginDefinition<object>; server: () => net.Server } {
  let server: net.Server | undefined;
  const def = definePlugin({
    name,
    config: EchoConfig,
    async setup(ctx) {
      server = await ctx.net.listenTcp({ port: ctx.config.port, key: 'port' }, (s) => {
        s.on('error', () => undefined);
        s.pipe(s);
      });
    },
  }) as PluginDefinition<object>;
  return { def, server: () => server! };
}

interface Client {
  socket: net.Socket;
  startedAt: number;
  closedAt: number;
}

/**
 * n connections at once from `from`; resolves when each completed its handshake or was reset. The kernel completes
 * the handshake before the gateway accepts, so a refused one usually connects and is then reset, or is reset
 * before the client saw its connect complete (ECONNRESET either way); anything else fails.
 */
async function connectMany(port: number, n: number, from = '127.0.0.1'): Promise<Client[]> {
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Client>((resolve, reject) => {
          const socket = net.connect({ host: '127.0.0.1', port, localAddress: from });
          const c: Client = { socket, startedAt: Date.now(), closedAt: 0 };
          let error: NodeJS.ErrnoException | undefined;
          socket.on('error', (err) => {
            error = err;
          });
          socket.once('close', () => {
            c.closedAt = Date.now();
            if (error && error.code !== 'ECONNRESET') reject(error);
            else resolve(c);
          });
          socket.once('connect', () => resolve(c));
        }),
    ),
  );
}

async function echoes(c: Client, text: string): Promise<boolean> {
  if (c.socket.destroyed) return false;
  const got = new Promise<boolean>((resolve) => {
    let buf = '';
    const onData = (d: Buffer): void => {
      buf += d.toString();
      if (buf === text) {
        c.socket.off('data', onData);
        resolve(true);
      }
    };
    c.socket.on('data', onData);
    c.socket.once('close', () => resolve(false));
  });
  c.socket.write(text);
  return Promise.race([got, sleep(2000).then(() => false)]);
}

/** Sum of a metric's samples whose labels include all of `labels` (registry read directly: /metrics is a listener too). */
async function metric(kernel: Kernel, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = kernel.registry.getSingleMetric(name);
  if (!m) return 0;
  const { values } = await m.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, x]) => String((v.labels as Record<string, unknown>)[k]) === x))
    .reduce((s, v) => s + v.value, 0);
}

const refusalLines = (logs: Array<Record<string, unknown>>, listener?: string) =>
  logs.filter((l) => String(l.msg).startsWith('connection refused') && (listener === undefined || l.listener === listener));

/** refusals a set of log lines accounts for: a first line is one, a "(repeated)" line carries its count */
const refusalsLogged = (lines: Array<Record<string, unknown>>) => lines.reduce((s, l) => s + (String(l.msg).endsWith('(repeated)') ? Number(l.count) : 1), 0);

function closeAll(clients: Client[]): void {
  for (const c of clients) c.socket.destroy();
}

describe('connection caps and the descriptor reserve', function () {
  this.timeout(60_000);

  describe("a flood on a plugin's raw TCP port from one address", () => {
    let gw: TestGateway;
    const echo = echoPlugin();
    const clients: Client[] = [];
    before(async () => {
      gw = await startTestGateway({
        plugins: [{ name: 'echo-port', def: echo.def }],
        // loopback is exempt by default (a TLS front on the same host); here it plays the attacker
        gateway: { maxTcpConnectionsPerAddress: 20, perAddressExempt: [] },
        captureLogs: true,
      });
    });
    after(async () => {
      closeAll(clients);
      await gw?.stop();
    });

    it('past the per-address cap: the excess is reset at once, counted and logged in a line or two; earlier connections keep working', async () => {
      const port = gw.ports['echo-port.port'];
      const early = await connectMany(port, 20);
      clients.push(...early);
      await sleep(200);
      assert.equal(early.filter((c) => c.closedAt).length, 0, 'the first 20 are admitted');
      assert.equal(await metric(kernelOf(gw), 'gw_core_connections_open', { listener: 'echo-port.port' }), 20);

      const t0 = Date.now();
      const flood = await connectMany(port, 400);
      clients.push(...flood);
      await waitFor('every connection past the cap closed', () => flood.every((c) => c.closedAt), 5000);
      const slowest = Math.max(...flood.map((c) => c.closedAt - c.startedAt));
      assert.ok(slowest < 2000, `the slowest refused connection was closed ${slowest} ms after it was opened`);
      assert.ok(Date.now() - t0 < 5000);

      assert.equal(await metric(kernelOf(gw), 'gw_core_connections_refused_total', { listener: 'echo-port.port', reason: 'address' }), 400);
      assert.equal(await metric(kernelOf(gw), 'gw_core_connections_open', { listener: 'echo-port.port' }), 20);
      const lines = refusalLines(gw.logs);
      assert.ok(lines.length >= 1 && lines.length <= 2, `${lines.length} refusal lines for 400 refusals`);
      assert.equal(lines[0].listener, 'echo-port.port');
      assert.equal(lines[0].reason, 'address');
      assert.equal(lines[0].limit, 20);

      for (const [i, c] of early.entries()) assert.equal(await echoes(c, `still here ${i}`), true, `early connection ${i} answers`);
    });

    it('the cap is per address: another address gets in; a freed slot is taken again', async () => {
      const port = gw.ports['echo-port.port'];
      const other = await connectMany(port, 5, '127.0.0.2');
      clients.push(...other);
      await sleep(200);
      assert.equal(other.filter((c) => c.closedAt).length, 0);
      assert.equal(await echoes(other[0], 'other'), true);

      const open = clients.filter((c) => c.socket.localAddress === '127.0.0.1' && !c.closedAt).slice(0, 3);
      for (const c of open) {
        const closed = once(c.socket, 'close');
        c.socket.end();
        await closed;
      }
      await waitFor('the gateway saw them close', async () => (await metric(kernelOf(gw), 'gw_core_connections_open', { listener: 'echo-port.port' })) === 22);
      const again = await connectMany(port, 3);
      clients.push(...again);
      for (const c of again) assert.equal(await echoes(c, 'again'), true);
    });

    it('every refusal is counted in the log once the rate-limited summary is written (at stop at the latest)', async () => {
      kernelOf(gw).connections.stop();
      const lines = refusalLines(gw.logs, 'echo-port.port');
      assert.ok(lines.length <= 3, `${lines.length} lines`);
      assert.equal(refusalsLogged(lines), 400);
      const summary = lines.find((l) => String(l.msg).endsWith('(repeated)'))!;
      assert.deepEqual(summary.top, { remote: '127.0.0.1', n: 399 });
    });
  });

  describe("jt1078-ingest's terminal port and flv-out's player port through the test kit", () => {
    let gw: TestGateway;
    const clients: Client[] = [];
    before(async () => {
      gw = await startTestGateway({
        plugins: [
          { name: 'jt1078-ingest', config: { udp: false, unknownGraceMs: 60_000 } },
          { name: 'flv-out', config: {} },
        ],
        gateway: {
          perAddressExempt: [],
          listenerLimits: { 'jt1078-ingest.livePort2013': { maxConnectionsPerAddress: 8 }, 'flv-out.port': { maxConnectionsPerAddress: 16 } },
        },
        captureLogs: true,
      });
    });
    after(async () => {
      closeAll(clients);
      await gw?.stop();
    });

    it("the limits in effect: the site's listenerLimits, else the defaults by kind (terminal ports 4096, HTTP 256)", () => {
      const d = kernelOf(gw).connections.describe();
      assert.equal(d.listeners['jt1078-ingest.livePort2013'].maxConnectionsPerAddress, 8);
      assert.equal(d.listeners['jt1078-ingest.livePort2019'].maxConnectionsPerAddress, 4096);
      assert.equal(d.listeners['flv-out.port'].maxConnectionsPerAddress, 16);
      assert.equal(d.listeners['gateway.httpPort'].maxConnectionsPerAddress, 256);
    });

    it('a terminal connected before a flood from its own address keeps pushing: its request gets ready', async () => {
      const cap = CAPTURES[0];
      const port = gw.ports['jt1078-ingest.livePort2013'];
      const open = await openLive(gw, cap.sim, cap.channel);
      const terminal = await TcpTerminal.connect(port);
      const flood = await connectMany(port, 300);
      clients.push(...flood);
      await waitFor('the flood past the cap is closed', () => flood.filter((c) => c.closedAt).length === 300 - 7, 5000);
      await sleep(200);
      assert.equal(flood.filter((c) => !c.closedAt).length, 7, 'seven more fit under the cap of 8');
      assert.equal(await metric(kernelOf(gw), 'gw_core_connections_refused_total', { listener: 'jt1078-ingest.livePort2013', reason: 'address' }), 293);

      await terminal.send(encodeCapture(capture(cap.file).packets), 64, 5);
      const ready = await gw.waitReady(open.reqId, 10_000);
      assert.equal(ready.ready, true);
      assert.equal(terminal.socket.destroyed, false);
      await terminal.end();

      // the cap is the listener's: the 2019 port still takes connections from this address
      const other = await connectMany(gw.ports['jt1078-ingest.livePort2019'], 20);
      clients.push(...other);
      await sleep(200);
      assert.equal(other.filter((c) => c.closedAt).length, 0);
    });

    it("players past the cap on flv-out's port are reset; the API port is another listener and answers", async () => {
      const flood = await connectMany(gw.ports['flv-out.port'], 100);
      clients.push(...flood);
      await waitFor('84 refused', () => flood.filter((c) => c.closedAt).length === 84, 5000);
      assert.equal(await metric(kernelOf(gw), 'gw_core_connections_refused_total', { listener: 'flv-out.port', reason: 'address' }), 84);
      const h = await gw.api('GET', '/healthz', undefined, null);
      assert.equal(h.status, 200);
      const lines = refusalLines(gw.logs);
      assert.ok(lines.length <= 4, `${lines.length} refusal lines for 377 refusals on two listeners`);
    });
  });

  describe('listener errors', () => {
    let gw: TestGateway;
    const echo = echoPlugin();
    before(async () => {
      gw = await startTestGateway({ plugins: [{ name: 'echo-port', def: echo.def }], captureLogs: true });
    });
    after(() => gw?.stop());

    it('an accept failure reported on a listener (EMFILE) is counted and logged rate-limited; the listener keeps serving', async () => {
      const emfile = () => Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'accept' });
      // Node 20 on Linux never reports one (libuv sheds the connection itself); other platforms and versions do,
      // and an 'error' with no listener is thrown: the API server had none once bound
      for (let i = 0; i < 1000; i++) {
        kernelOf(gw).api.server.emit('error', emfile());
        echo.server().emit('error', emfile());
      }
      assert.equal(kernelOf(gw).api.server.listening, true);
      assert.equal(echo.server().listening, true);
      assert.equal(await metric(kernelOf(gw), 'gw_core_listener_errors_total', { listener: 'gateway.httpPort', code: 'EMFILE' }), 1000);
      assert.equal(await metric(kernelOf(gw), 'gw_core_listener_errors_total', { listener: 'echo-port.port', code: 'EMFILE' }), 1000);
      const lines = gw.logs.filter((l) => l.code === 'EMFILE');
      assert.equal(lines.length, 2, 'one line per listener');
      assert.match(String(lines[0].msg), /out of file descriptors \(still listening\)/);

      assert.equal((await gw.api('GET', '/healthz', undefined, null)).status, 200);
      const [c] = await connectMany(gw.ports['echo-port.port'], 1);
      assert.equal(await echoes(c, 'ping'), true);
      c.socket.destroy();
    });
  });

  describe('the descriptor reserve: a process near its limit keeps the API port reachable', () => {
    const realCount = () => fs.statSync('/proc/self/fd').size || fs.readdirSync('/proc/self/fd').length - 1;
    let kernel: Kernel;
    let dataDir: string;
    let limit = 0;
    const logs: Array<Record<string, unknown>> = [];
    const clients: Client[] = [];
    const echo = echoPlugin();
    const stub = stubMediaPlugin({ fmts: [0] });

    before(async function () {
      if (!fs.existsSync('/proc/self/fd')) this.skip();
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-fds-'));
      // this process looks like it may open 100 more descriptors before the media reserve (40) starts
      limit = realCount() + 140;
      const probe: FdProbe = { cheap: true, limit: () => limit, count: realCount };
      const dest = new Writable({
        write(chunk: Buffer, _e, done) {
          for (const line of chunk.toString().split('\n')) if (line.trim()) logs.push(JSON.parse(line));
          done();
        },
      });
      kernel = new Kernel({
        site: {
          name: 'fds',
          file: 'fds-site.json',
          dir: process.cwd(),
          gateway: {
            httpPort: 0,
            listenHost: '127.0.0.1',
            dataDir,
            applications: [DEMO_APP],
            store: { kind: 'memory' },
            fdReserve: 40,
            maxConnectionsPerListener: 100_000,
          },
          plugins: [
            { name: 'echo-port', config: {} },
            { name: stub.name, config: {} },
          ],
        },
        env: {},
        logDestination: dest,
        pluginDefs: { 'echo-port': echo.def, [stub.name]: stub.def },
        freePorts: true,
        fdProbe: probe,
      });
      await kernel.start();
    });
    after(async () => {
      closeAll(clients);
      await kernel?.stop();
      if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    });

    /** one request on a connection of its own, closed after (a keep-alive pool would hide a refused connection) */
    const api = (p: string, body?: unknown): Promise<{ status: number; json: any }> =>
      new Promise((resolve, reject) => {
        const text = body === undefined ? undefined : JSON.stringify(body);
        const req = http.request(
          {
            host: '127.0.0.1',
            port: kernel.ports['gateway.httpPort'],
            path: p,
            method: text === undefined ? 'GET' : 'POST',
            agent: false,
            headers: {
              authorization: 'Basic ' + Buffer.from('demo:demo').toString('base64'),
              ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }),
            },
          },
          (res) => {
            let t = '';
            res.on('data', (c: Buffer) => {
              t += c.toString();
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(t) }));
          },
        );
        req.on('error', reject);
        req.end(text);
      });

    /** connections a few at a time, as a flood arrives: all at once would be refused before the first is accepted */
    async function trickle(port: number, n: number, batch = 5): Promise<Client[]> {
      const out: Client[] = [];
      for (let i = 0; i < n; i += batch) {
        out.push(...(await connectMany(port, Math.min(batch, n - i))));
        await sleep(20);
      }
      return out;
    }

    it('the media port refuses once the reserve is reached; the API port answers opens, keeps and health; freed descriptors let media in again', async () => {
      const d = kernel.connections.describe();
      assert.equal(d.fdLimit, limit);
      const reserve = Math.min(40, Math.floor(limit / 4));
      assert.equal(d.fdReserve, reserve);
      const port = kernel.ports['echo-port.port'];
      const opened = await api('/strm/open', { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 1 });
      assert.equal(opened.json.errCode, 0, JSON.stringify(opened.json));
      const reqId = opened.json.data[0].reqId as string;

      // each loopback connection is two descriptors of this process (both ends)
      const flood = await trickle(port, 150);
      clients.push(...flood);
      await waitFor(
        'refusals for descriptors',
        async () => (await metric(kernel, 'gw_core_connections_refused_total', { listener: 'echo-port.port', reason: 'fds' })) > 0,
        5000,
      );
      await sleep(300);
      const admitted = flood.filter((c) => !c.closedAt);
      assert.ok(admitted.length > 20 && admitted.length < 75, `${admitted.length} admitted`);
      assert.ok(realCount() <= limit - reserve + 6, `${realCount()} open of ${limit}`);
      const refused = await metric(kernel, 'gw_core_connections_refused_total', { listener: 'echo-port.port', reason: 'fds' });
      assert.equal(refused, 150 - admitted.length);
      assert.ok(refusalLines(logs, 'echo-port.port').length <= 2);

      for (let i = 0; i < 10; i++) {
        assert.equal((await api('/healthz')).status, 200);
        const k = await api('/strm/keep', { reqIds: [reqId] });
        assert.equal(k.json.errCode, 0, JSON.stringify(k.json));
      }
      // media still refused
      // (the count is sampled every 10 ms, so a connection or two may slip under the ceiling first)
      const late = await connectMany(port, 10);
      clients.push(...late);
      await waitFor('late media connections refused', () => late.filter((c) => c.closedAt).length >= 7, 3000);

      // a late one that slipped under the ceiling is open too
      closeAll(flood);
      closeAll(late);
      await waitFor(
        'the flood closed on the gateway side',
        async () => (await metric(kernel, 'gw_core_connections_open', { listener: 'echo-port.port' })) === 0,
        5000,
      );
      const back = await connectMany(port, 5);
      clients.push(...back);
      for (const c of back) assert.equal(await echoes(c, 'back'), true);
      closeAll(back);
    });

    it('the API port has half of the reserve: it too stops short of the limit', async () => {
      const port = kernel.ports['gateway.httpPort'];
      const idle = await trickle(port, 100, 4);
      clients.push(...idle);
      await waitFor(
        'an API connection refused for descriptors',
        async () => (await metric(kernel, 'gw_core_connections_refused_total', { listener: 'gateway.httpPort', reason: 'fds' })) > 0,
        5000,
      );
      assert.ok(realCount() <= limit - 10, `${realCount()} open of ${limit}`);
      assert.ok(idle.filter((c) => !c.closedAt).length > 10);
      const line = refusalLines(logs, 'gateway.httpPort')[0];
      assert.match(String(line.msg), /at the process limit/);
      closeAll(idle);
    });
  });

  describe('configuration', () => {
    const boot = async (
      gateway: Record<string, unknown>,
      plugins: Array<{ name: string; config?: Record<string, unknown>; def?: PluginDefinition<object> }> = [],
    ) => {
      const gw = await startTestGateway({ plugins, gateway });
      await gw.stop();
      return gw;
    };

    it("a plugin's own per-address default (ListenOptions) applies unless the site overrides it", async () => {
      const def = definePlugin({
        name: 'player-port',
        config: EchoConfig,
        async setup(ctx) {
          await ctx.net.listenTcp({ port: ctx.config.port, key: 'port', maxConnectionsPerAddress: 32 }, (s) => s.destroy());
          await ctx.net.listenHttp({ port: 0, key: 'httpPort', maxConnectionsPerAddress: 8 });
        },
      }) as PluginDefinition<object>;
      const gw = await startTestGateway({ plugins: [{ name: 'player-port', def }] });
      try {
        const d = kernelOf(gw).connections.describe();
        assert.equal(d.listeners['player-port.port'].maxConnectionsPerAddress, 32);
        assert.equal(d.listeners['player-port.httpPort'].maxConnectionsPerAddress, 8);
      } finally {
        await gw.stop();
      }
      const over = await startTestGateway({
        plugins: [{ name: 'player-port', def }],
        gateway: { listenerLimits: { 'player-port.port': { maxConnectionsPerAddress: 0, maxConnections: 50 } } },
      });
      try {
        const d = kernelOf(over).connections.describe();
        assert.equal(d.listeners['player-port.port'].maxConnectionsPerAddress, null, '0: no per-address cap');
        assert.equal(d.listeners['player-port.port'].maxConnections, 50);
      } finally {
        await over.stop();
      }
    });

    it('maxConnectionsPerListener 0 is half of the descriptors below the reserve', async () => {
      const gw = await startTestGateway({ plugins: [], gateway: { fdReserve: 100 } });
      try {
        const d = kernelOf(gw).connections.describe();
        if (d.fdLimit === undefined) return;
        const reserve = Math.min(100, Math.floor(d.fdLimit / 4));
        assert.equal(d.fdReserve, reserve);
        assert.equal(d.listeners['gateway.httpPort'].maxConnections, Math.floor((d.fdLimit - reserve) / 2));
      } finally {
        await gw.stop();
      }
    });

    it('bad listenerLimits and perAddressExempt stop boot naming the key; so does a listener the site does not have', async () => {
      await assert.rejects(
        boot({ listenerLimits: { 'flv-out.port': { maxConections: 5 } } }),
        /gateway: key listenerLimits\.flv-out\.port\.maxConections: unknown key/,
      );
      await assert.rejects(
        boot({ listenerLimits: { 'flv-out.port': { maxConnections: -1 } } }),
        /key listenerLimits\.flv-out\.port\.maxConnections: must be an integer/,
      );
      await assert.rejects(boot({ listenerLimits: { flv: {} } }), /key listenerLimits\.flv: a listener is named/);
      await assert.rejects(boot({ perAddressExempt: ['10.0.0.0/33'] }), /key perAddressExempt\[0\]: prefix \/33/);
      const echo = echoPlugin();
      await assert.rejects(
        boot({ listenerLimits: { 'echo-port.prot': { maxConnections: 5 } } }, [{ name: 'echo-port', def: echo.def }]),
        /gateway: key listenerLimits\.echo-port\.prot: no such listener on this site \(its listeners: gateway\.httpPort, echo-port\.port\)/,
      );
    });

    it('reads the soft limit from /proc/self/limits', () => {
      const text =
        'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 524288               files     \n';
      assert.equal(parseFdLimit(text), 1024);
      assert.equal(parseFdLimit(text.replace('1024 ', 'unlimited ')), undefined);
      assert.equal(parseFdLimit('nothing'), undefined);
    });
  });
});
