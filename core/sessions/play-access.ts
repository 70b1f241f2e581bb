import { hash, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { PlayerHandle, PlayerInfo, StrmRequest } from '../../plugin-sdk/sessions';
import type { RequestState, StreamState } from './session-state';

// one-shot hash (no Hash object): every HLS part and playlist fetch checks its token
const tokenDigest = (s: string): Buffer => hash('sha256', s, 'buffer');
/** the request's own token digest, made once: a request's token never changes */
const requestDigests = new WeakMap<StrmRequest, Buffer>();
const NO_REQUEST_DIGEST = tokenDigest('');

/**
 * whether `token` is the request's own, compared as digests so the time taken depends neither on how much of it
 * matched nor on whether the request exists
 */
export function tokenMatches(r: StrmRequest | undefined, token: string): boolean {
  let own = NO_REQUEST_DIGEST;
  if (r) {
    const kept = requestDigests.get(r);
    if (kept) own = kept;
    else requestDigests.set(r, (own = tokenDigest(r.params.user.token)));
  }
  return timingSafeEqual(own, tokenDigest(token));
}

/** counts a player on an open request (which makes it consumed) and gives the player its handle */
export function attachPlayerTo(r: RequestState, stream: StreamState | undefined, info: PlayerInfo, log: Logger): PlayerHandle {
  r.players++;
  r.consumed = true;
  let open = true;
  log.debug({ reqId: r.reqId, stream: r.streamName, protocol: info.protocol, remote: info.remote }, 'player attached');
  return {
    sent: (n: number) => {
      if (stream) stream.bytesOut += n;
    },
    close: () => {
      if (!open) return;
      open = false;
      if (r.players > 0) r.players--;
    },
  };
}
