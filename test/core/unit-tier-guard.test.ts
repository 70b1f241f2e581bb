/**
 * The unit tier's guard (test/support/unit-tier-guard.ts): which commands it takes for system programs, and that a
 * process with it installed (as the unit tier's mocha is) refuses them loudly, naming the program and the full tier,
 * even when a test catches the refusal. The processes here are Node's own, so this file runs in either tier.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot, scratchDir } from '../support/paths';
import { systemProgramIn } from '../support/unit-tier-guard';

const SETUP = path.join(repoRoot, 'dist', 'test', 'unit-setup.js');

/** `code` run by a Node process with the guard installed the way the unit tier installs it */
function guarded(code: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--require', SETUP, '-e', code], { encoding: 'utf8', timeout: 30_000, cwd: repoRoot });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const FULL_TIER = /belongs in the full tier \(npm test\)/;

describe('unit tier guard: no system programs, no Redis or PostgreSQL server', function () {
  this.timeout(60_000);

  it('finds the system program in a command: by name, by path, behind runuser or a shell; Node and sh alone pass', () => {
    assert.equal(systemProgramIn('ffmpeg', ['-version']), 'ffmpeg');
    assert.equal(systemProgramIn('/usr/bin/ffprobe', ['-v', 'error', 'x.flv']), 'ffprobe');
    assert.equal(systemProgramIn('/bin/sh', ['-c', 'command -v redis-server || true']), 'redis-server');
    assert.equal(systemProgramIn('sh -c "exec cvlc --intf dummy x.sdp"', [], true), 'cvlc');
    assert.equal(systemProgramIn('runuser', ['-u', 'nobody', '--', '/usr/lib/postgresql/15/bin/pg_ctl', 'start']), 'pg_ctl');
    assert.equal(systemProgramIn('/usr/bin/chromium', ['--headless']), 'chromium');
    assert.equal(systemProgramIn('gst-launch-1.0', ['videotestsrc', '!', 'fakesink']), 'gst-launch-1.0');
    assert.equal(systemProgramIn('openssl', ['req', '-x509']), 'openssl');
    assert.equal(
      systemProgramIn(process.execPath, ['-e', "require('node:child_process').spawnSync('ffmpeg')"]),
      undefined,
      'a script naming ffmpeg is not ffmpeg: the guard in that process judges its spawns',
    );
    assert.equal(systemProgramIn('sh', ['-c', `ulimit -n 64 && exec "$0" main.js`, process.execPath]), undefined);
    assert.equal(systemProgramIn('ffmpeg-normalize.js'), undefined, 'a name that only starts like one');
  });

  it('refuses to spawn ffmpeg, saying which program and that the test belongs in the full tier', () => {
    const r = guarded(`
      const cp = require('node:child_process');
      const forms = {
        spawnSync: () => cp.spawnSync('ffmpeg', ['-version']),
        spawn: () => cp.spawn('/usr/bin/ffmpeg', ['-version']),
        execFile: () => cp.execFile('ffmpeg', ['-version'], () => {}),
        execFileSync: () => cp.execFileSync('ffprobe', ['-version']),
        exec: () => cp.exec('ffmpeg -version', () => {}),
        execSync: () => cp.execSync('command -v ffmpeg'),
        promisified: () => require('node:util').promisify(cp.execFile)('ffmpeg', ['-version']),
      };
      const out = {};
      for (const [name, f] of Object.entries(forms)) {
        try { f(); out[name] = 'ran'; } catch (e) { out[name] = e.message; }
      }
      process.stdout.write(JSON.stringify(out));
    `);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, string>;
    for (const [form, message] of Object.entries(out)) {
      assert.match(message, /^unit tier: a test tried to run ff(mpeg|probe), from the ffmpeg system package: "/, `${form}: ${message}`);
      assert.match(message, FULL_TIER, form);
    }
    assert.equal(Object.keys(out).length, 7);
    // and said on stderr, in case a test swallows the exception
    assert.match(r.stderr, /unit tier: a test tried to run ffmpeg/);
  });

  it('an uncaught refusal ends the process with the message; a Node child inherits the guard', () => {
    const r = guarded(`require('node:child_process').spawnSync('ffmpeg', ['-i', 'x.flv'])`);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /Error: unit tier: a test tried to run ffmpeg, from the ffmpeg system package: "ffmpeg -i x.flv"/);
    assert.match(r.stderr, FULL_TIER);

    const child = guarded(`
      const r = require('node:child_process').spawnSync(process.execPath, ['-e', "require('node:child_process').spawnSync('redis-server')"], { encoding: 'utf8' });
      process.stdout.write(JSON.stringify({ status: r.status, stderr: r.stderr }));
    `);
    const c = JSON.parse(child.stdout) as { status: number; stderr: string };
    assert.notEqual(c.status, 0, 'the grandchild failed');
    assert.match(c.stderr, /run redis-server, from the Redis system package/);
  });

  it("refuses a connection to a Redis or PostgreSQL server's port; Node itself and loopback servers of our own pass", () => {
    const r = guarded(`
      const net = require('node:net');
      const out = {};
      for (const [name, f] of Object.entries({
        redis: () => net.connect(6379, '127.0.0.1'),
        postgres: () => net.connect({ port: 5432, host: '127.0.0.1' }),
        pgSocket: () => net.connect('/var/run/postgresql/.s.PGSQL.5432'),
      })) {
        try { f().destroy(); out[name] = 'connected'; } catch (e) { out[name] = e.message; }
      }
      out.node = require('node:child_process').execFileSync(process.execPath, ['-e', 'process.stdout.write("node runs")'], { encoding: 'utf8' });
      const srv = net.createServer((s) => s.end('hello')).listen(0, '127.0.0.1', () => {
        const c = net.connect(srv.address().port, '127.0.0.1');
        c.on('data', (d) => { out.loopback = String(d); c.destroy(); srv.close(); process.stdout.write(JSON.stringify(out)); });
      });
    `);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, string>;
    assert.match(out.redis!, /^unit tier: a test tried to reach a Redis server: port 6379; .*full tier/);
    assert.match(out.postgres!, /^unit tier: a test tried to reach a PostgreSQL server: port 5432; .*full tier/);
    assert.match(out.pgSocket!, /^unit tier: a test tried to reach a PostgreSQL server: \/var\/run\/postgresql\/\.s\.PGSQL\.5432; /);
    assert.equal(out.node, 'node runs');
    assert.equal(out.loopback, 'hello');
  });

  it('a mocha run of the unit tier fails a test that spawns ffmpeg, and one that catches the refusal and passes', () => {
    const dir = scratchDir('unit-guard');
    try {
      const spec = path.join(dir, 'spawns.test.js');
      fs.writeFileSync(
        spec,
        `
        const { spawnSync } = require('node:child_process');
        describe('a test that needs ffmpeg', () => {
          it('spawns it', () => { spawnSync('ffmpeg', ['-version']); });
          it('hides the refusal', () => { try { spawnSync('ffprobe', ['-version']); } catch { /* carries on */ } });
          it('needs nothing', () => {});
        });
      `,
      );
      const mocha = path.join(repoRoot, 'node_modules', 'mocha', 'bin', 'mocha.js');
      const r = spawnSync(
        process.execPath,
        [mocha, '--no-config', '--require', path.join(repoRoot, 'dist', 'test', 'setup.js'), '--require', SETUP, '--reporter', 'spec', spec],
        {
          encoding: 'utf8',
          timeout: 30_000,
          cwd: repoRoot,
        },
      );
      const out = r.stdout + r.stderr;
      assert.notEqual(r.status, 0, out);
      assert.match(out, /2 passing/, out);
      assert.match(out, /2 failing/, out);
      assert.match(out, /a test that needs ffmpeg\s+spawns it:\s+Error: unit tier: a test tried to run ffmpeg/, out);
      assert.match(
        out,
        /"after all" hook[^]*the unit tier refused what these tests tried:\s+a test that needs ffmpeg hides the refusal: unit tier: a test tried to run ffprobe/,
        out,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
