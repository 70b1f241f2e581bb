/**
 * The console's files: its own pages and scripts (plugins/console/web, plain JavaScript modules and CSS, served as
 * they are: no build step), and the player and docs libraries from node_modules. Each is named in a fixed table
 * read once at setup, so no request path ever reaches the file system.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ServerResponse } from 'node:http';

export interface Asset {
  body: Buffer;
  type: string;
  /** HTML pages are documents: they get the CSP and are never cached (the template carries settings) */
  page: boolean;
}

/**
 * The Content-Security-Policy of every console and docs reply. script-src 'self' and no 'unsafe-inline' or eval: an
 * injected string can never run. Play URLs live on other ports and hosts (flv-out, hls-out, the public host) that
 * this plugin cannot know at boot, hence connect-src by scheme; media comes through MediaSource (blob:).
 */
export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI and the players set element styles from script (allowed); stylesheets are ours
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "media-src 'self' blob:",
  "connect-src 'self' http: https: ws: wss:",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

/** plugins/console/web, from the compiled plugin (dist/plugins/console/src) or a copy beside it */
export function webDir(): string {
  const candidates = [path.resolve(__dirname, '../web'), path.resolve(__dirname, '../../../../plugins/console/web')];
  const found = candidates.find((d) => fs.existsSync(path.join(d, 'index.html')));
  if (!found) throw new Error(`console web files not found (looked in ${candidates.join(', ')})`);
  return found;
}

function asset(file: string, page = false): Asset {
  return { body: fs.readFileSync(file), type: TYPES[path.extname(file)] ?? 'application/octet-stream', page };
}

/** A file of an npm package, or undefined when the package is not installed (npm ci --omit=dev of an old lock). */
function packageFile(spec: string): Asset | undefined {
  try {
    return asset(require.resolve(spec));
  } catch {
    return undefined;
  }
}

export interface AssetTables {
  /** under /console/ */
  console: Map<string, Asset>;
  /** under /docs/ */
  docs: Map<string, Asset>;
  /** library files that could not be found (said in the log) */
  missing: string[];
}

/** Reads every file once. `settings` fill the pages' <meta> placeholders. */
export function loadAssets(settings: Record<string, string>): AssetTables {
  const dir = webDir();
  const fill = (a: Asset): Asset => {
    let text = a.body.toString('utf8');
    for (const [k, v] of Object.entries(settings)) text = text.split(`{{${k}}}`).join(v.replace(/[^A-Za-z0-9 ._:/-]/g, ''));
    return { ...a, body: Buffer.from(text), page: true };
  };
  const consoleFiles = new Map<string, Asset>();
  const docs = new Map<string, Asset>();
  for (const name of fs.readdirSync(dir)) {
    if (!/^[a-z0-9-]+\.(html|js|css|svg|png)$/.test(name)) continue;
    const a = asset(path.join(dir, name));
    if (name === 'docs.html' || name === 'docs-init.js') docs.set(name === 'docs.html' ? '' : name, name.endsWith('.html') ? fill(a) : a);
    else consoleFiles.set(name === 'index.html' ? '' : name, name.endsWith('.html') ? fill(a) : a);
  }
  const missing: string[] = [];
  const libs: Array<[Map<string, Asset>, string, string]> = [
    [consoleFiles, 'lib/mpegts.js', 'mpegts.js/dist/mpegts.js'],
    [consoleFiles, 'lib/hls.js', 'hls.js/dist/hls.min.js'],
    [docs, 'swagger-ui-bundle.js', 'swagger-ui-dist/swagger-ui-bundle.js'],
    [docs, 'swagger-ui.css', 'swagger-ui-dist/swagger-ui.css'],
  ];
  for (const [table, name, spec] of libs) {
    const a = packageFile(spec);
    if (a) table.set(name, a);
    else missing.push(spec);
  }
  return { console: consoleFiles, docs, missing };
}

/** Writes an asset (HEAD: headers only) with the console's security headers. */
export function sendAsset(res: ServerResponse, a: Asset, head: boolean): void {
  res.writeHead(200, {
    'Content-Type': a.type,
    'Content-Length': a.body.length,
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    // pages carry settings and the libraries change with npm installs: always revalidate, cheaply (local network)
    'Cache-Control': a.page ? 'no-store' : 'no-cache',
  });
  res.end(head ? undefined : a.body);
}
