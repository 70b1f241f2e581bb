import * as http from 'node:http';
import * as https from 'node:https';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { AuthMode, JsonHandler, RawHandler, RouteOptions, RouteRequest, Routes, UpgradeHandler, Application } from '../../plugin-sdk/http';
import { CredentialCheck, LoginThrottled, type CredentialCheckOptions } from './credential-check';
import { isJsonContentType, readJsonBody } from './json-body';
import { envelope, SECURITY_HEADERS, sendFailure, sendJson } from './replies';
import { routeUrl, type PublicAddress } from './route-url';

type Route =
  | { kind: 'json'; handler: JsonHandler; auth: AuthMode; owner: string; reqIdOf?: (body: Record<string, unknown>) => string | undefined }
  | { kind: 'raw'; handler: RawHandler; auth: AuthMode; owner: string };

interface PrefixRoute<T> {
  prefix: string;
  route: T;
}
/** an upgrade route: a path prefix (registered as `…/*`), or one exact path (a websocket route without `/*`) */
interface UpgradeRoute {
  prefix: string;
  exact?: boolean;
  route: { handler: UpgradeHandler; auth: AuthMode };
}

export interface ApiServerOptions extends CredentialCheckOptions {
  bodyLimit: number;
  /** default 15 s */
  headersTimeoutMs?: number;
  /** default 30 s */
  requestTimeoutMs?: number;
  /** idle time between requests before a connection is closed (gateway.httpKeepAliveSec); default 65 s */
  keepAliveTimeoutMs?: number;
  /** serve HTTPS (and WSS upgrades) with this certificate and key instead of plain HTTP */
  tls?: { cert: Buffer; key: Buffer };
}

/** with several workers: passes a request that belongs to another worker's stream there (core/cluster/forwarder.ts) */
export interface ApiForwarder {
  request(req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean>;
  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<boolean>;
  /** a JSON call about request `reqId` (its body read already): passed to the worker that holds it, if another does */
  requestOfReq(reqId: string, req: http.IncomingMessage, body: Record<string, unknown>, res: http.ServerResponse): Promise<boolean>;
}

/**
 * The one HTTP server on the API port. Routes come from the kernel and plugins; every reply uses the envelope
 * of decisions.md and never carries a stack trace.
 */
export class ApiServer {
  readonly server: http.Server;
  private readonly exact = new Map<string, Route>();
  private readonly prefixes: PrefixRoute<Route & { method: string }>[] = [];
  private readonly upgrades: UpgradeRoute[] = [];
  /** one per websocket route: what it accepted is closed at close() (upgraded sockets leave the HTTP server's care) */
  private readonly wsServers: WebSocketServer[] = [];
  private readonly opts: ApiServerOptions;
  private readonly credentials: CredentialCheck;
  private readonly onRequest: http.RequestListener;
  /** set by the kernel in a multi-worker gateway */
  forwarder: ApiForwarder | undefined;
  /** in a fleet: a call about a request another node holds goes there (core/fleet/node-forwarder.ts) */
  nodeForwarder:
    | {
        requestOfReq(
          reqId: string,
          app: Application | undefined,
          req: http.IncomingMessage,
          body: Record<string, unknown>,
          res: http.ServerResponse,
        ): Promise<boolean>;
      }
    | undefined;

  constructor(opts: ApiServerOptions) {
    this.opts = opts;
    this.credentials = new CredentialCheck(opts);
    const serverOptions = this.serverOptions();
    const create = (listener: http.RequestListener): http.Server =>
      opts.tls
        ? // a handshake that never completes holds a descriptor like a slowloris: the same header timeout bounds it
          https.createServer({ ...serverOptions, ...opts.tls, handshakeTimeout: opts.headersTimeoutMs ?? 15_000 }, listener)
        : http.createServer(serverOptions, listener);
    this.onRequest = (req, res) => {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- Node's docs: a request's socket may be internally nulled, which its type does not say
      const remote = req.socket?.remoteAddress ?? '';
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
      this.forwardOrHandle(req, res).catch((err) => {
        try {
          sendFailure(res, err, req, remote, this.opts.bodyLimit, this.opts.log);
        } catch (inner) {
          this.opts.log.error({ err: inner }, 'failed to send an error reply');
          res.destroy();
        }
      });
    };
    this.server = create(this.onRequest);
    this.attach(this.server);
  }

