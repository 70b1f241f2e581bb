import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { Kernel } from '../core/kernel';
import type { SiteSpec } from '../core/site';
import type { Clock } from './clock';
import type { PluginDefinition } from './plugin';
import type { MediaBus } from './bus';
import type { Sessions } from './sessions';
import {
  openStream,
  publishClip,
  waitReady,
  type ClipPublisher,
  type OpenedStream,
  type OpenStreamOptions,
  type PublishOptions,
  type RequestStatus,
} from './testkit-media';
import type { TestClip } from './testkit-clips';
import { Buffer } from 'node:buffer';

export * from './testkit-clips';
export * from './testkit-media';
export * from './testkit-probe';

export interface TestGatewayOptions {
  /**
   * plugins by name with their config. Port-like keys you leave out (numeric `port`, `…Port`, `…Port2013`,
   * `…Port2019` with a default) bind a free port, not their default; read the bound ones from `ports`.
   * `public…` keys keep their default (unset: the bound port).
   */
  plugins: Array<{ name: string; config?: Record<string, unknown>; def?: PluginDefinition<object> }>;
  /** gateway keys (httpPort defaults to 0, dataDir to a fresh temp folder) */
  gateway?: Record<string, unknown>;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
  /** keep log lines in memory (see `logs`) instead of discarding them; GW_TEST_LOG=1 prints them */
  captureLogs?: boolean;
}

export interface TestGateway {
  /** the media bus, as a plugin's `ctx.bus` sees it (streams of every plugin) */
  bus: MediaBus;
  /** the sessions, as a plugin's `ctx.sessions` sees them */
  sessions: Sessions;
  baseUrl: string;
  dataDir: string;
  /** bound ports by "<plugin>.<key>" (UDP ones "<plugin>.<key>:udp") and "gateway.httpPort" */
  ports: Record<string, number>;
  /** captured log lines (JSON objects) when captureLogs is set */
  logs: Array<Record<string, unknown>>;
  /** raw captured log text */
  logText(): string;
  /** JSON request to the API; auth is "user:password" (default demo:demo), or null for none */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read the answer's fields directly; a field read wrong fails the test
  api(method: string, path: string, body?: unknown, auth?: string | null): Promise<{ status: number; headers: Headers; json: any }>;
  /** POST /strm/open as the demo application: the reqId, play URL and the bus stream's name (see testkit-media.ts) */
  openStream(opts: OpenStreamOptions): Promise<OpenedStream>;
  /**
   * polls /strm/status until the request is ready (default 10 s), else fails saying what the request looks like;
   * auth as for `openStream` (default the demo application)
   */
  waitReady(reqId: string, timeoutMs?: number, auth?: string): Promise<RequestStatus>;
  /** attaches a publisher to a bus stream and pushes a `testClip()` into it; stopped by `stop()` at the latest */
  publish(streamName: string, clip: TestClip, opts?: PublishOptions): ClipPublisher;
  stop(): Promise<void>;
}

export const DEMO_APP = { appId: 'demo', user: 'demo', password: 'demo' };

/**
 * Boots a kernel in this process with the chosen plugins on free loopback ports.
 * What a plugin's tests use instead of a real site file; everything else (HTTP, sockets, files) is real.
 */
