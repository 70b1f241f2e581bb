/** A gateway with flv-out and rtsp-source on loopback, and the open call with an rtspSrc. */
import assert from 'node:assert/strict';
import type { PluginDefinition } from '../../../plugin-sdk';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import rtspSource from '../index';

export async function startGateway(
  config: Record<string, unknown> = {},
  more: Array<{ name: string; config?: Record<string, unknown>; def?: PluginDefinition<object> }> = [],
): Promise<TestGateway> {
  return startTestGateway({
    plugins: [
      { name: 'flv-out', config: { schemes: ['http', 'ws'] } },
      ...more,
      { name: 'rtsp-source', def: rtspSource, config: { openTimeoutSec: 5, requestTimeoutSec: 3, reconnectMinMs: 200, reconnectMaxMs: 1000, ...config } },
    ],
    captureLogs: true,
  });
}

export interface OpenReply {
  errCode: number;
  message: string;
  data?: Array<Record<string, unknown>>;
}

/** POST /strm/open with an rtspSrc; the reply as it is (errors included) */
export async function openRtsp(
  gw: TestGateway,
  simNo: string,
  rtspSrc: Record<string, unknown>,
  chanId = 1,
  token = 'tok',
  extra: Record<string, unknown> = {},
): Promise<OpenReply> {
  const r = await gw.api('POST', '/strm/open', { user: { token }, typ: 'live', simNo, chanId, keepIntv: 600, scheme: 'http', rtspSrc, ...extra });
  return r.json as OpenReply;
}

export async function statusOf(gw: TestGateway, reqId: string): Promise<Record<string, unknown>> {
  const r = await gw.api('GET', `/strm/status?reqId=${encodeURIComponent(reqId)}`);
  return (r.json.data as Array<Record<string, unknown>>)[0];
}

type Track = Record<string, unknown>;

/** the stream's video and audio tracks as /strm/status lists them under `codecs` */
export function assertTracks(st: Record<string, unknown>, video: Track, audio: Track): void {
  const codecs = st.codecs as Track[];
  assert.deepEqual(
    codecs.find((x) => x.kind === 'video'),
    video,
  );
  assert.deepEqual(
    codecs.find((x) => x.kind === 'audio'),
    audio,
  );
}

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** the value of one series of an rtsp-source metric (`gw_rtsp_source_<name>`) whose labels include `labels`; 0 when absent */
export async function metricValue(gw: TestGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${gw.baseUrl}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^gw_rtsp_source_${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) {
    const have = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[2]);
  }
  return sum;
}
