/**
 * GET /openapi.json: an independent validator (@seriousme/openapi-schema-validator) accepts it; a client driven by
 * it calls the live API (success and error answers checked against the documented schemas); and the document
 * cannot drift from the server: bodies generated from the open field table are judged by both the document's schema
 * and the running validator, which must agree on every one.
 */
import assert from 'node:assert/strict';
// ESM-only package: Node 20.19+ loads it with require(), which tsc emits for this import
import { Validator } from '@seriousme/openapi-schema-validator';
import type { FieldRule } from '../../../plugin-sdk';
import { OPEN_FIELDS } from '../../../test/support/core-parts';
import { definePlugin, type PluginDefinition } from '../../../plugin-sdk';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import consolePlugin from '../index';
import { DocClient } from './doc-client';

/** an ingest for terminals and one for RTSP sources, and outputs for every fmt with every scheme the spec allows (and rtmp and webrtc, our fmt 0 extensions) */
function allFormatsStub(): PluginDefinition<object> {
  return definePlugin({
    name: 'stub-all',
    setup(ctx) {
      for (const source of ['terminal', 'rtsp'] as const) {
        ctx.sessions.registerIngest({
          name: `stub-${source}`,
          source,
          pushAddress: () => ({ host: '127.0.0.1', port: 7612, tcp: true, port2019: 7613, tcp2019: true }),
        });
      }
      const schemes: Record<number, string[]> = { 0: ['http', 'https', 'ws', 'wss', 'rtmp', 'webrtc'], 1: ['https'], 4: ['rtsp'] };
      for (const fmt of [0, 1, 4]) {
        ctx.sessions.registerOutput({
          name: `stub-out-${fmt}`,
          fmt,
          schemes: schemes[fmt],
          playUrl: (a) => `${a.scheme}://${a.host}:1/live/${a.streamName}?token=${encodeURIComponent(a.token)}`,
        });
      }
    },
  });
}

const ADMIN = { appId: 'ops', user: 'ops', password: 'ops-pass', admin: true };
/** an hour ago, as the recorder's query takes it (the span is limited to 100 days) */
const recentStart = (): string => `${new Date(Date.now() - 3600_000).toISOString().slice(0, 19)}Z`;
const BASE = { user: { token: 't1' }, typ: 'live', simNo: '013800138000', chanId: 1 };
/** a valid value of each object field, the start for its nested cases */
const VALID_OBJECTS: Record<string, Record<string, unknown>> = {
  user: { token: 't1' },
  audioCfg: { sampleRate: 8000, channels: 1 },
  rtspSrc: { url: 'rtsp://camera.example/stream1' },
};

interface Case {
  label: string;
  body: Record<string, unknown>;
}

/** values on and across each rule's edges, made from the rule itself */
function valuesFor(rule: FieldRule): unknown[] {
  const wrongType = { integer: '1', string: 5, boolean: 'yes', object: 'x' }[rule.type];
  const out: unknown[] = [wrongType];
  if (rule.type === 'integer') {
    out.push(1.5);
    if (rule.enum) out.push(...rule.enum, Math.max(...(rule.enum as number[])) + 1, Math.min(...(rule.enum as number[])) - 1);
    if (rule.minimum !== undefined) out.push(rule.minimum, rule.minimum - 1);
    if (rule.maximum !== undefined) out.push(rule.maximum, rule.maximum + 1);
  } else if (rule.type === 'string') {
    if (rule.enum) out.push(...rule.enum, 'zz');
    if (rule.maxLength !== undefined) out.push('a'.repeat(rule.maxLength + 1));
    if (rule.maxLength !== undefined && !rule.pattern) out.push('a'.repeat(rule.maxLength));
    if (rule.minLength) out.push('');
    if (rule.pattern) out.push('/');
    if (rule.example !== undefined) out.push(rule.example);
  } else if (rule.type === 'boolean') {
    out.push(true, false);
  }
  return out;
}

