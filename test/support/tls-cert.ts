import { spawnSync } from 'node:child_process';
import * as https from 'node:https';
import * as path from 'node:path';
import { requireTool } from './tools';

/** A self-signed certificate for 127.0.0.1 (IP SAN), made by openssl for this run. */
export function makeCert(dir: string, cn = '127.0.0.1'): { cert: string; key: string } {
  const openssl = requireTool('openssl', 'openssl');
  const cert = path.join(dir, `${cn}.crt`);
  const key = path.join(dir, `${cn}.key`);
  const r = spawnSync(openssl, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', `/CN=${cn}`, '-addext', `subjectAltName=IP:${cn}`, '-keyout', key, '-out', cert], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { cert, key };
}

/** An HTTPS request that trusts only `ca`: the whole answer. */
export function httpsRequest(url: string, ca: Buffer, o: { method?: string; body?: unknown; auth?: string } = {}): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const data = o.body === undefined ? undefined : Buffer.from(JSON.stringify(o.body));
    const req = https.request(url, {
      method: o.method ?? 'GET', ca,
      headers: { ...(o.auth ? { Authorization: o.auth } : {}), ...(data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {}) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(data);
  });
}
