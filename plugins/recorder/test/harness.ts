/** A recorder in a test gateway, with a probe plugin to push real H.264 into streams and watch notices. */
import assert from 'node:assert/strict';
import { definePlugin, type Notice, type PluginContext } from '../../../plugin-sdk';
import type { ManualClock } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { requireTool } from '../../../test/support/tools';
import { encodeTestPattern, loadClip, unitAt, type H264Clip } from './fixtures/h264-clip';
import { waitFor } from './helpers';

export const A = 'appa:pwa';
export const B = 'appb:pwb';
export const APPS = [
  { appId: 'A', user: 'appa', password: 'pwa' },
  { appId: 'B', user: 'appb', password: 'pwb' },
];
export const SIM = '013800138000';
export const NORM_SIM = '13800138000';

let clip: H264Clip | undefined;

/** 4 s of 25 fps 320x240 test pattern (100 frames), encoded once per process. */
export function testClip(): H264Clip {
  clip ??= loadClip(encodeTestPattern(requireTool('ffmpeg', 'ffmpeg'), 4));
  requireTool('ffprobe', 'ffmpeg');
  return clip;
}

let probe: PluginContext<object> | undefined;

/** the probe plugin's context in the gateway started last */
export function probeCtx(): PluginContext<object> {
  assert.ok(probe, 'no test gateway started');
  return probe;
}
/** every notice of every test gateway, in order */
export const notices: Notice[] = [];
export const probeDef = definePlugin({
  name: 'probe',
  setup(ctx) {
    probe = ctx;
    ctx.notices.on((n) => notices.push(n));
  },
});

export interface Harness {
  gw: TestGateway;
  dataDir: string;
}

const nodeApiBases = new Map<string, string>();

/**
 * The gateway config that keeps the apiBase a gateway on this data directory had the first time (none then: the
 * kernel's own, from its port): a restarted test gateway, on a new port, is still the same node, as a real node
 * keeps its address. With a PostgreSQL catalog a node's recovery and retention treat the rows naming its apiBase
 * (see "A fleet" in the README). Call keepApiBase with the gateway once started. (Its port is not reused: clients
 * of the test keep idle connections to the old one.)
 */
export function sameNode(dataDir: string): { apiBase?: string } {
  const apiBase = nodeApiBases.get(dataDir);
  return apiBase ? { apiBase } : {};
}
/** Remembers the apiBase of the gateway started last (the probe's) for its data directory. */
export function keepApiBase(dataDir: string, gw: TestGateway): TestGateway {
  if (!nodeApiBases.has(dataDir)) nodeApiBases.set(dataDir, probeCtx().site.apiBase);
  return gw;
}

/** `gateway`: kernel keys of this node beside the test's own (a fleet node's publicHost, listenHost) */
export async function startGateway(
  dataDir: string,
  recorder: Record<string, unknown> = {},
  clock?: ManualClock,
  gateway: Record<string, unknown> = {},
): Promise<TestGateway> {
  const stub = stubMediaPlugin({ fmts: [0, 1] });
  return keepApiBase(
    dataDir,
    await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'probe', def: probeDef },
        // loaded by name, as a site file would: dist/plugins/recorder/index.js
        { name: 'recorder', config: { timeZone: 'UTC', sizeUpdateSec: 1, ...recorder } },
      ],
      gateway: { dataDir, applications: APPS, ...gateway, ...sameNode(dataDir) },
      captureLogs: true,
      ...(clock ? { clock } : {}),
    }),
  );
}

export function ended(gw: TestGateway, reqId: string): boolean {
  return gw.logs.some((l) => l.reqId === reqId && typeof l.msg === 'string' && l.msg.startsWith('recording ended'));
}

export async function openRecorded(h: Harness, auth: string, over: Record<string, unknown> = {}): Promise<string> {
  const r = await h.gw.api('POST', '/strm/open', { user: { token: 'tok' }, typ: 'live', simNo: SIM, chanId: 1, keepIntv: 600, record: true, ...over }, auth);
  assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
  assert.equal(r.json.data[0].recording, true, 'the open result says recording');
  return r.json.data[0].reqId as string;
}

export function publisherFor(simNorm: string, chanId: number) {
  const s = probe!.sessions.findStream(simNorm, chanId, 'live');
  assert.ok(s, `stream ${simNorm}_${chanId}`);
  const pub = s.media.attachPublisher();
  pub.setTrack(testClip().track);
  return { pub, stream: s };
}

export async function closeReq(h: Harness, auth: string, reqId: string): Promise<void> {
  const c = await h.gw.api('POST', '/strm/close', { reqIds: [reqId] }, auth);
  assert.deepEqual(c.json.data, [{ reqId, closed: true }]);
  await waitFor(() => ended(h.gw, reqId), `the end of recording ${reqId}`);
}

/** Opens a recorded request, pushes `frames` frames of the clip starting at dts `startDts`, closes it. */
export async function recordClip(h: Harness, auth: string, opts: { chanId: number; frames: number; simNo?: string; startDts?: number }): Promise<string> {
  const simNo = opts.simNo ?? SIM;
  const reqId = await openRecorded(h, auth, { chanId: opts.chanId, simNo });
  const { pub } = publisherFor(simNo.replace(/^0+/, ''), opts.chanId);
  for (let i = 0; i < opts.frames; i++) pub.push(unitAt(testClip(), i, opts.startDts ?? 0));
  await closeReq(h, auth, reqId);
  return reqId;
}

export async function queryReq(h: Harness, auth: string, reqId: string): Promise<any[]> {
  const r = await h.gw.api('GET', `/strm/record?reqId=${encodeURIComponent(reqId)}`, undefined, auth);
  assert.equal(r.json.errCode, 0, JSON.stringify(r.json));
  return r.json.data;
}

/** `yyyy-mm-dd HH:mm:ss` in UTC, the query form for a gateway whose timeZone is UTC */
export const utcText = (d: Date): string => d.toISOString().slice(0, 19).replace('T', ' ');