function openCases(): Case[] {
  const cases: Case[] = [];
  for (const [name, rule] of Object.entries(OPEN_FIELDS) as Array<[string, FieldRule]>) {
    // cb: the callback parser's rules (hosts, credentials) are more than a schema says; only its type is compared
    const values = name === 'cb' ? [5, 'https://cb.example/notify'] : valuesFor(rule);
    for (const v of values) cases.push({ label: `${name}=${JSON.stringify(v)?.slice(0, 40)}`, body: { ...BASE, [name]: v } });
    if (rule.properties) {
      for (const [sub, subRule] of Object.entries(rule.properties) as Array<[string, FieldRule]>) {
        for (const v of valuesFor(subRule)) {
          cases.push({ label: `${name}.${sub}=${JSON.stringify(v)?.slice(0, 40)}`, body: { ...BASE, [name]: { ...VALID_OBJECTS[name], [sub]: v } } });
        }
      }
    }
    for (const alias of rule.aliases ?? []) {
      const { [name]: _dropped, ...rest } = BASE as Record<string, unknown>;
      for (const v of valuesFor(rule)) cases.push({ label: `${alias}=${JSON.stringify(v)} (alias)`, body: { ...rest, [alias]: v } });
    }
  }
  // the rules between fields
  for (const dataTyp of [0, 2, 3, 4, 5]) cases.push({ label: `replay dataTyp ${dataTyp}`, body: { ...BASE, typ: 'replay', dataTyp } });
  for (const fmt of [0, 1, 4]) {
    cases.push({ label: `fmt ${fmt} subFmt mpegts`, body: { ...BASE, fmt, subFmt: 'mpegts' } });
    cases.push({ label: `fmt ${fmt} record`, body: { ...BASE, fmt, record: true } });
    // http for HLS depends on the site (allowed only where the HLS output serves no https): a rule of the site, not of the body
    for (const scheme of ['http', 'ws', 'rtsp'].filter((sc) => !(fmt === 1 && sc === 'http')))
      cases.push({ label: `fmt ${fmt} scheme ${scheme}`, body: { ...BASE, fmt, scheme } });
  }
  cases.push({ label: 'no chanId', body: { user: BASE.user, typ: 'live', simNo: BASE.simNo } });
  cases.push({ label: 'null fields count as absent', body: { ...BASE, dataTyp: null, fmt: null, record: null, reqId: null } });
  return cases;
}

