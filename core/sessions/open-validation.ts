import { parseCallbackUrl } from '../../plugin-sdk/callback-url';
import { invalidParam } from '../../plugin-sdk/errors';
import type { FieldRule } from '../../plugin-sdk/api-docs';
import { DATA_TYP_BY_TYP, OPEN_CROSS_RULES, OPEN_FIELDS as F, SCHEMES_BY_FMT } from './open-fields';
import type { OpenParams, StreamTyp } from '../../plugin-sdk/sessions';
import { normaliseSim } from '../../plugin-sdk/sim';

// The field rules (limits, enums, patterns, the -7 details) are data in core/sessions/open-fields.ts, which the
// OpenAPI document is generated from too; this module applies them in decisions.md's order.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export interface ValidationEnv {
  /** who holds a live request of this id: the caller's application ('self'), another ('other'), or nobody */
  reqIdHolder(reqId: string): 'self' | 'other' | undefined;
  hasIngestFor(source: 'terminal' | 'rtsp'): boolean;
  outputSchemes(fmt: number): string[] | undefined;
  keepIntvDefault: number;
  newReqId(): string;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

/**
 * A string that ends up in a URL, a header or a log line: well-formed Unicode (a lone surrogate throws in
 * encodeURIComponent) and at most `max` characters.
 */
function okString(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length <= max && !LONE_SURROGATE.test(v);
}
const isObj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

function optBool(body: Record<string, unknown>, key: string, rule: FieldRule): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidParam(key, rule.detail);
  return v;
}

/** a number the rule accepts: in its enum, or within its minimum and maximum */
function intAllowed(rule: FieldRule, n: number): boolean {
  if (rule.enum) return rule.enum.includes(n);
  return (rule.minimum === undefined || n >= rule.minimum) && (rule.maximum === undefined || n <= rule.maximum);
}

function optInt(
  body: Record<string, unknown>,
  key: string,
  rule: FieldRule,
  dflt: number,
  ok = (n: number) => intAllowed(rule, n),
  detail = rule.detail,
): number {
  const v = body[key];
  if (v === undefined || v === null) return dflt;
  if (!isInt(v) || !ok(v)) throw invalidParam(key, detail);
  return v;
}

/**
 * The open request rules of decisions.md, in their order; the first bad field is thrown as -7.
 * Fields the rules do not list (cb, connIdx, booleans, ...) are checked after them.
 */