export async function startTestGateway(opts: TestGatewayOptions): Promise<TestGateway> {
  const givenDir = typeof opts.gateway?.dataDir === 'string' ? opts.gateway.dataDir : undefined;
  const dataDir = givenDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'gw-test-'));
  const logs: Array<Record<string, unknown>> = [];
  let text = '';
  const dest = new Writable({
    write(chunk: Buffer, _enc, done) {
      const s = chunk.toString('utf8');
      if (process.env.GW_TEST_LOG) process.stdout.write(s);
      if (opts.captureLogs) {
        text += s;
        for (const line of s.split('\n'))
          if (line.trim()) {
            try {
              logs.push(JSON.parse(line) as Record<string, unknown>);
            } catch {
              /* partial line */
            }
          }
      }
      done();
    },
  });
  const pluginDefs: Record<string, PluginDefinition<object>> = {};
  for (const p of opts.plugins) if (p.def) pluginDefs[p.name] = p.def;
  const site: SiteSpec = {
    name: 'test',
    file: 'test-site.json',
    dir: process.cwd(),
    gateway: { httpPort: 0, listenHost: '127.0.0.1', dataDir, applications: [DEMO_APP], logLevel: 'debug', ...opts.gateway },
    plugins: opts.plugins.map((p) => ({ name: p.name, config: p.config ?? {} })),
  };
  const kernel = new Kernel({ site, env: opts.env ?? {}, clock: opts.clock, logDestination: dest, pluginDefs, freePorts: true });
  try {
    await kernel.start();
  } catch (err) {
    if (!givenDir) fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const baseUrl = `http://127.0.0.1:${kernel.ports['gateway.httpPort']}`;
  const publishers = new Set<ClipPublisher>();
  const gw: TestGateway = {
    bus: kernel.bus.viewFor('testkit', kernel.log.child({ part: 'testkit' })),
    sessions: kernel.sessions,
    baseUrl,
    dataDir,
    ports: kernel.ports,
    logs,
    logText: () => text,
    async api(method, p, body, auth = 'demo:demo') {
      const headers: Record<string, string> = {};
      if (auth) headers.authorization = 'Basic ' + Buffer.from(auth).toString('base64');
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(baseUrl + p, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
      const t = await res.text();
      let json: unknown;
      try {
        json = JSON.parse(t);
      } catch {
        json = t;
      }
      return { status: res.status, headers: res.headers, json };
    },
    openStream: (o) => openStream(gw, o),
    waitReady: (reqId, timeoutMs, auth) => waitReady(gw, reqId, timeoutMs, auth),
    publish(streamName, clip, o) {
      const p = publishClip(gw, streamName, clip, o);
      publishers.add(p);
      void p.done.then(() => publishers.delete(p));
      return p;
    },
    async stop() {
      // an endless loop would otherwise outlive the gateway on its timers
      for (const p of publishers) p.stop();
      await kernel.stop();
      // a data directory the test passed in is kept (restart tests reuse it)
      if (!givenDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  // core's own tests reach the kernel behind a gateway (test/support/kernel-of.ts); plugins see bus and sessions only
  Object.defineProperty(gw, KERNEL, { value: kernel });
  return gw;
}

/** where core's tests find the kernel behind a TestGateway */
export const KERNEL = Symbol.for('jt1078-gateway.test-kernel');

/**
 * A stand-in ingest and output for kernel and plugin tests that need open to succeed without media:
 * push ports are reported as given, play URLs point nowhere. Never part of a site.
 */
export function stubMediaPlugin(opts: { fmts?: number[]; name?: string } = {}): { name: string; def: PluginDefinition<object> } {
  const name = opts.name ?? 'stub-media';
  const def: PluginDefinition<object> = {
    name,
    setup(ctx) {
      ctx.sessions.registerIngest({
        name,
        source: 'terminal',
        pushAddress: (typ) => ({
          host: ctx.site.publicHost,
          port: typ === 'live' ? 7612 : 7614,
          tcp: true,
          port2019: typ === 'live' ? 7613 : 7615,
          tcp2019: true,
        }),
      });
      for (const fmt of opts.fmts ?? [0]) {
        ctx.sessions.registerOutput({
          name,
          fmt,
          schemes: fmt === 4 ? ['rtsp'] : ['http', 'ws'],
          playUrl: (a) => `${a.scheme}://${a.host}:1/live/${a.streamName}?reqId=${a.reqId}&token=${encodeURIComponent(a.token)}`,
        });
      }
    },
  };
  return { name, def };
}
