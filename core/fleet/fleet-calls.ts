import * as http from 'node:http';
import * as https from 'node:https';
import { timingSafeEqual, createHash } from 'node:crypto';
import { ErrCode, GatewayError, type ErrCodeValue } from '../../plugin-sdk/errors';

/** the header that carries the fleet's secret on calls between nodes */
export const FLEET_HEADER = 'x-gw-fleet';
/** where a node takes calls from the other nodes, on its API port */
export const FLEET_PATH = '/fleet/v1/';
/** a node that does not answer a call within this is treated as not answering */
const CALL_TIMEOUT_MS = 5000;

export type FleetMethod = 'open' | 'keep' | 'close' | 'status';

/** the node asked did not answer (down, unreachable, or not a gateway): not the same as an answer with an error */
export class NodeUnreachable extends Error {}

const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 64 }), https: new https.Agent({ keepAlive: true, maxSockets: 64 }) };

/**
 * Calls another node's fleet route: the API envelope comes back as it is; an errCode other than 0 becomes the same
 * GatewayError on this node, so the caller's client reads what the owner said.
 */
export function callNode(apiBase: string, secret: string, method: FleetMethod, args: unknown): Promise<unknown[]> {
  const url = new URL(`${apiBase.replace(/\/+$/, '')}${FLEET_PATH}${method}`);
  const body = JSON.stringify(args);
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        method: 'POST',
        agent: url.protocol === 'https:' ? agents.https : agents.http,
        timeout: CALL_TIMEOUT_MS,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), [FLEET_HEADER]: secret },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => {
          let env: { errCode?: number; message?: string; data?: unknown[] };
          try {
            env = JSON.parse(text) as typeof env;
          } catch {
            reject(new NodeUnreachable(`${url.host} answered HTTP ${res.statusCode} without a gateway envelope`));
            return;
          }
          if (env.errCode === 0) resolve(env.data ?? []);
          else
            reject(
              new GatewayError((env.errCode ?? ErrCode.EXECUTION_ERROR) as ErrCodeValue, env.message ?? 'Failed on the node that serves it.', res.statusCode),
            );
        });
        res.on('error', (err) => reject(new NodeUnreachable(`${url.host}: ${err.message}`)));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CALL_TIMEOUT_MS / 1000} s`)));
    req.on('error', (err) => reject(new NodeUnreachable(`${url.host}: ${err.message}`)));
    req.end(body);
  });
}

/** whether a call carries the fleet's secret (constant time whatever the lengths) */
export function fleetSecretMatches(given: string | string[] | undefined, secret: string): boolean {
  if (typeof given !== 'string' || !secret) return false;
  const d = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(d(given), d(secret));
}
