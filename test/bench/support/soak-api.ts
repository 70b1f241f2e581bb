/**
 * The gateway's session API as the soak's clients use it: node:http on one keep-alive agent (so the soak can count
 * the connections it holds, and close them all before the final descriptor count), Basic credentials per
 * application, and the envelope's errCode handed back instead of thrown, because the soak judges answers like
 * "closed: false" or -207 (retry) rather than failing on them.
 */
import * as http from 'node:http';

export interface Envelope<T> {
  errCode: number;
  message: string;
  data: T | undefined;
}

/** errCode of "the stream is closing; retry" (decisions.md: -207) */
export const ERR_RETRY = -207;

export class ApiError extends Error {
  constructor(
    message: string,
    readonly transport: boolean,
  ) {
    super(message);
  }
}

export interface AppCredentials {
  appId: string;
  user: string;
  password: string;
}

export class SoakApi {
  readonly agent: http.Agent;
  /** calls made, and calls that failed in transport (timeout, reset) or answered non-JSON */
  calls = 0;
  transportErrors = 0;
  private readonly auth = new Map<string, string>();

  constructor(
    readonly port: number,
    private readonly signal: AbortSignal,
    private readonly timeoutMs = 15_000,
    maxSockets = 256,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' });
  }

  /** connections this process holds to the API port (in use and idle) */
  get openSockets(): number {
    let n = 0;
    for (const list of Object.values(this.agent.sockets)) n += list?.length ?? 0;
    for (const list of Object.values(this.agent.freeSockets)) n += list?.length ?? 0;
    return n;
  }

  private authOf(app: AppCredentials): string {
    let a = this.auth.get(app.user);
    if (!a) this.auth.set(app.user, (a = 'Basic ' + Buffer.from(`${app.user}:${app.password}`).toString('base64')));
    return a;
  }

  /** A request; resolves with the status and body text, rejects with ApiError(transport) on a socket problem or timeout. */
  request(method: string, path: string, app: AppCredentials | undefined, body?: unknown): Promise<{ status: number; text: string }> {
    this.calls++;
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = {};
    if (app) headers.Authorization = this.authOf(app);
    if (payload) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(payload.length);
    }
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: this.port, method, path, headers, agent: this.agent, signal: this.signal, timeout: this.timeoutMs });
      const fail = (why: string) => {
        this.transportErrors++;
        reject(new ApiError(`${method} ${path}: ${why}`, true));
      };
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err) => fail(err.message));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => fail(err.message));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      });
      req.end(payload);
    });
  }

  async call<T>(method: string, path: string, app: AppCredentials, body?: unknown): Promise<Envelope<T>> {
    const r = await this.request(method, path, app, body);
    try {
      const doc = JSON.parse(r.text) as { errCode?: unknown; message?: unknown; data?: T };
      if (typeof doc.errCode !== 'number') throw new Error('no errCode');
      return { errCode: doc.errCode, message: typeof doc.message === 'string' ? doc.message : '', data: doc.data };
    } catch {
      this.transportErrors++;
      throw new ApiError(`${method} ${path}: HTTP ${r.status}, not an API envelope: ${r.text.slice(0, 200)}`, false);
    }
  }

  /** GET /healthz's counts (the soak's site has metricsAccess 'open', so they are there) */
  async health(): Promise<{ status: string; requests?: number; streams?: number }> {
    const r = await this.request('GET', '/healthz', undefined);
    return JSON.parse(r.text) as { status: string; requests?: number; streams?: number };
  }

  async metricsText(): Promise<string> {
    const r = await this.request('GET', '/metrics', undefined);
    if (r.status !== 200) throw new ApiError(`GET /metrics: HTTP ${r.status}`, false);
    return r.text;
  }

  /** Closes every pooled connection (idle ones at once; busy ones when their call ends). */
  closeAll(): void {
    this.agent.destroy();
  }
}
