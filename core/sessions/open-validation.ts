import { parseCallbackUrl } from '../../plugin-sdk/callback-url';
import { invalidParam, GatewayError } from '../../plugin-sdk/errors';
import type { OpenParams, StreamTyp } from '../../plugin-sdk/sessions';
import { normaliseSim, SIM_PATTERN } from '../../plugin-sdk/sim';

const REQ_ID_RE = /^[A-Za-z0-9_\-$.~]{8,40}$/;
/**
 * user.token goes into every play URL (and a player's query string, which proxies cap at a few KiB); a JWT or an
 * opaque session id fits with room to spare.
 */
export const MAX_TOKEN_LENGTH = 1024;
/** userId is only for logs and debugging */
export const MAX_USER_ID_LENGTH = 256;
const MAX_RTSP_URL_LENGTH = 2048;
const MAX_RTSP_CRED_LENGTH = 256;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const SAMPLE_RATES = new Set([8000, 11025, 22050, 44100, 48000, 64000, 96000]);
const CHANNEL_COUNTS = new Set([1, 2, 3, 4, 5, 6, 8]);

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

function optBool(body: Record<string, unknown>, key: string): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidParam(key, 'Must be true or false.');
  return v;
}

function optInt(body: Record<string, unknown>, key: string, dflt: number, ok: (n: number) => boolean, detail: string): number {
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
    if (typeof body.reqId !== 'string' || !REQ_ID_RE.test(body.reqId)) throw invalidParam('reqId', 'Use 8 to 40 letters, digits or _ - $ . ~');
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
  if (!isObj(user) || typeof user.token !== 'string' || user.token.length === 0) throw invalidParam('user.token');
  if (!okString(user.token, MAX_TOKEN_LENGTH)) throw invalidParam('user.token', `Use at most ${MAX_TOKEN_LENGTH} characters of valid Unicode.`);
  if (user.userId !== undefined && user.userId !== null && !okString(user.userId, MAX_USER_ID_LENGTH)) {
    throw invalidParam('user.userId', `Use a string of at most ${MAX_USER_ID_LENGTH} characters of valid Unicode.`);
  }
  if (user.userGrade !== undefined && user.userGrade !== null && !isInt(user.userGrade)) throw invalidParam('user.userGrade');
  // 3. typ
  if (body.typ !== 'live' && body.typ !== 'replay') throw invalidParam('typ', 'Use live or replay.');
  const typ = body.typ as StreamTyp;
  const rtspGiven = body.rtspSrc !== undefined && body.rtspSrc !== null;
  // An RTSP source is vetted at rule 10, where decisions.md puts rtspSrc: checking the site for it here would
  // report rtspSrc ahead of a bad simNo, chanId, ... that the client also has to fix.
  if (!rtspGiven && !env.hasIngestFor('terminal')) throw invalidParam('typ', 'No ingest plugin on this site serves it.');
  // 4. simNo
  if (typeof body.simNo !== 'string' || !SIM_PATTERN.test(body.simNo)) throw invalidParam('simNo');
  const simNo = body.simNo;
  // 5. chanId (channelId alias)
  const chanRaw = body.chanId !== undefined && body.chanId !== null ? body.chanId : body.channelId;
  if (!isInt(chanRaw) || chanRaw < 1 || chanRaw > 255) throw invalidParam(body.chanId === undefined && body.channelId !== undefined ? 'channelId' : 'chanId', 'Use an integer 1..255.');
  // 6. dataTyp
  const dataTyp = optInt(body, 'dataTyp', 0, (n) => n >= 0 && n <= (typ === 'live' ? 5 : 2), typ === 'live' ? 'Use 0..3.' : 'Use 0..2.');
  if (typ === 'live' && (dataTyp === 4 || dataTyp === 5)) throw invalidParam('dataTyp', 'Center broadcast (4) and pass-through (5) are unsupported.');
  // 7. codeStrm, fmt, subFmt
  const codeStrm = optInt(body, 'codeStrm', 0, (n) => n === 0 || n === 1, 'Use 0 or 1.');
  const fmt = optInt(body, 'fmt', 0, (n) => n === 0 || n === 1 || n === 4, 'Use 0 (FLV), 1 (HLS) or 4 (RTSP).');
  const schemes = env.outputSchemes(fmt);
  if (!schemes) throw invalidParam('fmt', 'This site runs no output plugin for it.');
  let subFmt: string | undefined;
  if (body.subFmt !== undefined && body.subFmt !== null) {
    if (fmt !== 1 || (body.subFmt !== 'fmp4' && body.subFmt !== 'mpegts')) throw invalidParam('subFmt', 'Only with fmt 1: fmp4 or mpegts.');
    subFmt = body.subFmt;
  } else if (fmt === 1) {
    subFmt = 'fmp4';
  }
  // 8. scheme
  let scheme: string | undefined;
  if (body.scheme !== undefined && body.scheme !== null) {
    const s = body.scheme;
    const allowed = fmt === 0 ? ['http', 'https', 'ws', 'wss'] : fmt === 1 ? ['https', 'http'] : ['rtsp'];
    // http for HLS is not in the spec's list, but an HLS output without TLS can only serve http
    if (typeof s !== 'string' || !allowed.includes(s) || (fmt === 1 && s === 'http' && schemes.includes('https'))) throw invalidParam('scheme');
    if (!schemes.includes(s)) throw invalidParam('scheme', `This site serves ${schemes.join(', ')} for this fmt.`);
    scheme = s;
  }
  // 9. audioCfg
  let audioCfg: OpenParams['audioCfg'];
  if (body.audioCfg !== undefined && body.audioCfg !== null) {
    const a = body.audioCfg;
    if (!isObj(a) || !isInt(a.sampleRate) || !SAMPLE_RATES.has(a.sampleRate)) throw invalidParam('audioCfg.sampleRate');
    if (!isInt(a.channels) || !CHANNEL_COUNTS.has(a.channels)) throw invalidParam('audioCfg.channels');
    audioCfg = { sampleRate: a.sampleRate, channels: a.channels };
  }
  // 10. rtspSrc.url
  let rtspSrc: OpenParams['rtspSrc'];
  if (rtspGiven) {
    if (!env.hasIngestFor('rtsp')) throw invalidParam('rtspSrc', 'No ingest plugin on this site serves it.');
    const r = body.rtspSrc;
    if (!isObj(r) || !okString(r.url, MAX_RTSP_URL_LENGTH) || !/^rtsps?:\/\/[^\s/]+/i.test(r.url)) throw invalidParam('rtspSrc.url');
    try { new URL(r.url); } catch { throw invalidParam('rtspSrc.url'); }
    if (r.user !== undefined && !okString(r.user, MAX_RTSP_CRED_LENGTH)) throw invalidParam('rtspSrc.user');
    if (r.pwd !== undefined && !okString(r.pwd, MAX_RTSP_CRED_LENGTH)) throw invalidParam('rtspSrc.pwd');
    rtspSrc = { url: r.url, user: r.user as string | undefined, pwd: r.pwd as string | undefined };
  }
  // 11. keepIntv, record
  const keepIntv = optInt(body, 'keepIntv', env.keepIntvDefault, (n) => n >= 15 && n <= 600, 'Use 15..600 seconds.');
  const record = optBool(body, 'record');
  if (record && fmt !== 0) throw invalidParam('record', 'Only with fmt 0 (FLV).');
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
  const connIdx = optInt(body, 'connIdx', 0, (n) => n >= 0, 'Use an integer from 0.');
  let talkSendProtoVer: number | undefined;
  if (body.talkSendProtoVer !== undefined && body.talkSendProtoVer !== null) {
    if (body.talkSendProtoVer !== 0 && body.talkSendProtoVer !== 1) throw invalidParam('talkSendProtoVer', 'Use 0 or 1.');
    talkSendProtoVer = body.talkSendProtoVer;
  }
  const exclusive = optBool(body, 'exclusive');
  const detectMediaTyp = optBool(body, 'detectMediaTyp');
  let http: boolean | undefined;
  if (body.http !== undefined && body.http !== null) http = optBool(body, 'http');
  let timedToken: string | undefined;
  if (body.timedToken !== undefined && body.timedToken !== null) {
    // one or two comma-separated tokens
    if (!okString(body.timedToken, 1024)) throw invalidParam('timedToken');
    timedToken = body.timedToken;
  }
  if (!scheme) scheme = defaultScheme(fmt, schemes);
  return {
    reqId, cb, user: { token: user.token, userId: user.userId as string | undefined, userGrade: user.userGrade as number | undefined },
    typ, simNo, normSim: normaliseSim(simNo), chanId: chanRaw, dataTyp, codeStrm, fmt, subFmt, scheme, connIdx, talkSendProtoVer,
    exclusive, record, detectMediaTyp, keepIntv, audioCfg, rtspSrc, http, timedToken,
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

export { GatewayError };
