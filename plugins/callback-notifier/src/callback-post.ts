/**
 * One delivery attempt: a POST of a notice to `<cb>/strm_notif`, and what its outcome means for the notice (README
 * "Delivery semantics"). The dispatcher (delivery.ts) decides what follows: when to retry, when to give up.
 *
 * - The host policy is checked at each attempt, after name resolution, and the connection goes to exactly the
 *   addresses that were checked (pinnedLookup): no second lookup a rebinding DNS server could answer differently.
 * - Redirects are not followed: they would take the credentials, and the notice, somewhere the policy never vetted.
 * - 2xx is delivered. 429, 5xx and network errors (timeouts and DNS failures included) are worth a retry; other
 *   answers, host-policy refusals and refused TLS certificates are final (waiting does not change them).
 * - The poster has its own agents, so stop() closes every pooled socket instead of leaving them to the process-wide
 *   agents; an attempt in flight at stop is aborted, and one still resolving its host is let go at once.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { ParsedCallback } from './callback-url';
import { got, type RequestError } from './got';
import { pinnedLookup, type HostPolicy } from './host-policy';
import { parseRetryAfter } from './retry-timing';
import type { StopSignal } from './stop-signal';
import { isCertificateRefusal, trustedCertificates } from './trust-store';

export type AttemptOutcome =
  { kind: 'delivered'; status: number } | { kind: 'retry'; reason: string; retryAfterMs?: number } | { kind: 'fail'; reason: string } | { kind: 'cancelled' };

export interface CallbackPosterOptions {
  policy: HostPolicy;
  /** one POST, connect to last byte of the answer */
  attemptTimeoutMs: number;
  userAgent: string;
  /** pooled sockets per host and scheme: the dispatcher's sending slots per host */
  concurrency: number;
  /** undefined: trustedCertificates() */
  trustedCa: string[] | undefined;
}

export class CallbackPoster {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  private readonly inflight = new Set<AbortController>();

  constructor(
    private readonly o: CallbackPosterOptions,
    private readonly stopSignal: StopSignal,
  ) {
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: o.concurrency, ca: o.trustedCa ?? trustedCertificates() });
  }

  /** One attempt; never rejects. */
  async post(cb: ParsedCallback, body: string): Promise<AttemptOutcome> {
    try {
      return await this.attempt(cb, body);
    } catch (err) {
      // attempt() handles the expected failures; anything else is a bug, reported without the error object
      // (it could hold request options, headers included).
      return { kind: 'fail', reason: `internal error: ${(err as Error).message}` };
    }
  }

  /** Aborts the attempts in flight (they end 'cancelled'). */
  abortAll(): void {
    for (const c of this.inflight) c.abort();
  }

  /** Closes the pooled connections. */
  destroy(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private async attempt(cb: ParsedCallback, body: string): Promise<AttemptOutcome> {
    // A slow resolver must not hold up stop().
    const verdict = await this.stopSignal.race(this.o.policy.vet(cb.hostname));
    if (verdict === 'stopped' || this.stopSignal.stopped) return { kind: 'cancelled' };
    if (!verdict.ok) return verdict.retryable ? { kind: 'retry', reason: verdict.reason } : { kind: 'fail', reason: verdict.reason };
    const controller = new AbortController();
    this.inflight.add(controller);
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': this.o.userAgent };
      if (cb.authorization) headers.authorization = cb.authorization;
      const res = await got.post(cb.target, {
        body,
        headers,
        timeout: { request: this.o.attemptTimeoutMs },
        retry: { limit: 0 },
        throwHttpErrors: false,
        // A redirect would take the credentials, and the request, somewhere the host policy never vetted.
        followRedirect: false,
        signal: controller.signal,
        dnsLookup: pinnedLookup(verdict.addresses),
        agent: { http: this.httpAgent, https: this.httpsAgent },
      });
      const status = res.statusCode;
      if (status >= 200 && status < 300) return { kind: 'delivered', status };
      if (status === 429 || status >= 500) {
        return { kind: 'retry', reason: `HTTP ${status}`, retryAfterMs: parseRetryAfter(res.headers['retry-after'], Date.now()) };
      }
      return { kind: 'fail', reason: `HTTP ${status}` };
    } catch (err) {
      if (controller.signal.aborted) return { kind: 'cancelled' };
      const e = err as RequestError;
      if (isCertificateRefusal(e.code)) {
        return {
          kind: 'fail',
          reason: `TLS certificate refused (${e.code}: ${e.message}); if the server's CA is a private one, trust it with the plugin's caFiles`,
        };
      }
      return { kind: 'retry', reason: e.code ? `${e.code}: ${e.message}` : e.message };
    } finally {
      this.inflight.delete(controller);
    }
  }
}