  private serverOptions(): http.ServerOptions {
    return {
      requestTimeout: this.opts.requestTimeoutMs ?? 30_000,
      headersTimeout: this.opts.headersTimeoutMs ?? 15_000,
      keepAliveTimeout: this.opts.keepAliveTimeoutMs ?? 65_000,
    };
  }

  private attach(server: http.Server): void {
    server.on('upgrade', (req, socket, head) => {
      const fwd = this.forwarder;
      if (!fwd) {
        this.handleUpgrade(req, socket, head);
        return;
      }
      fwd.upgrade(req, socket, head).then(
        (taken) => {
          if (!taken) this.handleUpgrade(req, socket, head);
        },
        (err) => {
          this.opts.log.error({ err, path: req.url?.split('?')[0] }, 'forwarding an upgrade failed');
          socket.destroy();
        },
      );
    });
    server.on('clientError', (err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  private internal: http.Server | undefined;
  /**
   * The same routes on plain HTTP, for requests other workers forward here over a local socket (the public server may
   * speak TLS, which that hop does not need). Made on first use; closed with the server.
   */
  internalServer(): http.Server {
    if (!this.internal) {
      this.internal = http.createServer(this.serverOptions(), this.onRequest);
      this.attach(this.internal);
    }
    return this.internal;
  }

  private async forwardOrHandle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (this.forwarder && (await this.forwarder.request(req, res))) return;
    await this.handle(req, res);
  }

  /**
   * Routes bound to one owner (a plugin name or 'core') for error messages and logs; `at` is where clients reach this
   * server (`Routes.url`), when the caller knows.
   */
  routesFor(owner: string, at?: PublicAddress): Routes {
    const add = (method: string, path: string, route: Route) => {
      if (path.endsWith('/*')) {
        const prefix = path.slice(0, -1);
        if (this.prefixes.some((p) => p.prefix === prefix && p.route.method === method)) throw new Error(`route ${method} ${path} is already registered`);
        this.prefixes.push({ prefix, route: { ...route, method } });
        this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
        return;
      }
      const key = `${method} ${path}`;
      if (this.exact.has(key)) throw new Error(`route ${key} is already registered by ${this.exact.get(key)!.owner}`);
      this.exact.set(key, route);
    };
    return {
      url: (path, o) => {
        if (!at) throw new Error('routes.url: these routes have no public address');
        return routeUrl(at, path, o);
      },
      get: (path, handler, o: RouteOptions) => add('GET', path, { kind: 'json', handler, auth: o.auth, owner }),
      post: (path, handler, o: RouteOptions) => add('POST', path, { kind: 'json', handler, auth: o.auth, owner, reqIdOf: o.reqIdOf }),
      raw: (method, path, handler, o: RouteOptions) => {
        if (method !== '*' && !/^[A-Z]{3,16}$/.test(method)) throw new Error(`route method '${method}': an upper-case HTTP method or '*'`);
        add(method, path, { kind: 'raw', handler, auth: o.auth, owner });
      },
      upgrade: (path, handler, o: RouteOptions) => {
        if (!path.endsWith('/*')) throw new Error('upgrade routes are prefixes and must end with /*');
        if (this.upgrades.some((u) => u.prefix === path.slice(0, -1))) throw new Error(`upgrade route ${path} is already registered`);
        this.upgrades.push({ prefix: path.slice(0, -1), route: { handler, auth: o.auth } });
        this.upgrades.sort((a, b) => b.prefix.length - a.prefix.length);
      },
      websocket: (path, handler, o) => {
        // an exact path (e.g. intercom's /talk-stomp, whose URL decisions.md fixes) is allowed for WebSockets
        const exact = !path.endsWith('/*');
        if (exact && this.upgrades.some((u) => u.exact && u.prefix === path)) throw new Error(`upgrade route ${path} is already registered`);
        const wss = new WebSocketServer({
          noServer: true,
          perMessageDeflate: false,
          maxPayload: o.maxPayload ?? 1024 * 1024,
          // the first subprotocol the route speaks that the client offers (STOMP clients offer v12.stomp), else none
          handleProtocols: (offered: Set<string>) => o.protocols?.find((p) => offered.has(p)) ?? false,
        });
        this.wsServers.push(wss);
        const routes = this.routesFor(owner);
        const onUpgrade: UpgradeHandler = (rr, socket, head) => {
          if ((rr.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
            socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
            return;
          }
          wss.handleUpgrade(rr.raw, socket, head, (ws) => {
            ws.on('error', (err) => this.opts.log.debug({ err: err.message, path: rr.path }, 'WebSocket error'));
            try {
              handler(ws, rr);
            } catch (err) {
              this.opts.log.error({ err, path: rr.path }, 'WebSocket handler failed');
              ws.terminate();
            }
          });
        };
        if (!exact) routes.upgrade(path, onUpgrade, o);
        else this.upgrades.unshift({ prefix: path, exact: true, route: { handler: onUpgrade, auth: o.auth } });
      },
    };
  }

  private find(method: string, path: string): { route: Route; rest: string } | undefined {
    // the method's own routes first, then the catch-all ones ('*')
    for (const lookup of [method === 'HEAD' ? ['HEAD', 'GET'] : [method], ['*']]) {
      for (const m of lookup) {
        const r = this.exact.get(`${m} ${path}`);
        if (r) return { route: r, rest: '' };
      }
      for (const p of this.prefixes) {
        if (lookup.includes(p.route.method) && path.startsWith(p.prefix)) return { route: p.route, rest: path.slice(p.prefix.length) };
      }
    }
    return undefined;
  }

  /**
   * The application of a request's Basic credentials, for `mode`. Throws 401/-9 (bad or missing), 429/-9 (the address
   * is blocked after too many failures: no check is made) or -11 (not admin). Public for routes with their own
   * access rules (/metrics): every credential check goes through the same brake.
   */
  authenticate(req: http.IncomingMessage, mode: AuthMode): Application | undefined {
    return this.credentials.authenticate(req, mode);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const found = this.find(method, path);
    if (!found) {
      req.resume();
      sendJson(res, 404, envelope(ErrCode.RECORD_NOT_FOUND, 'Not found.'));
      return;
    }
    const { route, rest } = found;
    const app = this.authenticate(req, route.auth);
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- as in onRequest: the socket may be nulled
    const remote = req.socket?.remoteAddress ?? '';
    const rr: RouteRequest = {
      method,
      path,
      rest,
      query,
      app,
      body: undefined,
      headers: req.headers,
      remote,
      raw: req,
    };
    if (route.kind === 'raw') {
      await route.handler(rr, res);
      return;
    }
    if (method === 'POST' || method === 'PUT') {
      // A browser sends a cross-origin text/plain or form POST without a preflight, with the credentials it has
      // cached for this host; application/json needs the preflight this API never grants.
      if (!isJsonContentType(req.headers['content-type'])) {
        req.resume();
        throw new GatewayError(ErrCode.BAD_REQUEST, 'Content-Type must be application/json.', 415);
      }
      rr.body = await readJsonBody(req, this.opts.bodyLimit);
      const id = route.reqIdOf?.(rr.body);
      if (id !== undefined && this.forwarder && (await this.forwarder.requestOfReq(id, req, rr.body, res))) return;
      if (id !== undefined && this.nodeForwarder && (await this.nodeForwarder.requestOfReq(id, app, req, rr.body, res))) return;
    } else {
      req.resume();
    }
    const reply = (await route.handler(rr)) ?? {};
    sendJson(res, 200, envelope(ErrCode.OK, reply.message ?? 'OK', reply.data ?? []));
  }

  private handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const up = this.upgrades.find((u) => u.exact && path === u.prefix) ?? this.upgrades.find((u) => !u.exact && path.startsWith(u.prefix));
    if (!up) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    let app: Application | undefined;
    try {
      app = this.authenticate(req, up.route.auth);
    } catch (err) {
      if (err instanceof LoginThrottled) {
        socket.end(`HTTP/1.1 429 Too Many Requests\r\nRetry-After: ${err.retryAfterSec}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      } else {
        socket.end('HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      }
      return;
    }
    const rr: RouteRequest = {
      method: req.method ?? 'GET',
      path,
      rest: path.slice(up.prefix.length),
      query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)),
      app,
      body: undefined,
      headers: req.headers,
      remote: req.socket.remoteAddress ?? '',
      raw: req,
    };
    try {
      up.route.handler(rr, socket, head);
    } catch (err) {
      this.opts.log.error({ err, path }, 'upgrade handler failed');
      socket.destroy();
    }
  }

  async close(): Promise<void> {
    for (const wss of this.wsServers) {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    }
    this.internal?.closeAllConnections();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
