import { execFile, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import * as https from 'node:https';
import * as path from 'node:path';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { requireTool } from './tools';

const execFileP = promisify(execFile);

/** A self-signed certificate for 127.0.0.1 (IP SAN), made by openssl for this run. */
export function makeCert(dir: string, cn = '127.0.0.1'): { cert: string; key: string } {
  const openssl = requireTool('openssl', 'openssl');
  const cert = path.join(dir, `${cn}.crt`);
  const key = path.join(dir, `${cn}.key`);
  const r = spawnSync(
    openssl,
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      `subjectAltName=IP:${cn}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { cert, key };
}

/** An HTTPS request that trusts only `ca`: the whole answer. */
export function httpsRequest(
  url: string,
  ca: Buffer,
  o: { method?: string; body?: unknown; auth?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const data = o.body === undefined ? undefined : Buffer.from(JSON.stringify(o.body));
    const req = https.request(
      url,
      {
        method: o.method ?? 'GET',
        ca,
        headers: { ...(o.auth ? { Authorization: o.auth } : {}), ...(data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** A WSS player that trusts only `ca`: what the stream sent until `bytes` came, or `timeoutMs` passed. */
export async function readWss(url: string, ca: Buffer, bytes = 64 * 1024, timeoutMs = 20_000): Promise<Buffer> {
  const ws = new WebSocket(url, { ca });
  const got: Buffer[] = [];
  let n = 0;
  ws.on('message', (d: Buffer) => {
    got.push(d);
    n += d.length;
  });
  await once(ws, 'open');
  const deadline = Date.now() + timeoutMs;
  while (n < bytes && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  ws.close();
  return Buffer.concat(got);
}

/**
 * The video stream ffprobe (ffmpeg's own TLS) finds at an https URL, or undefined; and its JSON. Not spawnSync: a
 * gateway running in the test's own process must go on serving while ffprobe reads.
 */
export async function probeHttpsVideo(url: string): Promise<{ video: Record<string, unknown> | undefined; json: string }> {
  const ffprobe = requireTool('ffprobe', 'ffmpeg');
  const r = await execFileP(ffprobe, ['-v', 'error', '-rw_timeout', '10000000', '-show_entries', 'stream=codec_name,width,height', '-of', 'json', url], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { video: (JSON.parse(r.stdout).streams as Array<Record<string, unknown>>).find((s) => s.codec_name === 'h264'), json: r.stdout };
}
