/**
 * The requests of one RTSP client connection (RFC 2326): CSeq numbering, answers matched to their requests (in
 * order when a server leaves CSeq out), a timeout per request, one 401 answered with Basic or Digest credentials,
 * and the Session header on every request once SETUP gave one. The session (session.ts) owns the socket and says
 * when requests can no longer be sent.
 */
import type { Cancel, Clock } from '../../../plugin-sdk';
import type { RtspResponse } from '../../../plugin-sdk/rtsp';
import { Authenticator, parseChallenges } from './auth';
import { SourceError } from './errors';
import { redactText, type SourceUrl } from './url';

const USER_AGENT = 'jt1078-gateway rtsp-source';

interface Pending {
  resolve(m: RtspResponse): void;
  reject(e: SourceError): void;
  cancel: Cancel;
}

export interface RequestChannelOptions {
  source: SourceUrl;
  clock: Clock;
  requestTimeoutMs: number;
  /** writes a request's text to the connection */
  write(text: string): void;
  /** why no request can be sent now (not connected, or the session ended), or undefined */
  unusable(): SourceError | undefined;
}

export class RequestChannel {
  private cseq = 0;
  private readonly pending = new Map<number, Pending>();
  private auth: Authenticator | undefined;
  /** the session SETUP named: on every request after it */
  sessionId: string | undefined;

  constructor(private readonly o: RequestChannelOptions) {}

  /** a request, answering one 401 with the credentials we have */
  async request(method: string, url: string, extra: Record<string, string> = {}): Promise<RtspResponse> {
    let r = await this.send(method, url, extra);
    if (r.status !== 401) return r;
    const src = this.o.source;
    const challenges = parseChallenges(r.headers.all('www-authenticate'));
    const stale = challenges.some((c) => c.scheme === 'digest' && /^true$/i.test(c.params.stale ?? ''));
    if (src.user === undefined) throw new SourceError('auth', `it needs credentials (401 to ${method}) and none were given`);
    if (this.auth && !stale) throw new SourceError('auth', `401 to ${method} with ${this.auth.scheme === 'digest' ? 'Digest' : 'Basic'} authentication`);
    const chosen = Authenticator.choose(challenges);
    if (!chosen) throw new SourceError('auth', `401 to ${method} with no Basic or Digest challenge we can answer`);
    this.auth = new Authenticator(chosen, src.user, src.pwd ?? '');
    r = await this.send(method, url, extra);
    if (r.status === 401) throw new SourceError('auth', `401 to ${method} with ${this.auth.scheme === 'digest' ? 'Digest' : 'Basic'} authentication`);
    return r;
  }

  expectOk(r: RtspResponse, method: string): void {
    if (r.status >= 200 && r.status < 300) return;
    throw new SourceError('status', `${r.status} ${redactText(r.reason, [this.o.source.pwd])} to ${method}`);
  }

  /** a response from the server: settles the request it answers */
  onResponse(m: RtspResponse): void {
    const cseq = Number(m.headers.get('cseq'));
    let key = Number.isInteger(cseq) && this.pending.has(cseq) ? cseq : undefined;
    // a server that leaves CSeq out answers in order
    if (key === undefined && m.headers.get('cseq') === undefined) key = this.pending.keys().next().value;
    if (key === undefined) return;
    const p = this.pending.get(key)!;
    this.pending.delete(key);
    p.cancel();
    p.resolve(m);
  }

  /** every request still waiting fails with err */
  failAll(err: SourceError): void {
    for (const p of this.pending.values()) {
      p.cancel();
      p.reject(err);
    }
    this.pending.clear();
  }

  /** the text of a request expecting no answer (the TEARDOWN sent as the connection ends) */
  lastWords(method: string, url: string): string {
    return this.text(method, url, ++this.cseq, {});
  }

  private send(method: string, url: string, extra: Record<string, string>): Promise<RtspResponse> {
    const unusable = this.o.unusable();
    if (unusable) return Promise.reject(unusable);
    const cseq = ++this.cseq;
    return new Promise<RtspResponse>((resolve, reject) => {
      const cancel = this.o.clock.setTimeout(() => {
        this.pending.delete(cseq);
        reject(new SourceError('timeout', `no answer to ${method} within ${Math.round(this.o.requestTimeoutMs / 1000)} s`));
      }, this.o.requestTimeoutMs);
      this.pending.set(cseq, { resolve, reject, cancel });
      this.o.write(this.text(method, url, cseq, extra));
    });
  }

  private text(method: string, url: string, cseq: number, extra: Record<string, string>): string {
    const lines = [`${method} ${url} RTSP/1.0`, `CSeq: ${cseq}`, `User-Agent: ${USER_AGENT}`];
    // on every request once there is a session: servers such as live555 count only requests that name it as the
    // client's liveness, keep-alive OPTIONS included
    if (this.sessionId) lines.push(`Session: ${this.sessionId}`);
    if (this.auth) lines.push(`Authorization: ${this.auth.header(method, url)}`);
    for (const [k, v] of Object.entries(extra)) lines.push(`${k}: ${v}`);
    return lines.join('\r\n') + '\r\n\r\n';
  }
}
