import type { RouteRequest } from '../plugin-sdk/http';
import { ErrCode, GatewayError } from '../plugin-sdk/errors';
import { allowListed } from './address-lists';
import type { Kernel } from './kernel';
import { ClusterSessions } from './cluster/session-calls';
import { scrapeText } from './metrics-scrape';

type Access = 'granted' | 'needs-credentials' | 'denied';

/**
 * metricsAccess: metrics carry every tenant's SIMs (stream labels) and callback hosts, so past 'open' only the
 * operator reads them: an admin application or an allow-listed scraper. Credentials go through the API's own check,
 * brake included, so /metrics is no side door for password guessing.
 */
function metricsAccess(k: Kernel, req: RouteRequest): Access {
  const mode = k.gateway.metricsAccess;
  if (mode === 'open' || allowListed(k.metricsAllow, req.remote)) return 'granted';
  if (mode === 'allow-list') return 'denied';
  if (!req.headers.authorization) return 'needs-credentials';
  return k.api.authenticate(req.raw, 'api')!.admin ? 'granted' : 'denied';
}

/** The kernel's own routes: health, metrics and the session API of strm-api 3.4.4. */
export function registerCoreRoutes(k: Kernel): void {
  const routes = k.api.routesFor('core');
  // with several workers each session call goes to the worker that holds the channel or request
  const cs = k.cluster ? new ClusterSessions(k, k.cluster.link) : undefined;
  routes.raw(
    'GET',
    '/healthz',
    async (req, res) => {
      let counts = false;
      try {
        counts = metricsAccess(k, req) === 'granted';
      } catch {
        // bad or blocked credentials: still a health answer, only without the counts
      }
      // with several workers, what every worker says (this one alone if they cannot be asked)
      let degraded: Record<string, unknown> = k.health.details();
      if (cs && k.started) degraded = await cs.health().catch(() => degraded);
      const isDegraded = Object.keys(degraded).length > 0;
      // degraded is still 200: live media flows, and a load balancer should keep sending players
      const status = !k.started ? 'starting' : isDegraded ? 'degraded' : 'ok';
      let totals = { requests: k.sessions.requestCount, streams: k.sessions.streamCount };
      if (counts && cs) totals = await cs.counts().catch(() => totals);
      const body = JSON.stringify(
        counts ? { status, ...totals, ...(cs ? { workers: k.cluster!.link.count } : {}), ...(isDegraded ? { degraded } : {}) } : { status },
      );
      res.writeHead(k.started ? 200 : 503, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      res.end(body);
    },
    { auth: 'none' },
  );
  routes.raw(
    'GET',
    '/metrics',
    async (req, res) => {
      const access = metricsAccess(k, req);
      if (access === 'needs-credentials') throw new GatewayError(ErrCode.AUTHENTICATION_FAILED, 'Authentication failed.', 401);
      if (access === 'denied') throw new GatewayError(ErrCode.ACCESS_DENIED, 'Access denied.');
      // with several workers: the sum over all of them, so a scrape does not depend on which worker it landed on
      const text = cs ? await cs.metrics() : await scrapeText(k.registry);
      res.writeHead(200, { 'Content-Type': k.registry.contentType, 'Cache-Control': 'no-store' });
      res.end(text);
    },
    { auth: 'none' },
  );

  // over the fleet: each call goes to the node that owns the channel or holds the request (core/fleet/)
  const fleet = k.fleet!.sessions;
  routes.post('/strm/open', async (req) => ({ data: [await fleet.open(req.app!, req.body!)] }), { auth: 'api' });
  routes.post('/strm/keep', async (req) => ({ data: await fleet.keep(req.app!, req.body!.reqIds) }), { auth: 'api' });
  routes.post('/strm/close', async (req) => ({ data: await fleet.close(req.app!, req.body!.reqIds) }), { auth: 'api' });
  routes.get(
    '/strm/status',
    async (req) => {
      const reqId = req.query.get('reqId');
      const all = (await fleet.status(req.app!)) as Array<{ reqId: string }>;
      if (reqId !== null && reqId.length > 64) throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqId`.');
      return { data: reqId ? all.filter((r) => r.reqId === reqId) : all };
    },
    { auth: 'api' },
  );
}
