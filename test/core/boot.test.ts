import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { repoRoot, scratchDir } from '../support/paths';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
const EXAMPLE = path.join(repoRoot, 'dist', 'plugin-sdk', 'examples', 'presence-allowlist', 'index.js');

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runGateway(
  siteFile: string,
  env: Record<string, string> = {},
  onStdout?: (s: string, kill: () => void) => void,
  nodeArgs: string[] = [],
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs, MAIN, siteFile], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout.on('data', (d) => {
      stdout += d;
      onStdout?.(stdout, () => child.kill('SIGTERM'));
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function writeSite(dir: string, doc: unknown): string {
  const f = path.join(dir, 'site.json');
  fs.writeFileSync(f, JSON.stringify(doc, null, 2));
  return f;
}

const gateway = (dir: string, extra: Record<string, unknown> = {}) => ({
  httpPort: 0,
  listenHost: '127.0.0.1',
  dataDir: path.join(dir, 'data'),
  applications: [{ appId: 'a', user: 'u', password: 'p' }],
  ...extra,
});

describe('boot failures stop the process with a one-line message naming site, plugin and key', () => {
  let dir: string;
  beforeEach(() => {
    dir = scratchDir('boot');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function assertOneLine(r: Run, ...parts: RegExp[]): void {
    assert.notEqual(r.code, 0, 'non-zero exit');
    assert.equal(r.signal, null, 'exited by itself, not killed');
    const line = r.stderr.trim();
    assert.equal(line.split('\n').length, 1, `one line, got: ${line}`);
    assert.match(line, /^boot failed: /);
    assert.ok(!/\n\s+at /.test(r.stderr), 'no stack trace');
    for (const p of parts) assert.match(line, p);
  }

  it('a bad gateway value', async () => {
    const f = writeSite(dir, { gateway: gateway(dir, { keepIntvDefault: 5 }), plugins: [] });
    assertOneLine(await runGateway(f), /site\.json/, /gateway/, /key keepIntvDefault/);
  });

  it('a bad plugin config value', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE, config: { offline: 'not-a-list' } }] });
    assertOneLine(await runGateway(f), /site\.json/, /plugin presence-allowlist/, /key offline/);
  });

  it('an unknown plugin config key', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE, config: { ofline: [] } }] });
    assertOneLine(await runGateway(f), /plugin presence-allowlist/, /key ofline: unknown key/);
  });

  it('a bad value from the environment names the variable', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [] });
    assertOneLine(await runGateway(f, { GW_HTTP_PORT: '99999' }), /key httpPort/, /GW_HTTP_PORT/);
    const g = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    assertOneLine(await runGateway(g, { GW_PRESENCE_ALLOWLIST_OFFLINE: '42' }), /plugin presence-allowlist/, /key offline/, /GW_PRESENCE_ALLOWLIST_OFFLINE/);
  });

  /**
   * A plugin module named flv-out with flv-out's port key and its GW_FLV_PORT alias, so the messages are the ones an
   * operator of the default site would see, whatever the real plugin's other keys are.
   */
  function flvOutLike(): string {
    const mod = path.join(dir, 'flv-out-like.js');
    const cv = JSON.stringify(path.join(repoRoot, 'node_modules', 'class-validator'));
    fs.writeFileSync(
      mod,
      [
        `const { IsInt, Min, Max, IsBoolean } = require(${cv});`,
        'class Config { constructor() { this.port = 7081; this.gopCache = true; } }',
        "IsInt()(Config.prototype, 'port'); Min(0)(Config.prototype, 'port'); Max(65535)(Config.prototype, 'port');",
        "IsBoolean()(Config.prototype, 'gopCache');",
        "exports.default = { name: 'flv-out', config: Config, env: { port: 'GW_FLV_PORT' }, setup() {} };",
      ].join('\n'),
    );
    return mod;
  }

  it('a misspelt GW_<PLUGIN>_<KEY> variable names the variable, the plugin and the closest key', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'flv-out', module: flvOutLike() }] });
    const r = await runGateway(f, { GW_FLV_OUT_PROT: '7081' });
    assertOneLine(r, /site\.json: GW_FLV_OUT_PROT: no key 'prot' in plugin flv-out \(did you mean GW_FLV_OUT_PORT\?\)$/);
    assert.equal(r.code, 1);
    assert.ok(!/plugin started|gateway started/.test(r.stdout), r.stdout);

    const g = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    assertOneLine(
      await runGateway(g, { GW_PRESENCE_ALLOWLIST_OFLINE: '[]' }),
      /GW_PRESENCE_ALLOWLIST_OFLINE: no key 'ofline' in plugin presence-allowlist \(did you mean GW_PRESENCE_ALLOWLIST_OFFLINE\?\)/,
    );
  });

  it("a value that is not of the key's type says so, not a range", async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'flv-out', module: flvOutLike() }] });
    const port = await runGateway(f, { GW_FLV_OUT_PORT: 'abc' });
    assertOneLine(port, /site\.json: plugin flv-out: key port \(GW_FLV_OUT_PORT\): 'abc' is not an integer$/);
    assert.doesNotMatch(port.stderr, /greater|less/);
    assertOneLine(await runGateway(f, { GW_FLV_PORT: '70.81' }), /plugin flv-out: key port \(GW_FLV_PORT\): '70\.81' is not an integer$/);
    assertOneLine(await runGateway(f, { GW_FLV_OUT_GOP_CACHE: 'maybe' }), /plugin flv-out: key gopCache \(GW_FLV_OUT_GOP_CACHE\): 'maybe' is not a boolean/);
    assertOneLine(await runGateway(f, { GW_HTTP_PORT: 'http' }), /site\.json: gateway: key httpPort \(GW_HTTP_PORT\): 'http' is not an integer$/);
    assertOneLine(
      await runGateway(f, { GW_APPLICATIONS: '{"appId":"a"}' }),
      /gateway: key applications \(GW_APPLICATIONS\): '\{"appId":"a"\}' is not a JSON array/,
    );
  });

  it('a GW_ variable for no plugin on the site and no kernel key only warns', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    let started = false;
    const r = await runGateway(f, { GW_RECORDER_MAX_TOTAL_BYTES: '1000000', GW_HTTP_PROT: '1', GW_DEBUG: '1' }, (out, kill) => {
      if (!started && out.includes('gateway started')) {
        started = true;
        kill();
      }
    });
    assert.equal(started, true, r.stdout + r.stderr);
    assert.equal(r.code, 0, r.stderr);
    const warnings = r.stdout
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as { level: number; env?: string; msg: string })
      .filter((l) => l.env);
    assert.deepEqual(
      warnings.map((w) => [w.level, w.env]),
      [
        [40, 'GW_HTTP_PROT'],
        [40, 'GW_RECORDER_MAX_TOTAL_BYTES'],
      ],
    );
    assert.match(warnings[0]!.msg, /ignored \(did you mean GW_HTTP_PORT\?\)/);
  });

  it('an unknown plugin', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'no-such-plugin' }] });
    assertOneLine(await runGateway(f), /plugin no-such-plugin/, /unknown plugin/);
  });

  it('a plugin whose setup throws', async () => {
    const mod = path.join(dir, 'boom.js');
    fs.writeFileSync(mod, "exports.default = { name: 'boom', setup() { throw new Error('kaboom: cannot reach the widget'); } };\n");
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'boom', module: mod }] });
    assertOneLine(await runGateway(f), /plugin boom/, /setup failed: kaboom/);
  });

  it('a port already in use', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const f = writeSite(dir, { gateway: gateway(dir, { httpPort: port }), plugins: [] });
      assertOneLine(await runGateway(f), /gateway/, /key httpPort/, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
    } finally {
      blocker.close();
    }
  });

  it('a gov application on a site without gov-timed-token (its opens would go unchecked)', async () => {
    const apps = [
      { appId: 'a', user: 'u', password: 'p', admin: true },
      { appId: 'city-gov', user: 'g', password: 'pg', gov: true },
    ];
    const f = writeSite(dir, { gateway: gateway(dir, { applications: apps }), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    const r = await runGateway(f);
    assertOneLine(r, /site\.json/, /gateway: key applications\[1\]\.gov/, /application 'city-gov' is marked gov/, /gov-timed-token/);
    assert.equal(r.code, 1);
    // nothing was started: no port was bound, no plugin ran
    assert.ok(!/plugin started|gateway started/.test(r.stdout), r.stdout);
  });

  it('a gov application boots when the site runs gov-timed-token; an admin mark alone needs no plugin', async () => {
    const gov = writeSite(dir, {
      gateway: gateway(dir, { applications: [{ appId: 'city-gov', user: 'g', password: 'pg', gov: true }] }),
      plugins: [{ name: 'gov-timed-token' }],
    });
    let started = false;
    const r = await runGateway(gov, {}, (out, kill) => {
      if (!started && out.includes('gateway started')) {
        started = true;
        kill();
      }
    });
    assert.equal(started, true, r.stdout + r.stderr);
    assert.equal(r.code, 0, r.stderr);

    const admin = writeSite(dir, { gateway: gateway(dir, { applications: [{ appId: 'ops', user: 'o', password: 'po', admin: true }] }), plugins: [] });
    let adminStarted = false;
    const r2 = await runGateway(admin, {}, (out, kill) => {
      if (!adminStarted && out.includes('gateway started')) {
        adminStarted = true;
        kill();
      }
    });
    assert.equal(adminStarted, true, r2.stdout + r2.stderr);
  });

  it('an unreachable Redis store fails within seconds, naming gateway store.url, password hidden', async () => {
    const f = writeSite(dir, {
      gateway: gateway(dir, { store: { kind: 'redis', url: 'redis://:s3cret-store-pw@127.0.0.1:1' } }),
      plugins: [{ name: 'gov-timed-token' }],
    });
    const t0 = Date.now();
    const r = await runGateway(f);
    const took = Date.now() - t0;
    assertOneLine(r, /site\.json: gateway: key store\.url: /, /Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1 is not reachable/, /ECONNREFUSED/);
    assert.equal(r.code, 1);
    assert.ok(!(r.stdout + r.stderr).includes('s3cret-store-pw'), 'the password is not shown');
    assert.ok(!/plugin gov-timed-token/.test(r.stderr), 'the store is named, not the first plugin that used it');
    assert.ok(took < 9000, `took ${took} ms`);
  });

  it('a Redis store that accepts connections but never answers fails the same way', async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => {
      s.resume();
      sockets.add(s);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const f = writeSite(dir, {
        gateway: gateway(dir, { store: { kind: 'redis', url: `redis://127.0.0.1:${port}` } }),
        plugins: [{ name: 'gov-timed-token' }],
      });
      const t0 = Date.now();
      const r = await runGateway(f);
      assertOneLine(r, /gateway: key store\.url: /, /is not reachable \(no answer to PING/);
      assert.ok(Date.now() - t0 < 9000, `took ${Date.now() - t0} ms`);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it('a missing site file', async () => {
    assertOneLine(await runGateway(path.join(dir, 'nope', 'site.json')), /site file not found/);
  });

  it('SIGTERM stops a running gateway cleanly with exit 0', async () => {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE, config: { offline: ['1'] } }] });
    let signalled = false;
    const r = await runGateway(f, {}, (out, kill) => {
      if (!signalled && out.includes('gateway started')) {
        signalled = true;
        kill();
      }
    });
    assert.equal(signalled, true, r.stdout + r.stderr);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /gateway stopped/);
  });
});

