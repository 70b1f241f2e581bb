/**
 * The token check of HLS fetches, once per connection. A reader fetches about seven times a second (playlist
 * reloads and parts), every fetch names its request and token, and checking the token costs two SHA-256 digests
 * and a constant-time compare: 4 % of the gateway's CPU at 300 LL-HLS readers (issue 47).
 *
 * A connection that proved a play (request, token, stream) keeps that verdict: its next fetch naming the very same
 * three skips the digests. The request is still looked up on every fetch, so a closed request (or a reqId reused by
 * another open) is refused at once, as before. The cached token is compared with `===` only against what the same
 * connection sent earlier and proved, so its timing tells a client nothing it did not already know; any other
 * connection, and any other token on this one, goes through the full check.
 */
import type { Socket } from 'node:net';
import type { Sessions, StrmRequest } from '../../../plugin-sdk';

interface Proven {
  reqId: string;
  token: string;
  stream: string;
  request: StrmRequest;
}

export class PlayVerdicts {
  /** keyed by the connection: it goes with the socket, nothing to clean up */
  private readonly proven = new WeakMap<Socket, Proven>();
  constructor(
    private readonly sessions: Pick<Sessions, 'authorizePlay' | 'getRequest'>,
    /** a fetch authorised by its connection's verdict */
    private readonly onHit: () => void = () => undefined,
  ) {}

  authorize(conn: Socket, stream: string, reqId: string, token: string): StrmRequest | undefined {
    const p = this.proven.get(conn);
    if (p !== undefined && p.reqId === reqId && p.stream === stream && p.token === token) {
      const r = this.sessions.getRequest(reqId);
      if (r === p.request && !r.closed) {
        this.onHit();
        return r;
      }
    }
    const r = this.sessions.authorizePlay(stream, reqId, token);
    if (r) this.proven.set(conn, { reqId, token, stream, request: r });
    else this.proven.delete(conn);
    return r;
  }
}
