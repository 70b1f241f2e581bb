/**
 * Held fetches over real loopback HTTP, on a ManualClock (so a deadline passes only when the test says): blocking
 * reloads released together by one part get one prepared playlist, each with its own query; a reload whose part
 * does not come gets 503 after three target durations, an early player 503 with Retry-After; a client that leaves
 * is taken off the list (the parked gauge goes back to 0) and its player let go; a stream closed under parked
 * fetches answers them 404.
 */
import assert from 'node:assert/strict';
import { ManualClock, shiftUnit, type AccessUnit, type Publisher } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import hlsOut from '../index';
import { get, parsePlaylist } from './helpers';
import { fixtureClip } from '../../../test/support/fixture-clip';

const clip = fixtureClip({ seconds: 2 });

async function metric(gw: TestGateway, name: string): Promise<number> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `metric ${name} exported`);
  return Number(line.split(' ')[1]);
}

async function parkedReaches(gw: TestGateway, n: number): Promise<void> {
  const deadline = Date.now() + 5000;
  let now: number;
  while ((now = await metric(gw, 'gw_hls_out_parked_fetches')) !== n) {
    if (Date.now() > deadline) assert.fail(`parked fetches stay ${now}, not ${n}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** a fetch, and whether it has been answered yet */
function pending(url: string, signal?: AbortSignal): { done: Promise<{ status: number; text: string; headers: Headers }>; settled: () => boolean } {
  let settled = false;
  const done = fetch(url, { signal }).then(async (r) => {
    const text = await r.text();
    settled = true;
    return { status: r.status, text, headers: r.headers };
  });
  return { done, settled: () => settled };
}

function withQuery(url: string, set: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(set)) u.searchParams.set(k, v);
  return u.toString();
}

describe('hls-out: held fetches (blocking reloads, hinted parts, early players)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let clock: ManualClock;
  before(async () => {
    clock = new ManualClock();
    const stub = stubMediaPlugin();
    gw = await startTestGateway({
      clock,
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'hls-out', def: hlsOut },
      ],
    });
  });
  after(() => gw.stop());

  /** an open video-only HLS request with `passes` of the clip pushed: segments complete, one being made */
  async function live(simNo: string, passes: number, tokens: string[] = ['t']) {
    const opens: Array<Awaited<ReturnType<TestGateway['openStream']>>> = [];
    for (const token of tokens) opens.push(await gw.openStream({ simNo, chanId: 1, fmt: 1, dataTyp: 1, token }));
    const pub: Publisher = gw.bus.get(opens[0].streamName)!.attachPublisher();
    pub.setTrack(clip.video);
    let pushed = 0;
    const push = (units: AccessUnit[]): void => {
      for (const u of units) pub.push(u);
    };
    const pass = (n: number): AccessUnit[] => clip.units.map((u) => shiftUnit(u, n * clip.durationMs));
    for (; pushed < passes; pushed++) push(pass(pushed));
    const p = passes > 0 ? parsePlaylist((await get(opens[0].playUrl)).text) : undefined;
    const hint = p && /part-(\d+)\.(\d+)\.m4s/.exec(p.preloadHint!)!;
    return {
      opens,
      hint: hint ? { msn: hint[1], part: hint[2] } : undefined,
      /** the first unit of the next pass: ends the part being made */
      next: () => push([pass(pushed)[0]]),
      close: () => gw.api('POST', '/strm/close', { reqIds: opens.map((o) => o.reqId) }),
    };
  }

  it('blocking reloads released by the same part get one playlist prepared, each with its own query', async () => {
    const s = await live('13900000071', 3, ['token-a', 'token-b']);
    const [a, b] = s.opens;
    const block = (url: string) => withQuery(url, { _HLS_msn: s.hint!.msn, _HLS_part: s.hint!.part });
    const held = [pending(block(a.playUrl)), pending(block(b.playUrl)), pending(block(a.playUrl))];
    await parkedReaches(gw, 3);
    assert.ok(!held.some((h) => h.settled()), 'they wait for the part');
    const before = await metric(gw, 'gw_hls_out_playlists_prepared_total');
    s.next();
    const [ra, rb, ra2] = await Promise.all(held.map((h) => h.done));
    assert.deepEqual([ra.status, rb.status, ra2.status], [200, 200, 200]);
    assert.equal((await metric(gw, 'gw_hls_out_playlists_prepared_total')) - before, 1, 'one text for the three');
    await parkedReaches(gw, 0);
    const qa = new URL(a.playUrl).search;
    const qb = new URL(b.playUrl).search;
    assert.notEqual(qa, qb);
    for (const [r, q] of [
      [ra, qa],
      [rb, qb],
    ] as const) {
      const p = parsePlaylist(r.text);
      const uris = [...p.segments.flatMap((x) => [x.uri, x.map!, ...x.parts.map((y) => y.uri)]), ...p.trailingParts.map((y) => y.uri), p.preloadHint!];
      assert.ok(uris.length > 10);
      for (const u of uris) assert.ok(u.endsWith(q), `${u} carries ${q}`);
      assert.ok(
        uris.some((u) => u.startsWith(`part-${s.hint!.msn}.${s.hint!.part}.m4s?`)),
        'the part asked for is listed',
      );
    }
    assert.equal(ra.text.split(qa).join(qb), rb.text, 'the same playlist but for the query');
    assert.equal(ra2.text, ra.text);
    await s.close();
  });

  it('a blocking reload whose part does not come is answered 503 after three target durations, counted', async () => {
    const s = await live('13900000072', 3);
    const url = s.opens[0].playUrl;
    const timeouts = await metric(gw, 'gw_hls_out_block_timeouts_total');
    const reload = pending(withQuery(url, { _HLS_msn: s.hint!.msn, _HLS_part: s.hint!.part }));
    const part = pending(new URL(`part-${s.hint!.msn}.${s.hint!.part}.m4s${new URL(url).search}`, url).toString());
    await parkedReaches(gw, 2);
    clock.advance(5999);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(!reload.settled() && !part.settled(), 'not before 6 s');
    clock.advance(1);
    const r = await reload.done;
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.equal((await part.done).status, 404, 'the hinted part that never came');
    assert.equal((await metric(gw, 'gw_hls_out_block_timeouts_total')) - timeouts, 1);
    await parkedReaches(gw, 0);
    await s.close();
  });

  it('an early player is held until earlyWaitSec, then 503 with Retry-After', async () => {
    const s = await live('13900000073', 0);
    const early = pending(s.opens[0].playUrl);
    await parkedReaches(gw, 1);
    clock.advance(14_999);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(!early.settled());
    clock.advance(1);
    const r = await early.done;
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('retry-after'), '1');
    await parkedReaches(gw, 0);
    await s.close();
  });

  it('a client that leaves is taken off the list at once, and its player is no longer busy', async () => {
    const s = await live('13900000074', 3);
    const url = s.opens[0].playUrl;
    const aborts = [new AbortController(), new AbortController()];
    const held = [
      pending(withQuery(url, { _HLS_msn: s.hint!.msn, _HLS_part: s.hint!.part }), aborts[0].signal),
      pending(withQuery(url, { _HLS_msn: String(Number(s.hint!.msn) + 1) }), aborts[1].signal),
    ];
    for (const h of held) h.done.catch(() => undefined);
    await parkedReaches(gw, 2);
    for (const a of aborts) a.abort();
    await parkedReaches(gw, 0);
    const status = async () => (await gw.api('GET', `/strm/status?reqId=${s.opens[0].reqId}`)).json.data[0];
    assert.equal((await status()).players, 1);
    // a busy player is never idle: it is let go after playerIdleSec only because its fetches ended with the clients
    clock.advance(16_000);
    assert.equal((await status()).players, 0);
    await s.close();
  });

  it('a stream closed under parked fetches answers them 404 (blocking reload, hinted part, early player)', async () => {
    const s = await live('13900000075', 3);
    const url = s.opens[0].playUrl;
    const empty = await live('13900000076', 0);
    const held = [
      pending(withQuery(url, { _HLS_msn: s.hint!.msn, _HLS_part: s.hint!.part })),
      pending(new URL(`part-${s.hint!.msn}.${s.hint!.part}.m4s${new URL(url).search}`, url).toString()),
      pending(empty.opens[0].playUrl),
    ];
    await parkedReaches(gw, 3);
    await s.close();
    await empty.close();
    const answers = await Promise.all(held.map((h) => h.done));
    assert.deepEqual(
      answers.map((r) => r.status),
      [404, 404, 404],
    );
    assert.match(answers[0].text, /stream closed/);
    await parkedReaches(gw, 0);
  });
});
