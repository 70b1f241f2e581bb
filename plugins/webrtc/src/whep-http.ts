/**
 * The HTTP side of WHEP: CORS for pages of any origin, plain-text refusals, the offer's body read within its limit,
 * the STUN and TURN servers as Link headers, and the peer as servePlays' player socket (accepting writes the answer).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PlayerSocket } from '../../../plugin-sdk';
import type { WebrtcConfig } from './config';
import type { Peer } from './peer';
import { Refusal } from './session-plan';

export const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'POST, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization, If-Match',
  'Access-Control-Expose-Headers': 'Location, Link, ETag',
};

/**
 * The peer as servePlays' player socket: accepting writes the 201 with the answer; the bus holds the player's
 * media until the tracks are open (DTLS done) and then gives it from a key frame; the library copies each packet
 * before send returns, so no payload is held here.
 */
export function peerSocket(res: ServerResponse, remote: string, peer: Peer, answer: string, headers: Record<string, string>): PlayerSocket {
  let drain: (() => void) | undefined;
  peer.onOpen(() => drain?.());
  return {
    remote,
    accept() {
      res.writeHead(201, { ...CORS, ...headers, 'Content-Type': 'application/sdp', 'Cache-Control': 'no-store' });
      res.end(answer);
    },
    refuse(status, reason) {
      text(res, status, reason);
      peer.close(`refused: ${reason}`);
    },
    send: () => undefined,
    writable: () => peer.open,
    holdsPayloads: () => false,
    onDrain(cb) {
      drain = cb;
    },
    onClose(cb) {
      peer.onClosed(() => cb());
    },
    end(reason) {
      peer.close(reason);
    },
    destroy() {
      peer.close('dropped');
    },
  };
}

/** RFC 9725 4.4: the STUN and TURN servers a client should use, one Link each (RFC 8288 quoted strings) */
export function iceServerLinks(c: Pick<WebrtcConfig, 'iceServers'>): Record<string, string> {
  if (c.iceServers.length === 0) return {};
  const q = (v: string) => `"${v.replace(/["\\\r\n]/g, '')}"`;
  const links = c.iceServers.map((s) => {
    let l = `<${s.urls.replace(/[<>\s]/g, '')}>; rel="ice-server"`;
    if (s.username !== undefined) l += `; username=${q(s.username)}; credential=${q(s.credential ?? '')}; credential-type="password"`;
    return l;
  });
  return { Link: links.join(', ') };
}

export function text(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { ...CORS, ...headers, 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body + '\n');
}

export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let n = 0;
    req.on('data', (d: Buffer) => {
      n += d.length;
      if (n > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new Refusal(413, `the offer is over ${limit} bytes`, 'size'));
      } else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}
