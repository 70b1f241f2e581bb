/**
 * What the kernel hands a plugin beyond routes and sessions: services between plugins (declared, checked at boot,
 * resolved through tsyringe), HTTP listeners of its own, its view of the bus (released at its stop), players
 * attached to requests, and outputs without a fmt. Two kernels in one process keep all of it apart.
 */
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { WebSocket } from 'ws';
import { defineService, type ServiceToken } from '../../plugin-sdk/services';
import { definePlugin, type PluginContext, type PluginDefinition } from '../../plugin-sdk/plugin';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../plugin-sdk/testkit';

interface Greeter {
  greet(who: string): string;
}
const GREETER: ServiceToken<Greeter> = defineService<Greeter>('greeter', { providedBy: 'greeter-provider' });

function provider(word: string, opts: { skipProvide?: boolean; name?: string } = {}): PluginDefinition<object> {
  return definePlugin({
    name: opts.name ?? 'greeter-provider',
    provides: [GREETER],
    setup(ctx) {
      if (!opts.skipProvide) ctx.services.provide(GREETER, { greet: (who) => `${word}, ${who}` });
    },
  }) as PluginDefinition<object>;
}

function consumer(seen: string[], mode: 'needs' | 'uses' | 'none' = 'needs'): PluginDefinition<object> {
  return definePlugin({
    name: 'greeter-user',
    ...(mode === 'needs' ? { needs: [GREETER] } : mode === 'uses' ? { uses: [GREETER] } : {}),
    setup(ctx) {
      if (mode === 'none') {
        try {
          ctx.services.get(GREETER);
        } catch (err) {
          seen.push((err as Error).message);
        }
        return;
      }
      const g = mode === 'needs' ? ctx.services.get(GREETER) : ctx.services.find(GREETER);
      seen.push(g ? g.greet('driver') : 'no greeter');
    },
  }) as PluginDefinition<object>;
}

