/**
 * The `via` of a play URL: `…?reqId=..&token=..&via={stage}` asks for a stage's form of the stream (key frames only,
 * say) for that play. Every output reads the stream through it, then through its own forms (audio as AAC): the
 * chain `[via, own]`. A name no stage on the gateway has is refused (HTTP and RTSP 400, WebSocket close 4400) after
 * the play's token is checked, with the reason and a log line.
 */
import type { MediaBus, StageRef, Via } from './bus';

/** the query parameter */
export const VIA_PARAM = 'via';

/** stage names as the bus registers them */
const STAGE_NAME = /^[a-z][a-z0-9-]{0,39}$/;

/** What a play URL's `via` asks for: nothing, a stage registered on this gateway, or a refusal with its reason. */
export type PlayVia = { ok: true; via: string | undefined } | { ok: false; reason: string };

/** The stage a play URL's query names (`via`), checked against the stages registered on this gateway. */
export function playVia(query: URLSearchParams, bus: Pick<MediaBus, 'stages'>): PlayVia {
  const all = query.getAll(VIA_PARAM);
  if (all.length === 0 || (all.length === 1 && all[0] === '')) return { ok: true, via: undefined };
  if (all.length > 1) return { ok: false, reason: 'via: give one stage' };
  const name = all[0];
  // (only a well-formed name is echoed back)
  if (!STAGE_NAME.test(name)) return { ok: false, reason: 'via: not a stage name (lower-case letters, digits and dashes)' };
  const known = bus.stages();
  if (!known.includes(name)) {
    return { ok: false, reason: `via: no stage '${name}' on this gateway (${known.length ? `stages: ${known.join(', ')}` : 'none registered'})` };
  }
  return { ok: true, via: name };
}

/** `first`, then `then`: what `subscribe` reads through when a play asks for a stage and the output has its own. */
export function chainVia(first: string | StageRef | undefined, then: Via | undefined): Via | undefined {
  if (first === undefined) return then;
  if (then === undefined) return first;
  return typeof then === 'string' || !Array.isArray(then) ? [first, then as string | StageRef] : [first, ...(then as ReadonlyArray<string | StageRef>)];
}

/** The query of a play URL: reqId, token and, when given, via. */
export function playQuery(reqId: string, token: string, via?: string): string {
  return `reqId=${encodeURIComponent(reqId)}&token=${encodeURIComponent(token)}${via ? `&${VIA_PARAM}=${encodeURIComponent(via)}` : ''}`;
}