describe('a single-process gateway and the GC flag it needs from its command line', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    dir = scratchDir('boot-gc');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  interface LogLine {
    level: number;
    msg: string;
    nodeFlag?: string;
    key?: string;
  }

  /** boots with GW_WORKERS=1 and stops at 'gateway started'; its log lines */
  async function bootLines(env: Record<string, string>, nodeArgs: string[]): Promise<LogLine[]> {
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    let started = false;
    const r = await runGateway(
      f,
      { GW_WORKERS: '1', ...env },
      (out, kill) => {
        if (!started && out.includes('gateway started')) {
          started = true;
          kill();
        }
      },
      nodeArgs,
    );
    assert.equal(started, true, r.stdout + r.stderr);
    return r.stdout
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as LogLine);
  }

  /** the warnings that name a GC flag given at start (all of them, or those naming `flag`) */
  async function gcWarnings(env: Record<string, string>, nodeArgs: string[], flag?: string): Promise<string[]> {
    return (await bootLines(env, nodeArgs))
      .filter((l) => l.nodeFlag !== undefined && (flag === undefined || l.nodeFlag === flag))
      .map((l) => `${l.level} ${l.msg}`);
  }
  const AS_NPM_START = ['--single-threaded-gc', '--max-semi-space-size=8'];

  it('started without --single-threaded-gc it warns once, saying how npm start runs it and which key keeps the helpers', async () => {
    const w = await gcWarnings({}, ['--max-semi-space-size=8'], '--single-threaded-gc');
    assert.equal(w.length, 1, w.join('\n'));
    assert.match(w[0], /^40 started without --single-threaded-gc: .*npm start.*gcHelperThreads: true/);
  });

  it('started with another young generation than gcSemiSpaceMB asks for it warns once, saying how to start it and what npm start passes', async () => {
    const w = await gcWarnings({}, ['--single-threaded-gc'], '--max-semi-space-size');
    assert.equal(w.length, 1, w.join('\n'));
    assert.match(
      w[0],
      /^40 started with V8's own young generation where gateway.gcSemiSpaceMB asks for 8 MB.*start it as node --single-threaded-gc --max-semi-space-size=8 dist\/core\/main.js <site> \(npm start passes --max-semi-space-size=8\), or set gcSemiSpaceMB to 0$/,
    );
    const other = await gcWarnings({ GW_GC_SEMI_SPACE_MB: '4' }, AS_NPM_START, '--max-semi-space-size');
    assert.equal(other.length, 1, other.join('\n'));
    assert.match(
      other[0],
      /^40 started with --max-semi-space-size=8 where gateway.gcSemiSpaceMB asks for 4 MB.*start it as node --single-threaded-gc --max-semi-space-size=4 dist\/core\/main.js <site> .*or set gcSemiSpaceMB to 8$/,
    );
  });

  it("started as npm start does, or with the keys saying V8's own, it does not warn about GC flags", async () => {
    assert.deepEqual(await gcWarnings({}, AS_NPM_START), []);
    assert.deepEqual(await gcWarnings({}, ['--single-threaded-gc', '--max_semi_space_size=8']), [], "V8's underscore spelling");
    assert.deepEqual(await gcWarnings({ GW_GC_HELPER_THREADS: 'true', GW_GC_SEMI_SPACE_MB: '0' }, []), []);
  });

  it("wideInlining and gcPretenuring are said once at start with their defaults, and not at all with V8's own (their effects: jit-flags.test.ts, gc-flags.test.ts)", async () => {
    const lines = async (key: string, env: Record<string, string>): Promise<string[]> =>
      (await bootLines(env, AS_NPM_START)).filter((l) => l.key === `gateway.${key}`).map((l) => `${l.level} ${l.msg}`);
    assert.deepEqual(
      await lines('wideInlining', {}),
      ['30 V8 inlines callees up to --max-inlined-bytecode-size=920 --max-inlined-bytecode-size-cumulative=2760'],
      'the default',
    );
    assert.deepEqual(await lines('wideInlining', { GW_WIDE_INLINING: 'false' }), [], "false: V8's own budgets, nothing set or said");
    assert.deepEqual(
      await lines('gcPretenuring', {}),
      ["30 V8's allocation-site pretenuring is off: short-lived objects are not sent to the old generation on a survival guess"],
      'the default',
    );
    assert.deepEqual(await lines('gcPretenuring', { GW_GC_PRETENURING: 'true' }), [], "true: V8's own, nothing set or said");
  });

  it('gcHeapGrowthPercent is said once at start unless 0 (its effect: gc-flags.test.ts), and a bad one stops boot naming it', async () => {
    const growthLines = async (env: Record<string, string>): Promise<string[]> =>
      (await bootLines(env, AS_NPM_START)).filter((l) => l.key === 'gateway.gcHeapGrowthPercent').map((l) => `${l.level} ${l.msg}`);
    assert.deepEqual(await growthLines({ GW_GC_HEAP_GROWTH_PERCENT: '50' }), [
      '30 the old generation grows to 1.5 times what a full collection kept before the next',
    ]);
    assert.deepEqual(await growthLines({}), ['30 the old generation grows to 2 times what a full collection kept before the next'], 'the default');
    assert.deepEqual(await growthLines({ GW_GC_HEAP_GROWTH_PERCENT: '0' }), [], "0: V8's own, nothing set or said");
    const f = writeSite(dir, { gateway: gateway(dir), plugins: [{ name: 'presence-allowlist', module: EXAMPLE }] });
    const bad = await runGateway(f, { GW_WORKERS: '1', GW_GC_HEAP_GROWTH_PERCENT: '-5' }, undefined, AS_NPM_START);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /^boot failed: .*gcHeapGrowthPercent/);
  });
});
