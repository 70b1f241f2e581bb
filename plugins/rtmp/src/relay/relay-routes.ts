/**
 * `POST /strm/relay {reqId, url}` starts pushing an open request's stream to an RTMP(S) server; a second identical
 * call answers the relay that exists. `POST /strm/relay/stop {reqId, url?, relayId?}` stops the request's relay to
 * url (or with relayId), or all its relays; like /strm/close, an unknown request is no error (`data: []`).
 * Another application's reqId answers exactly as an unknown one (decisions.md).
 */
import { isIP } from 'node:net';
import { invalidParam, type Application, type Routes, type Sessions, type StrmRequest } from '../../../../plugin-sdk';
import type { Relay } from './relay';
import type { RelayRegistry } from './relay-registry';
import { refusal, type HostRule } from './relay-hosts';
import { parseRelayUrl } from './relay-url';

/** decisions.md's reqId rule */
export const REQ_ID = /^[A-Za-z0-9_\-$.~]{8,40}$/;
export const RELAY_ID = /^[A-Za-z0-9_-]{12}$/;
export const REQ_ID_DETAIL = 'Give the reqId of an open request of this application.';

function ownRequest(sessions: Sessions, app: Application, v: unknown): StrmRequest {
  const r = typeof v === 'string' && REQ_ID.test(v) ? sessions.getRequest(v) : undefined;
  if (!r || r.closed || r.appId !== app.appId) throw invalidParam('reqId', REQ_ID_DETAIL);
  return r;
}

function answer(r: Relay): Record<string, unknown> {
  return { reqId: r.reqId, ...r.view };
}

/** with workers, a relay call is answered by the worker that holds its request (where the relay reads the stream) */
const reqIdOf = (body: Record<string, unknown>): string | undefined => (typeof body.reqId === 'string' ? body.reqId : undefined);

export function relayRoutes(routes: Routes, sessions: Sessions, registry: RelayRegistry, hosts: HostRule): void {
  routes.post(
    '/strm/relay',
    (req) => {
      const body = req.body ?? {};
      const r = ownRequest(sessions, req.app!, body.reqId);
      const target = parseRelayUrl(body.url);
      // an address is judged now; a name at each connect (what it resolves to may change), shown in the relay's error
      const why = isIP(target.host) ? refusal(target.host, hosts) : undefined;
      if (why) throw invalidParam('url', `The host is ${why}.`);
      return { data: [answer(registry.add(r, target))] };
    },
    { auth: 'api', reqIdOf },
  );

  routes.post(
    '/strm/relay/stop',
    (req) => {
      const body = req.body ?? {};
      if (typeof body.reqId !== 'string' || !REQ_ID.test(body.reqId)) throw invalidParam('reqId', REQ_ID_DETAIL);
      const canonical = body.url === undefined || body.url === null ? undefined : parseRelayUrl(body.url).canonical;
      const relayId = body.relayId === undefined || body.relayId === null ? undefined : body.relayId;
      if (relayId !== undefined && (typeof relayId !== 'string' || !RELAY_ID.test(relayId)))
        throw invalidParam('relayId', 'The relayId POST /strm/relay answered.');
      const r = sessions.getRequest(body.reqId);
      if (!r || r.appId !== req.app!.appId) return { data: [] };
      const stopped = registry.stop(r.reqId, { canonical, relayId }, 'stopped by the API');
      return { data: stopped.map((x) => ({ reqId: x.reqId, relayId: x.id, url: x.view.url, stopped: true })) };
    },
    { auth: 'api', reqIdOf },
  );
}