export function validateOpen(body: Record<string, unknown>, env: ValidationEnv): OpenParams {
  // 1. reqId
  let reqId: string;
  if (body.reqId !== undefined && body.reqId !== null) {
    if (typeof body.reqId !== 'string' || !F.reqId.pattern.test(body.reqId)) throw invalidParam('reqId', F.reqId.detail);
    const holder = env.reqIdHolder(body.reqId);
    // another application's reqId answers like any invalid one: "in use" would confirm that it exists
    if (holder === 'other') throw invalidParam('reqId');
    if (holder === 'self') throw invalidParam('reqId', 'It is in use.');
    reqId = body.reqId;
  } else {
    reqId = env.newReqId();
  }
  // 2. user.token
  const user = body.user;
  const U = F.user.properties;
  if (!isObj(user) || typeof user.token !== 'string' || user.token.length < U.token.minLength) throw invalidParam('user.token');
  if (!okString(user.token, U.token.maxLength)) throw invalidParam('user.token', U.token.detail);
  if (user.userId !== undefined && user.userId !== null && !okString(user.userId, U.userId.maxLength)) {
    throw invalidParam('user.userId', U.userId.detail);
  }
  if (user.userGrade !== undefined && user.userGrade !== null && !isInt(user.userGrade)) throw invalidParam('user.userGrade');
  // 3. typ
  if (!F.typ.enum.includes(body.typ as StreamTyp)) throw invalidParam('typ', F.typ.detail);
  const typ = body.typ as StreamTyp;
  const rtspGiven = body.rtspSrc !== undefined && body.rtspSrc !== null;
  // An RTSP source is vetted at rule 10, where decisions.md puts rtspSrc: checking the site for it here would
  // report rtspSrc ahead of a bad simNo, chanId, ... that the client also has to fix.
  if (!rtspGiven && !env.hasIngestFor('terminal')) throw invalidParam('typ', 'No ingest plugin on this site serves it.');
  // 4. simNo
  if (typeof body.simNo !== 'string' || !F.simNo.pattern.test(body.simNo)) throw invalidParam('simNo');
  const simNo = body.simNo;
  // 5. chanId (channelId alias)
  const chanRaw = body.chanId !== undefined && body.chanId !== null ? body.chanId : body.channelId;
  if (!isInt(chanRaw) || !intAllowed(F.chanId, chanRaw))
    throw invalidParam(body.chanId === undefined && body.channelId !== undefined ? 'channelId' : 'chanId', F.chanId.detail);
  // 6. dataTyp
  const dt = DATA_TYP_BY_TYP[typ];
  const known = (n: number) => (dt.values as readonly number[]).includes(n) || (dt.unsupported as readonly number[]).includes(n);
  const dataTyp = optInt(body, 'dataTyp', F.dataTyp, F.dataTyp.default, known, dt.detail);
  if ((dt.unsupported as readonly number[]).includes(dataTyp)) throw invalidParam('dataTyp', dt.unsupportedDetail);
  // 7. codeStrm, fmt, subFmt
  const codeStrm = optInt(body, 'codeStrm', F.codeStrm, F.codeStrm.default);
  const fmt = optInt(body, 'fmt', F.fmt, F.fmt.default);
  const schemes = env.outputSchemes(fmt);
  if (!schemes) throw invalidParam('fmt', 'This site runs no output plugin for it.');
  let subFmt: string | undefined;
  if (body.subFmt !== undefined && body.subFmt !== null) {
    if (fmt !== OPEN_CROSS_RULES.subFmtFmt || !F.subFmt.enum.includes(body.subFmt as 'fmp4')) throw invalidParam('subFmt', F.subFmt.detail);
    subFmt = body.subFmt as string;
  } else if (fmt === OPEN_CROSS_RULES.subFmtFmt) {
    subFmt = F.subFmt.enum[0];
  }
  // 8. scheme
  let scheme: string | undefined;
  if (body.scheme !== undefined && body.scheme !== null) {
    const s = body.scheme;
    const allowed = SCHEMES_BY_FMT[fmt];
    // http for HLS is not in the spec's list, but an HLS output without TLS can only serve http
    if (typeof s !== 'string' || !allowed.includes(s) || (fmt === 1 && s === 'http' && schemes.includes('https'))) throw invalidParam('scheme');
    if (!schemes.includes(s)) throw invalidParam('scheme', `This site serves ${schemes.join(', ')} for this fmt.`);
    scheme = s;
  }
  // 9. audioCfg
  let audioCfg: OpenParams['audioCfg'];
  if (body.audioCfg !== undefined && body.audioCfg !== null) {
    const a = body.audioCfg;
    const A = F.audioCfg.properties;
    if (!isObj(a) || !isInt(a.sampleRate) || !intAllowed(A.sampleRate, a.sampleRate)) throw invalidParam('audioCfg.sampleRate');
    if (!isInt(a.channels) || !intAllowed(A.channels, a.channels)) throw invalidParam('audioCfg.channels');
    audioCfg = { sampleRate: a.sampleRate, channels: a.channels };
  }
  // 10. rtspSrc.url
  let rtspSrc: OpenParams['rtspSrc'];
  if (rtspGiven) {
    if (!env.hasIngestFor('rtsp')) throw invalidParam('rtspSrc', 'No ingest plugin on this site serves it.');
    const r = body.rtspSrc;
    const S = F.rtspSrc.properties;
    if (!isObj(r) || !okString(r.url, S.url.maxLength) || !S.url.pattern.test(r.url)) throw invalidParam('rtspSrc.url');
    try {
      new URL(r.url);
    } catch {
      throw invalidParam('rtspSrc.url');
    }
    if (r.user !== undefined && !okString(r.user, S.user.maxLength)) throw invalidParam('rtspSrc.user');
    if (r.pwd !== undefined && !okString(r.pwd, S.pwd.maxLength)) throw invalidParam('rtspSrc.pwd');
    const transport = r.transport ?? undefined;
    if (transport !== undefined && !(S.transport.enum as readonly unknown[]).includes(transport)) throw invalidParam('rtspSrc.transport', S.transport.detail);
    rtspSrc = { url: r.url, user: r.user as string | undefined, pwd: r.pwd as string | undefined };
    if (transport !== undefined) rtspSrc.transport = transport as NonNullable<typeof rtspSrc.transport>;
  }
  // 11. keepIntv, record
  const keepIntv = optInt(body, 'keepIntv', F.keepIntv, env.keepIntvDefault);
  const record = optBool(body, 'record', F.record);
  if (record && fmt !== OPEN_CROSS_RULES.recordFmt) throw invalidParam('record', OPEN_CROSS_RULES.recordDetail);
  // Fields the ordered rules leave out.
  let cb: string | undefined;
  if (body.cb !== undefined && body.cb !== null) {
    // the WHATWG parser would quietly turn a lone surrogate into U+FFFD: a different address than the one given
    if (typeof body.cb === 'string' && LONE_SURROGATE.test(body.cb)) throw invalidParam('cb', 'It is not valid Unicode.');
    // The notifier's own parser: a cb it would refuse must fail the open, not every notice later, silently.
    const parsed = parseCallbackUrl(body.cb);
    // the reasons never quote the cb, which may carry credentials
    if (!parsed.ok) throw invalidParam('cb', `${parsed.reason.replace(/^cb /, 'The cb ')}.`);
    cb = body.cb as string;
  }
  const connIdx = optInt(body, 'connIdx', F.connIdx, F.connIdx.default);
  let talkSendProtoVer: number | undefined;
  if (body.talkSendProtoVer !== undefined && body.talkSendProtoVer !== null) {
    if (!isInt(body.talkSendProtoVer) || !intAllowed(F.talkSendProtoVer, body.talkSendProtoVer))
      throw invalidParam('talkSendProtoVer', F.talkSendProtoVer.detail);
    talkSendProtoVer = body.talkSendProtoVer;
  }
  const exclusive = optBool(body, 'exclusive', F.exclusive);
  const detectMediaTyp = optBool(body, 'detectMediaTyp', F.detectMediaTyp);
  let http: boolean | undefined;
  if (body.http !== undefined && body.http !== null) http = optBool(body, 'http', F.http);
  let timedToken: string | undefined;
  if (body.timedToken !== undefined && body.timedToken !== null) {
    // one or two comma-separated tokens
    if (!okString(body.timedToken, F.timedToken.maxLength)) throw invalidParam('timedToken');
    timedToken = body.timedToken;
  }
  if (!scheme) scheme = defaultScheme(fmt, schemes);
  return {
    reqId,
    cb,
    user: { token: user.token, userId: user.userId as string | undefined, userGrade: user.userGrade as number | undefined },
    typ,
    simNo,
    normSim: normaliseSim(simNo),
    chanId: chanRaw,
    dataTyp,
    codeStrm,
    fmt,
    subFmt,
    scheme,
    connIdx,
    talkSendProtoVer,
    exclusive,
    record,
    detectMediaTyp,
    keepIntv,
    audioCfg,
    rtspSrc,
    http,
    timedToken,
  };
}

/**
 * The spec's defaults are wss (fmt 0), https (fmt 1), rtsp (fmt 4); a site whose output serves no TLS
 * falls back to the plain scheme it does serve, so the returned URL works.
 */
function defaultScheme(fmt: number, schemes: string[]): string {
  const wanted = fmt === 0 ? ['wss', 'ws', 'https', 'http'] : fmt === 1 ? ['https', 'http'] : ['rtsp', 'rtsps'];
  return wanted.find((s) => schemes.includes(s)) ?? schemes[0];
}

export function mediaTypOf(typ: StreamTyp, dataTyp: number): 'av' | 'a' | 'v' {
  if (typ === 'live') return dataTyp === 0 ? 'av' : dataTyp === 1 ? 'v' : 'a';
  return dataTyp === 0 ? 'av' : dataTyp === 1 ? 'a' : 'v';
}
