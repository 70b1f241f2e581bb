/**
 * The API's replies: the JSON envelope of decisions.md ({errCode, message, data, count}) with the headers every reply
 * carries, and the reply for an error thrown by a route: a GatewayError says its own status and code, anything else
 * is a 500 that is logged and never shows a stack trace.
 */
import type * as http from 'node:http';
import type { Logger } from 'pino';
import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import { LoginThrottled } from './credential-check';
import { BodyTooLarge } from './json-body';

/** headers every reply of an API server carries */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  // a reply is what its Content-Type says: no browser may sniff a JSON error or a record file into HTML or script
  'X-Content-Type-Options': 'nosniff',
};

export function sendJson(res: http.ServerResponse, status: number, body: unknown, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    ...SECURITY_HEADERS,
    ...extraHeaders,
  });
  res.end(text);
}

export function envelope(errCode: number, message: string, data?: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = { errCode, message };
  if (data !== undefined) {
    out.data = data;
    out.count = data.length;
  }
  return out;
}

/** The reply to a request whose handling threw `err`. */
export function sendFailure(res: http.ServerResponse, err: unknown, req: http.IncomingMessage, remote: string, bodyLimit: number, log: Logger): void {
  if (err instanceof BodyTooLarge) {
    log.warn({ remote, path: req.url?.split('?')[0] }, 'request body over the limit');
    sendJson(res, 413, envelope(ErrCode.BAD_REQUEST, `Body larger than ${bodyLimit} bytes.`), { Connection: 'close' });
    // stop reading the rest of the body once the reply is out
    res.once('finish', () => req.destroy());
    return;
  }
  if (err instanceof GatewayError) {
    const headers: Record<string, string> = err.httpStatus === 401 ? { 'WWW-Authenticate': 'Basic realm="jt1078-gateway", charset="UTF-8"' } : {};
    if (err instanceof LoginThrottled) headers['Retry-After'] = String(err.retryAfterSec);
    sendJson(res, err.httpStatus, envelope(err.errCode, err.message), headers);
    return;
  }
  log.error({ err, method: req.method, path: req.url?.split('?')[0] }, 'request failed with an unexpected error');
  sendJson(res, 500, envelope(ErrCode.INTERNAL_ERROR, 'Internal error.'));
}