describe('console: GET /openapi.json', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let doc: Record<string, any>;
  let client: DocClient;

  before(async () => {
    gw = await startTestGateway({
      plugins: [{ name: 'stub-all', def: allFormatsStub() }, { name: 'recorder' }, { name: 'gov-timed-token' }, { name: 'console', def: consolePlugin }],
      gateway: { applications: [{ appId: 'demo', user: 'demo', password: 'demo' }, ADMIN] },
    });
    const res = await fetch(`${gw.baseUrl}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    doc = (await res.json()) as Record<string, any>;
    client = new DocClient(gw.baseUrl, doc, 'demo:demo');
  });
  after(() => gw.stop());

  it('is an OpenAPI 3.1 document that an independent validator accepts', async () => {
    const v = new Validator();
    const r = await v.validate(doc);
    assert.equal(r.valid, true, JSON.stringify(r.errors, null, 1)?.slice(0, 2000));
    assert.equal(v.version, '3.1');
  });

  it('documents open, keep, close, status, health, metrics, record query and download, timed_token', () => {
    const ops = Object.values(doc.paths as Record<string, Record<string, { operationId: string }>>).flatMap((item) =>
      Object.values(item).map((o) => o.operationId),
    );
    assert.deepEqual(
      ops.sort(),
      [
        'closeStreams',
        'downloadRecord',
        'downloadRecordSigned',
        'health',
        'keepStreams',
        'metrics',
        'openStream',
        'queryRecords',
        'recordLink',
        'setTimedTokens',
        'streamStatus',
      ].sort(),
    );
    // every error code of the SDK, with its name
    const codes = doc.components.schemas.ErrCode.enum as number[];
    assert.deepEqual(codes, [0, -2, -3, -5, -7, -8, -9, -10, -11, -13, -25, -27, -207]);
    assert.equal(doc.components.schemas.ErrCode['x-enum-varnames'][4], 'INVALID_PARAM');
    // the open body's limits are the validator's
    const open = doc.components.schemas.OpenRequest;
    assert.equal(open.properties.keepIntv.minimum, 15);
    assert.equal(open.properties.keepIntv.maximum, 600);
    assert.deepEqual(open.required, ['user', 'typ', 'simNo']);
    assert.equal(open.properties.user.properties.token.maxLength, 1024);
  });

  it('every documented operation is a route of the server (no 404 without credentials)', async () => {
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) {
        const res = await fetch(gw.baseUrl + path.replace(/\{[^}]+\}/g, 'x'), {
          method: method.toUpperCase(),
          headers: method === 'post' ? { 'Content-Type': 'application/json' } : {},
          body: method === 'post' ? '{}' : undefined,
        });
        await res.arrayBuffer();
        assert.notEqual(res.status, 404, `${method.toUpperCase()} ${path}`);
      }
    }
  });

  it('a document-driven client opens, lists, keeps and closes; every answer matches the documented schema', async () => {
    const open = await client.call('openStream', { body: { ...BASE, keepIntv: 30, record: true } });
    assert.equal(open.json.errCode, 0);
    const reqId = open.json.data[0].reqId as string;
    assert.equal(open.json.data[0].recording, true);
    const status = await client.call('streamStatus', { query: { reqId } });
    assert.equal(status.json.data.length, 1);
    assert.equal(status.json.data[0].keepIntv, 30);
    const keep = await client.call('keepStreams', { body: { reqIds: [reqId, 'unknown-id'] } });
    assert.deepEqual(keep.json.data, [
      { reqId, keep: true },
      { reqId: 'unknown-id', keep: false },
    ]);
    const close = await client.call('closeStreams', { body: { reqIds: [reqId] } });
    assert.deepEqual(close.json.data, [{ reqId, closed: true }]);
    const health = await client.call('health');
    assert.equal(health.json.status, 'ok');
    const records = await client.call('queryRecords', { query: { startTm: recentStart(), __limit: 5 } });
    assert.equal(records.json.errCode, 0);
    const tokens = await client.call('setTimedTokens', { auth: 'ops:ops-pass', body: { tokens: [{ token: 't-2027', expiredAt: '2027-12-31T23:59:59Z' }] } });
    assert.equal(tokens.json.data[0].expiredAt, '2027-12-31T23:59:59.000Z');
  });

  it('error cases: the answers are the documented error envelopes, and the document foresaw the -7', async () => {
    // the client refuses to send what the document forbids; sent anyway, the server refuses it the same way
    const bad = { ...BASE, chanId: 0 };
    await assert.rejects(client.call('openStream', { body: bad }), /rejects this body: \$\.chanId: 0 < 1/);
    const r = await client.call('openStream', { body: bad, validate: false });
    assert.deepEqual(r.json, { errCode: -7, message: 'Invalid parameter `chanId`. Use an integer 1..255.' });
    const noAuth = await client.call('streamStatus', { auth: null });
    assert.equal(noAuth.status, 401);
    assert.equal(noAuth.json.errCode, -9);
    const notAdmin = await client.call('setTimedTokens', { body: { tokens: [{ token: 'x', expiredAt: '2027-01-01T00:00:00Z' }] } });
    assert.equal(notAdmin.status, 403);
    assert.equal(notAdmin.json.errCode, -11);
    const badLimit = await client.call('queryRecords', { query: { startTm: recentStart(), __limit: 2001 } });
    assert.equal(badLimit.json.errCode, -7);
    assert.match(badLimit.json.message, /`__limit`/);
    const limitSchema = (client.operation('queryRecords').op.parameters as Array<{ name: string; schema: Record<string, unknown> }>).find(
      (p) => p.name === '__limit',
    )!.schema;
    assert.match(client.schemas.check(limitSchema, 2001) ?? '', /2001 > 2000/);
    const notFound = await client.call('downloadRecord', { path: { path: '2026/01/x.flv' } });
    assert.equal(notFound.status, 404);
    assert.equal(notFound.json.errCode, -8);
  });

  it('the document and the running validator agree on every generated open body', async () => {
    const disagreements: string[] = [];
    const cases = openCases();
    for (const c of cases) {
      const docSays = client.requestProblem('openStream', c.body);
      const r = await client.call('openStream', { body: c.body, validate: false });
      assert.ok(r.json.errCode === 0 || r.json.errCode === -7, `${c.label}: unexpected ${JSON.stringify(r.json)}`);
      if (r.json.errCode === 0) await client.call('closeStreams', { body: { reqIds: [r.json.data[0].reqId] } });
      const serverRejects = r.json.errCode === -7;
      if (serverRejects !== (docSays !== undefined)) {
        disagreements.push(
          `${c.label}: server ${serverRejects ? `rejects (${r.json.message})` : 'accepts'}, document ${docSays ? `rejects (${docSays})` : 'accepts'}`,
        );
      }
    }
    assert.deepEqual(disagreements, [], `${disagreements.length} of ${cases.length} bodies`);
    // the set covers both verdicts in numbers (a generator gone wrong would make every body valid or invalid)
    const rejected = cases.filter((c) => client.requestProblem('openStream', c.body)).length;
    assert.ok(rejected > 40 && cases.length - rejected > 30, `${rejected} rejected of ${cases.length}`);
  });
});