async function bootFails(plugins: Array<{ name: string; def: PluginDefinition<object> }>): Promise<string> {
  try {
    const gw = await startTestGateway({ plugins });
    await gw.stop();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('boot should have failed');
}

describe('plugin context: services, own HTTP listeners, bus view, players, outputs without fmt', () => {
  describe('services', () => {
    it('a provider listed after its user starts first and hands its service over; two kernels keep theirs apart', async () => {
      const seenA: string[] = [];
      const seenB: string[] = [];
      const a = await startTestGateway({
        plugins: [
          { name: 'greeter-user', def: consumer(seenA) },
          { name: 'greeter-provider', def: provider('hello') },
        ],
      });
      const b = await startTestGateway({
        plugins: [
          { name: 'greeter-user', def: consumer(seenB) },
          { name: 'greeter-provider', def: provider('ni hao') },
        ],
      });
      try {
        assert.deepEqual(seenA, ['hello, driver']);
        assert.deepEqual(seenB, ['ni hao, driver']);
      } finally {
        await a.stop();
        await b.stop();
      }
    });

    it('boot stops naming both plugins when a needed service has no provider on the site', async () => {
      const msg = await bootFails([{ name: 'greeter-user', def: consumer([]) }]);
      assert.equal(
        msg,
        "test-site.json: plugin greeter-user: needs service greeter (plugin greeter-provider provides it; add it to the site's plugins), which no plugin on this site provides",
      );
    });

    it('boot stops when two plugins provide one service, or a provider does not provide what it declared', async () => {
      const two = await bootFails([
        { name: 'greeter-provider', def: provider('a') },
        { name: 'other', def: provider('b', { name: 'other' }) },
      ]);
      assert.match(two, /plugin other: provides service greeter, which plugin greeter-provider provides too/);
      const none = await bootFails([{ name: 'greeter-provider', def: provider('a', { skipProvide: true }) }]);
      assert.match(none, /plugin greeter-provider: declares it provides service greeter, but its setup did not call ctx.services.provide for it/);
    });

    it('a used (optional) service may be absent; an undeclared one cannot be taken', async () => {
      const seen: string[] = [];
      const gw = await startTestGateway({ plugins: [{ name: 'greeter-user', def: consumer(seen, 'uses') }] });
      await gw.stop();
      assert.deepEqual(seen, ['no greeter']);
      const seen2: string[] = [];
      const gw2 = await startTestGateway({
        plugins: [
          { name: 'greeter-provider', def: provider('x') },
          { name: 'greeter-user', def: consumer(seen2, 'none') },
        ],
      });
      await gw2.stop();
      assert.deepEqual(seen2, ["plugin greeter-user: get(greeter): add it to the plugin's needs (or uses)"]);
    });
  });

  describe("HTTP on a port of the plugin's own", () => {
    let gw: TestGateway;
    before(async () => {
      const def = definePlugin({
        name: 'own-http',
        async setup(ctx) {
          const http = await ctx.net.listenHttp({ port: 0, key: 'port' });
          http.routes.get('/hello', (req) => ({ data: [{ app: req.app?.appId ?? null }] }), { auth: 'api' });
          http.routes.raw(
            'GET',
            '/raw/*',
            (req, res) => {
              res.writeHead(200, { 'content-type': 'text/plain' });
              res.end(`rest=${req.rest}`);
            },
            { auth: 'none' },
          );
        },
      });
      gw = await startTestGateway({ plugins: [{ name: 'own-http', def: def as PluginDefinition<object> }] });
    });
    after(() => gw?.stop());

    it("serves routes with the API port's auth and envelope, and names its port", async () => {
      const port = gw.ports['own-http.port'];
      assert.ok(port > 0 && port !== gw.ports['gateway.httpPort']);
      const base = `http://127.0.0.1:${port}`;
      const auth = { authorization: 'Basic ' + Buffer.from('demo:demo').toString('base64') };
      assert.deepEqual(await (await fetch(`${base}/hello`, { headers: auth })).json(), { errCode: 0, message: 'OK', data: [{ app: 'demo' }], count: 1 });
      assert.equal((await fetch(`${base}/hello`)).status, 401);
      assert.equal(await (await fetch(`${base}/raw/a/b`)).text(), 'rest=a/b');
      assert.equal((await fetch(`${base}/nothing`)).status, 404);
      // not on the API port
      assert.equal((await fetch(`${gw.baseUrl}/raw/a`)).status, 404);
    });

    it('closes the listener and its open connections when the gateway stops', async () => {
      const port = gw.ports['own-http.port'];
      const idle = net.connect(port, '127.0.0.1');
      await new Promise((r) => idle.once('connect', r));
      const closed = new Promise((r) => idle.once('close', r));
      await gw.stop();
      await closed;
      await assert.rejects(fetch(`http://127.0.0.1:${port}/raw/x`));
    });
  });

  it('WebSocket routes on the API port: accepted sockets, refusals by close code, all closed at stop', async () => {
    const def = definePlugin({
      name: 'echo',
      setup(ctx) {
        ctx.routes.websocket(
          '/echo/*',
          (ws, req) => {
            if (req.query.get('token') !== 'ok') {
              ws.close(4401, 'unauthorized');
              return;
            }
            ws.on('message', (m, binary) => ws.send(Buffer.concat([Buffer.from(`${req.rest}:`), m as Buffer]), { binary }));
          },
          { auth: 'none', maxPayload: 16 },
        );
      },
    });
    const gw = await startTestGateway({ plugins: [{ name: 'echo', def: def as PluginDefinition<object> }] });
    const url = `ws://127.0.0.1:${gw.ports['gateway.httpPort']}/echo/x`;
    const refused = new WebSocket(`${url}?token=no`);
    const code = await new Promise<number>((r) => refused.once('close', (c) => r(c)));
    assert.equal(code, 4401);
    const ws = new WebSocket(`${url}?token=ok`);
    await new Promise((r) => ws.once('open', r));
    ws.send(Buffer.from('hi'));
    const reply = await new Promise<Buffer>((r) => ws.once('message', (m) => r(m as Buffer)));
    assert.equal(reply.toString(), 'x:hi');
    const big = new Promise<number>((r) => ws.once('close', (c) => r(c)));
    ws.send(Buffer.alloc(17));
    assert.equal(await big, 1009, 'a message over maxPayload closes the socket');
    const idle = new WebSocket(`${url}?token=ok`);
    await new Promise((r) => idle.once('open', r));
    const gone = new Promise<number>((r) => idle.once('close', (c) => r(c)));
    await gw.stop();
    assert.equal(await gone, 1006, 'terminated at stop');
  });

  it("routes.url writes where clients reach a route: the API port (apiBase's) or the listener's, the host and scheme given", async () => {
    let urls: Record<string, string | number> = {};
    const def = definePlugin({
      name: 'urls',
      async setup(ctx) {
        const own = await ctx.net.listenHttp({ port: 0, key: 'port' });
        urls = {
          apiPort: ctx.site.apiPort,
          api: ctx.routes.url('/raw-h264/1_1_1', { scheme: 'ws', query: { reqId: 'r 1', token: 'a&b', via: undefined } }),
          apiDefault: ctx.routes.url('/x'),
          own: own.routes.url('/x', { host: '10.0.0.7' }),
          v6: own.routes.url('/x', { host: '::1', scheme: 'http' }),
          ownPort: own.port,
        };
      },
    });
    const gw = await startTestGateway({ plugins: [{ name: 'urls', def: def as PluginDefinition<object> }] });
    const port = gw.ports['gateway.httpPort'];
    assert.equal(urls.apiPort, port);
    assert.equal(urls.api, `ws://127.0.0.1:${port}/raw-h264/1_1_1?reqId=r%201&token=a%26b`);
    assert.equal(urls.apiDefault, `http://127.0.0.1:${port}/x`);
    assert.equal(urls.own, `http://10.0.0.7:${urls.ownPort}/x`);
    assert.equal(urls.v6, `http://[::1]:${urls.ownPort}/x`);
    await gw.stop();

    // behind a front of the site's own (apiBase): its port, and none when it is the scheme's default
    const behind = await startTestGateway({
      plugins: [{ name: 'urls', def: def as PluginDefinition<object> }],
      gateway: { apiBase: 'https://gw.example.com' },
    });
    assert.equal(urls.apiPort, 443);
    assert.equal(urls.apiDefault, 'https://gw.example.com/x', "apiBase's host, scheme and port");
    assert.equal(urls.api, 'ws://gw.example.com:443/raw-h264/1_1_1?reqId=r%201&token=a%26b', 'the scheme given decides whether the port is a default');
    await behind.stop();
  });

  it('a port taken by another listener stops boot naming the plugin and key', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    const port = (blocker.address() as net.AddressInfo).port;
    const def = definePlugin({
      name: 'own-http',
      async setup(ctx) {
        await ctx.net.listenHttp({ port, key: 'port' });
      },
    });
    const msg = await bootFails([{ name: 'own-http', def: def as PluginDefinition<object> }]);
    blocker.close();
    assert.equal(msg, `test-site.json: plugin own-http: key port: port ${port} on 127.0.0.1 is already in use`);
  });

  it('streams a plugin made and stages it registered are released when it stops', async () => {
    let ctx!: PluginContext<object>;
    const def = definePlugin({
      name: 'maker',
      setup(c) {
        ctx = c as PluginContext<object>;
        c.bus.create('made_by_plugin');
        c.bus.registerStage({ name: 'noop', start: () => ({ stop: () => undefined }) });
      },
    });
    const gw = await startTestGateway({ plugins: [{ name: 'maker', def: def as PluginDefinition<object> }] });
    const s = gw.bus.get('made_by_plugin')!;
    assert.equal(s.owner, 'maker');
    assert.deepEqual(ctx.bus.stages(), ['noop']);
    let closedWith = '';
    s.on('closed', (r) => {
      closedWith = r;
    });
    await gw.stop();
    assert.equal(closedWith, 'plugin maker stopped');
    assert.deepEqual(gw.bus.stages(), []);
  });

  describe('players and outputs without fmt', () => {
    let gw: TestGateway;
    let ctx!: PluginContext<object>;
    before(async () => {
      const stub = stubMediaPlugin();
      const extra = definePlugin({
        name: 'annexb-out',
        setup(c) {
          ctx = c as PluginContext<object>;
          c.sessions.registerOutput({
            name: 'annexb-out',
            schemes: ['http'],
            playUrl: (a) => `${a.scheme}://${a.host}:9/annexb/${a.streamName}?reqId=${a.reqId}&token=${encodeURIComponent(a.token)}`,
          });
        },
      });
      gw = await startTestGateway({
        plugins: [
          { name: stub.name, def: stub.def },
          { name: 'annexb-out', def: extra as PluginDefinition<object> },
        ],
      });
    });
    after(() => gw?.stop());

    it('an output without fmt puts its URL under urls in the open result and status', async () => {
      const r = await gw.api('POST', '/strm/open', { user: { token: 't 1' }, typ: 'live', simNo: '013800138000', chanId: 3 });
      assert.equal(r.json.errCode, 0);
      const d = r.json.data[0];
      assert.equal(d.urls['annexb-out'], `http://127.0.0.1:9/annexb/13800138000_3_1?reqId=${d.reqId}&token=t%201`);
      assert.match(d.playUrl, /^ws:\/\//, 'fmt 0 still has its own output');
      const st = await gw.api('GET', `/strm/status?reqId=${d.reqId}`);
      assert.deepEqual(st.json.data[0].urls, d.urls);
      await gw.api('POST', '/strm/close', { reqIds: [d.reqId] });
    });

    it('attachPlayer counts players and bytes, marks the request consumed, and refuses closed requests', async () => {
      const r = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '013800138000', chanId: 4 });
      const reqId = r.json.data[0].reqId as string;
      const p1 = ctx.sessions.attachPlayer(reqId, { protocol: 'annexb', remote: '127.0.0.1:1' })!;
      const p2 = ctx.sessions.attachPlayer(reqId, { protocol: 'annexb', remote: '127.0.0.1:2' })!;
      p1.sent(1000);
      p2.sent(24);
      let st = (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0];
      assert.equal(st.players, 2);
      assert.equal(st.consumed, true);
      assert.equal(st.bytesOut, 1024);
      p1.close();
      p1.close();
      st = (await gw.api('GET', `/strm/status?reqId=${reqId}`)).json.data[0];
      assert.equal(st.players, 1, 'a second close counts once');
      await gw.api('POST', '/strm/close', { reqIds: [reqId] });
      assert.equal(ctx.sessions.attachPlayer(reqId, { protocol: 'annexb', remote: 'x' }), undefined);
    });
  });
});
