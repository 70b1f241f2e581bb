import { ErrCode, GatewayError } from '../plugin-sdk/errors';
import type { Kernel } from './kernel';

/** The kernel's own routes: health, metrics and the session API of strm-api 3.4.4. */
export function registerCoreRoutes(k: Kernel): void {
  const routes = k.api.routesFor('core');
  routes.raw('GET', '/healthz', (_req, res) => {
    const body = JSON.stringify({ status: k.started ? 'ok' : 'starting', requests: k.sessions.requestCount, streams: k.sessions.streamCount });
    res.writeHead(k.started ? 200 : 503, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(body);
  }, { auth: 'none' });
  routes.raw('GET', '/metrics', async (_req, res) => {
    const text = await k.registry.metrics();
    res.writeHead(200, { 'Content-Type': k.registry.contentType });
    res.end(text);
  }, { auth: 'none' });

  routes.post('/strm/open', async (req) => {
    const result = await k.sessions.open(req.app!, req.body!);
    return { data: [result] };
  }, { auth: 'api' });
  routes.post('/strm/keep', (req) => ({ data: k.sessions.keep(req.app!, req.body!.reqIds) }), { auth: 'api' });
  routes.post('/strm/close', (req) => ({ data: k.sessions.close(req.app!, req.body!.reqIds) }), { auth: 'api' });
  routes.get('/strm/status', (req) => {
    const reqId = req.query.get('reqId');
    const all = k.sessions.status(req.app!) as Array<{ reqId: string }>;
    if (reqId !== null && reqId.length > 64) throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`.');
    return { data: reqId ? all.filter((r) => r.reqId === reqId) : all };
  }, { auth: 'api' });
}
