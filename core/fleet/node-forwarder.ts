/**
 * A plugin's call about one request (a JSON route with `reqIdOf`: `POST /strm/relay {reqId}`) that reaches a node
 * which does not hold the request goes to the node that does, as the client sent it (its credentials, its body), and
 * the answer comes back unchanged. Session calls (open, keep, close, status) have their own fleet routes; this is for
 * plugins' routes, which the directory knows nothing of beyond the request's node. One hop: a call that came from
 * another node is answered where it lands.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { Logger } from 'pino';
import type { Application } from '../../plugin-sdk/http';
import type { Directory } from '../directory/directory';

/** marks a call one node passed to another */
export const NODE_HOP_HEADER = 'x-gw-node-hop';
const TIMEOUT_MS = 10_000;

export class NodeForwarder {
  constructor(
    private readonly dir: Directory,
    private readonly log: Logger,
  ) {}

  async requestOfReq(
    reqId: string,
    app: Application | undefined,
    req: http.IncomingMessage,
    body: Record<string, unknown>,
    res: http.ServerResponse,
  ): Promise<boolean> {
    if (!app || req.headers[NODE_HOP_HEADER] !== undefined || this.dir.kind !== 'redis') return false;
    const [entry] = await this.dir.find(app.appId, [reqId]).catch(() => [undefined]);
    if (!entry || entry.nodeId === this.dir.me.nodeId) return false;
    const node = await this.dir.node(entry.nodeId).catch(() => undefined);
    if (!node) return false;
    const url = new URL(`${node.apiBase.replace(/\/+$/, '')}${req.url ?? '/'}`);
    const text = JSON.stringify(body);
    const mod = url.protocol === 'https:' ? https : http;
    await new Promise<void>((resolve) => {
      const out = mod.request(
        url,
        {
          method: req.method,
          timeout: TIMEOUT_MS,
          headers: {
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(text),
            [NODE_HOP_HEADER]: this.dir.me.nodeId,
            ...(req.headers.authorization ? { Authorization: req.headers.authorization } : {}),
          },
        },
        (up) => {
          res.writeHead(up.statusCode ?? 502, { 'Content-Type': up.headers['content-type'] ?? 'application/json' });
          up.pipe(res);
          up.on('end', resolve);
          up.on('error', () => {
            res.destroy();
            resolve();
          });
        },
      );
      out.on('timeout', () => out.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
      out.on('error', (err) => {
        this.log.warn({ node: node.nodeId, path: url.pathname, err: err.message }, 'the node that holds the request did not answer a call passed to it');
        if (!res.headersSent) {
          res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1' });
          res.end(JSON.stringify({ errCode: -3, message: 'The node that holds this request did not answer; retry.' }));
        }
        resolve();
      });
      out.end(text);
    });
    return true;
  }
}
