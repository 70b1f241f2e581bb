/**
 * The console plugin's routes without a browser: its files and their security headers, the fixed file table (no
 * path reaches the disk), and the config switches a site uses (enabled, apiDocs, GW_CONSOLE_ENABLED).
 */
import assert from 'node:assert/strict';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import consolePlugin from '../index';

async function get(gw: TestGateway, path: string, method = 'GET'): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(gw.baseUrl + path, { method, redirect: 'manual' });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function boot(config: Record<string, unknown>, env: Record<string, string> = {}): Promise<TestGateway> {
  const stub = stubMediaPlugin();
  return startTestGateway({
    plugins: [
      { name: stub.name, def: stub.def },
      { name: 'console', def: consolePlugin, config },
    ],
    env,
  });
}

describe('console plugin: routes and config', () => {
  describe('with the defaults', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await boot({ refreshSec: 5 });
    });
    after(() => gw.stop());

    it('serves the page with a strict CSP, nosniff and no caching, its settings filled in', async () => {
      const r = await get(gw, '/console/');
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
      const csp = r.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self';/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe/);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(r.headers.get('cache-control'), 'no-store');
      assert.match(r.text, /<meta name="gw-refresh-sec" content="5">/);
      // no inline script: every script is a file of this origin
      assert.doesNotMatch(r.text, /<script>|<script type="module">/);
    });

    it('redirects /console and /docs to their folders', async () => {
      for (const p of ['/console', '/docs']) {
        const r = await get(gw, p);
        assert.equal(r.status, 308);
        assert.equal(r.headers.get('location'), `${p}/`);
      }
    });

    it('serves its scripts and the players and docs libraries from node_modules (HEAD too)', async () => {
      for (const p of [
        '/console/app.js',
        '/console/api.js',
        '/console/player.js',
        '/console/talk.js',
        '/console/format.js',
        '/console/console.css',
        '/console/lib/mpegts.js',
        '/console/lib/hls.js',
        '/docs/',
        '/docs/docs-init.js',
        '/docs/swagger-ui-bundle.js',
        '/docs/swagger-ui.css',
      ]) {
        const r = await get(gw, p);
        assert.equal(r.status, 200, p);
        assert.match(r.headers.get('content-type') ?? '', p.endsWith('.css') ? /^text\/css/ : p.endsWith('/') ? /^text\/html/ : /^text\/javascript/, p);
        assert.ok(r.text.length > 100, p);
        const h = await get(gw, p, 'HEAD');
        assert.equal(h.status, 200);
        assert.equal(h.text, '');
      }
      assert.match((await get(gw, '/console/lib/mpegts.js')).text, /mpegts/);
    });

    it('answers anything outside its file table 404 / -8, path tricks included', async () => {
      for (const p of [
        '/console/nope.js',
        '/console/../package.json',
        '/console/%2e%2e/package.json',
        '/console/lib%2f..%2fapp.js',
        '/console/index.html',
        '/docs/index.html',
        '/console/lib/',
        '/console/README.md',
      ]) {
        const r = await get(gw, p);
        assert.equal(r.status, 404, p);
        assert.equal(JSON.parse(r.text).errCode, -8, p);
      }
    });

    it('describes only the routes the site has (no recorder here: no /strm/record)', async () => {
      const doc = JSON.parse((await get(gw, '/openapi.json')).text) as { paths: Record<string, unknown> };
      assert.ok(doc.paths['/strm/open']);
      assert.equal(doc.paths['/strm/record'], undefined);
      assert.equal(doc.paths['/strm/timed_token'], undefined);
    });
  });

  it('enabled false: no console pages, the API document stays; GW_CONSOLE_ENABLED=true turns the pages on', async () => {
    const off = await boot({ enabled: false });
    try {
      assert.equal((await get(off, '/console/')).status, 404);
      assert.equal((await get(off, '/console/lib/mpegts.js')).status, 404);
      assert.equal((await get(off, '/openapi.json')).status, 200);
      assert.equal((await get(off, '/docs/')).status, 200);
    } finally {
      await off.stop();
    }
    const on = await boot({ enabled: false }, { GW_CONSOLE_ENABLED: 'true' });
    try {
      assert.equal((await get(on, '/console/')).status, 200);
    } finally {
      await on.stop();
    }
  });

  it('apiDocs false: no /openapi.json and no /docs', async () => {
    const gw = await boot({ apiDocs: false });
    try {
      assert.equal((await get(gw, '/openapi.json')).status, 404);
      assert.equal((await get(gw, '/docs/')).status, 404);
      assert.equal((await get(gw, '/console/')).status, 200);
    } finally {
      await gw.stop();
    }
  });
});
