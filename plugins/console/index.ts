import * as fs from 'node:fs';
import * as path from 'node:path';
import { IsBoolean, IsInt, Max, Min } from 'class-validator';
import { definePlugin, ErrCode, GatewayError, type RouteRequest } from '../../plugin-sdk';
import { API_DOCS } from '../../plugin-sdk';
import { CSP, loadAssets, sendAsset, type Asset } from './src/assets';
import { ApiDocRegistry } from './src/openapi';

export class ConsoleConfig {
  /** serve the console pages at /console (a site turns them off with false, GW_CONSOLE_ENABLED=false) */
  @IsBoolean()
  enabled = true;

  /** serve GET /openapi.json and the docs page at /docs */
  @IsBoolean()
  apiDocs = true;

  /** how often the console page polls /strm/status, s */
  @IsInt()
  @Min(1)
  @Max(60)
  refreshSec = 2;
}

/** the gateway's version for the document's info (package.json at the repository root) */
function gatewayVersion(): string {
  for (const p of [path.resolve(__dirname, '../../../package.json'), path.resolve(__dirname, '../../package.json')]) {
    try {
      const v = (JSON.parse(fs.readFileSync(p, 'utf8')) as { version?: unknown }).version;
      if (typeof v === 'string') return v;
    } catch {
      // try the next place
    }
  }
  return '0.0.0';
}

/**
 * A web console on the API port (/console) for an application's own streams, with players served from
 * node_modules, and the OpenAPI document of the API (/openapi.json, docs at /docs) built from the validation rules.
 * The console holds no state of its own: the page calls the REST API with the application's Basic credentials.
 */
export default definePlugin({
  name: 'console',
  config: ConsoleConfig,
  provides: [API_DOCS],
  setup(ctx) {
    const docs = new ApiDocRegistry(ctx.sessions.openRequestSchema());
    ctx.services.provide(API_DOCS, docs);
    const cfg = ctx.config;
    if (!cfg.enabled && !cfg.apiDocs) return;
    const assets = loadAssets({ refreshSec: String(cfg.refreshSec), site: ctx.site.name });
    if (assets.missing.length) ctx.log.warn({ missing: assets.missing }, 'console: library files not installed; pages that need them will not work');
    const none = { auth: 'none' } as const;

    const serve = (table: Map<string, Asset>) => (req: RouteRequest, res: import('node:http').ServerResponse) => {
      const a = table.get(req.rest);
      if (!a) throw new GatewayError(ErrCode.RECORD_NOT_FOUND, 'Not found.', 404);
      sendAsset(res, a, req.method === 'HEAD');
    };
    // `/console` and `/docs` answer with a redirect to the folder form, so the pages' relative paths stay simple
    const toFolder = (to: string) => (_req: RouteRequest, res: import('node:http').ServerResponse) => {
      res.writeHead(308, { Location: to, 'Content-Security-Policy': CSP, 'Cache-Control': 'no-store' });
      res.end();
    };

    if (cfg.enabled) {
      ctx.routes.raw('GET', '/console', toFolder('/console/'), none);
      ctx.routes.raw('GET', '/console/*', serve(assets.console), none);
    }
    if (cfg.apiDocs) {
      ctx.routes.raw('GET', '/docs', toFolder('/docs/'), none);
      ctx.routes.raw('GET', '/docs/*', serve(assets.docs), none);
      const version = gatewayVersion();
      // no credentials: the document describes the API, it holds no data (as a public API reference would)
      ctx.routes.raw(
        'GET',
        '/openapi.json',
        (req, res) => {
          const text = JSON.stringify(docs.document({ version, siteName: ctx.site.name }), null, 1);
          res.writeHead(200, {
            'Content-Type': 'application/json; charset=utf-8',
            'Content-Length': Buffer.byteLength(text),
            'Cache-Control': 'no-cache',
            // Swagger UI elsewhere (an integrator's own) may read it; it carries no secrets and needs no credentials
            'Access-Control-Allow-Origin': '*',
          });
          res.end(req.method === 'HEAD' ? undefined : text);
        },
        none,
      );
    }
    ctx.log.info({ console: cfg.enabled, apiDocs: cfg.apiDocs }, 'console ready');
  },
});
