import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/** An application as configured in the site file; each Basic credential belongs to one. */
export interface Application {
  appId: string;
  user: string;
  /** must send timedToken on open */
  gov: boolean;
  /** may call administrative routes (e.g. set timed tokens) */
  admin: boolean;
}

/**
 * 'api': Basic credentials of a site application required (401 otherwise);
 * 'admin': as 'api', and the application must be marked admin (-11 otherwise);
 * 'none': no credentials (health checks, play URLs that carry their own token).
 */
export type AuthMode = 'api' | 'admin' | 'none';

export interface RouteRequest {
  method: string;
  /** path without the query string, still percent-encoded */
  path: string;
  /** the rest of the path after a route registered with a trailing '/*' */
  rest: string;
  query: URLSearchParams;
  /** parsed JSON body for POST/PUT (an object), undefined otherwise */
  body: Record<string, unknown> | undefined;
  /** the authenticated application ('api'/'admin' routes) */
  app: Application | undefined;
  headers: IncomingMessage['headers'];
  remote: string;
  raw: IncomingMessage;
}

/** What a JSON route returns: the envelope's data (always sent as an array) and optional message. */
export interface JsonReply {
  data?: unknown[];
  message?: string;
}

export type JsonHandler = (req: RouteRequest) => Promise<JsonReply | void> | JsonReply | void;
/** A raw handler writes the response itself (files, media). */
export type RawHandler = (req: RouteRequest, res: ServerResponse) => Promise<void> | void;
export type UpgradeHandler = (req: RouteRequest, socket: Duplex, head: Buffer) => void;
/**
 * An accepted WebSocket (the `ws` package's). Refuse a connection the route's auth cannot judge (a play token in
 * the query) by closing it with a 44xx code, e.g. 4401.
 */
export type WebSocketHandler = (ws: WebSocket, req: RouteRequest) => void;

export interface WebSocketRouteOptions extends RouteOptions {
  /** largest message accepted (default 1 MiB); a bigger one closes the socket with 1009 */
  maxPayload?: number;
  /** subprotocols the route speaks, preferred first (the first the client offers is chosen; default none) */
  protocols?: string[];
}

export interface RouteOptions {
  auth: AuthMode;
  /**
   * JSON routes about one request (`POST /strm/relay {reqId}`): the request id a body names. With several workers
   * the call is answered by the worker that holds that request (it is passed there, body and credentials as they
   * came); a request nobody holds is answered here.
   */
  reqIdOf?: (body: Record<string, unknown>) => string | undefined;
}

/** How `Routes.url` writes a URL; every part has a default. */
export interface UrlOptions {
  /**
   * default: apiBase's host on the API port, the site's publicHost on a listener of the plugin's own. A play URL takes
   * the host its `playUrl` args give (the open's connIdx picks it)
   */
  host?: string;
  /** default: apiBase's scheme on the API port; http, or https when it speaks TLS, on a listener of the plugin's own; ws/wss for a WebSocket route */
  scheme?: string;
  /** query parameters, each encoded; undefined values are left out */
  query?: Record<string, string | undefined>;
}

export interface Routes {
  /**
   * The URL a client reaches `path` of these routes at: the listener's public port (on the API port, the one in the
   * site's apiBase), left out when it is the scheme's default. For play URLs and log lines:
   * `ctx.routes.url('/raw-h264/' + a.streamName, { host: a.host, scheme: a.scheme, query: { reqId: a.reqId, token: a.token } })`.
   */
  url(path: string, opts?: UrlOptions): string;
  get(path: string, handler: JsonHandler, opts: RouteOptions): void;
  post(path: string, handler: JsonHandler, opts: RouteOptions): void;
  /**
   * A route answered by the handler itself; path may end in '/*'. `method` is any HTTP method (a GET route also
   * answers HEAD), or '*' for every method the path has no route of its own for (a 405, a CORS preflight).
   */
  raw(method: string, path: string, handler: RawHandler, opts: RouteOptions): void;
  /** WebSocket (or other) upgrades on the API port for a path prefix ending in '/*' */
  upgrade(path: string, handler: UpgradeHandler, opts: RouteOptions): void;
  /**
   * WebSockets for a path prefix ending in '/*', or for one exact path (without '/*'): the upgrade is accepted (no subprotocol, no compression) and the
   * socket handed over; the server closes the sockets it accepted when it stops.
   */
  websocket(path: string, handler: WebSocketHandler, opts: WebSocketRouteOptions): void;
}
