/**
 * The fields of `POST /strm/open` (strm-api 3.4.4, decisions.md "Open request validation") as data: the kernel's
 * validator (core/sessions/open-validation.ts) reads its limits, enums, patterns and -7 details from here, and the
 * OpenAPI document is generated from the same tables. Change a rule here and both follow.
 *
 * The order of OPEN_FIELDS is the order in which the validator reports the first bad field.
 */
import type { FieldRule, FieldRules } from '../../plugin-sdk/api-docs';
import { SIM_PATTERN } from '../../plugin-sdk/sim';

export const REQ_ID_PATTERN = /^[A-Za-z0-9_\-$.~]{8,40}$/;
/**
 * user.token goes into every play URL (and a player's query string, which proxies cap at a few KiB); a JWT or an
 * opaque session id fits with room to spare.
 */
export const MAX_TOKEN_LENGTH = 1024;
/** userId is only for logs and debugging */
export const MAX_USER_ID_LENGTH = 256;
export const MAX_RTSP_URL_LENGTH = 2048;
export const MAX_RTSP_CRED_LENGTH = 256;
export const MAX_TIMED_TOKEN_LENGTH = 1024;
/** case-insensitive `rtsp://` or `rtsps://` and a host: spelt without the `i` flag so JSON Schema can carry it */
export const RTSP_URL_PATTERN = /^[Rr][Tt][Ss][Pp][Ss]?:\/\/[^\s/]+/;

const BOOL_DETAIL = 'Must be true or false.';

const bool = (description: string): FieldRule => ({ type: 'boolean', default: false, detail: BOOL_DETAIL, description });

export const USER_FIELDS = {
  token: {
    type: 'string',
    required: true,
    minLength: 1,
    maxLength: MAX_TOKEN_LENGTH,
    detail: `Use at most ${MAX_TOKEN_LENGTH} characters of valid Unicode.`,
    description: "The user's session token, made by the application; every play URL of the request carries it.",
    example: 'user-session-token',
  },
  userId: {
    type: 'string',
    maxLength: MAX_USER_ID_LENGTH,
    detail: `Use a string of at most ${MAX_USER_ID_LENGTH} characters of valid Unicode.`,
    description: 'User id, for logs and debugging.',
  },
  userGrade: { type: 'integer', description: 'User grade (unused).' },
} as const satisfies FieldRules;

export const AUDIO_CFG_FIELDS = {
  sampleRate: { type: 'integer', required: true, enum: [8000, 11025, 22050, 44100, 48000, 64000, 96000], description: 'Output sample rate, Hz.' },
  channels: { type: 'integer', required: true, enum: [1, 2, 3, 4, 5, 6, 8], description: 'Output channel count.' },
} as const satisfies FieldRules;

export const RTSP_SRC_FIELDS = {
  url: {
    type: 'string',
    required: true,
    maxLength: MAX_RTSP_URL_LENGTH,
    pattern: RTSP_URL_PATTERN,
    format: 'uri',
    description: 'RTSP source address (`rtsp://` or `rtsps://`), reachable by the gateway.',
  },
  user: { type: 'string', maxLength: MAX_RTSP_CRED_LENGTH, description: 'User name, when the URL carries none.' },
  pwd: { type: 'string', maxLength: MAX_RTSP_CRED_LENGTH, description: 'Password, when the URL carries none.' },
  transport: {
    type: 'string',
    enum: ['auto', 'tcp', 'udp'],
    detail: 'Use auto, tcp or udp.',
    description:
      "RTP transport from the source: `tcp` (interleaved in the RTSP connection) or `udp` forced, no fallback; `auto` TCP first, then UDP when the source refuses TCP. Default: the site's (auto unless configured). Opens of one source share its pull only with the same transport.",
  },
} as const satisfies FieldRules;

/** The open body, in the order of the rules. */
export const OPEN_FIELDS = {
  reqId: {
    type: 'string',
    pattern: REQ_ID_PATTERN,
    detail: 'Use 8 to 40 letters, digits or _ - $ . ~',
    description: 'Request id; the gateway makes one when absent. Must not be in use.',
  },
  user: { type: 'object', required: true, properties: USER_FIELDS, description: 'The user the stream is opened for.' },
  typ: {
    type: 'string',
    required: true,
    enum: ['live', 'replay'],
    detail: 'Use live or replay.',
    description: '`live`: live audio/video; `replay`: a recording on the terminal. Refused (-7) when no ingest plugin on the site serves terminals.',
    example: 'live',
  },
  simNo: {
    type: 'string',
    required: true,
    pattern: SIM_PATTERN,
    description: 'Terminal number (SIM); leading zeros of an all-digit value do not count.',
    example: '013800138000',
  },
  chanId: {
    type: 'integer',
    required: true,
    minimum: 1,
    maximum: 255,
    aliases: ['channelId'],
    detail: 'Use an integer 1..255.',
    description: 'Logical channel (JT/T 1078 channel table). Required (or its alias `channelId`).',
    example: 1,
  },
  dataTyp: {
    type: 'integer',
    minimum: 0,
    maximum: 5,
    default: 0,
    description: 'live: 0 audio+video, 1 video, 2 intercom, 3 listen (4 broadcast and 5 pass-through are refused); replay: 0 audio+video, 1 audio, 2 video.',
  },
  codeStrm: { type: 'integer', enum: [0, 1], default: 0, detail: 'Use 0 or 1.', description: '0 main stream, 1 sub stream.' },
  fmt: {
    type: 'integer',
    enum: [0, 1, 4],
    default: 0,
    detail: 'Use 0 (FLV), 1 (HLS) or 4 (RTSP).',
    description: 'Client format: 0 FLV, 1 HLS, 4 RTSP. Refused (-7) when the site runs no output plugin for it.',
  },
  subFmt: {
    type: 'string',
    enum: ['fmp4', 'mpegts'],
    detail: 'Only with fmt 1: fmp4 or mpegts.',
    description: 'HLS segments; only with fmt 1 (default `fmp4` there).',
  },
  scheme: {
    type: 'string',
    enum: ['http', 'https', 'ws', 'wss', 'rtmp', 'webrtc', 'rtsp'],
    description:
      'Play URL scheme: fmt 0 http, https, ws, wss, rtmp (FLV over RTMP, on a site with the rtmp plugin) or webrtc (a WHEP URL, on a site with the webrtc plugin); fmt 1 https (http on a site without TLS); fmt 4 rtsp. Default: the most secure one the site serves (never rtmp or webrtc unless asked).',
  },
  audioCfg: { type: 'object', properties: AUDIO_CFG_FIELDS, description: 'Audio for the client (AAC), when the site converts audio.' },
  rtspSrc: { type: 'object', properties: RTSP_SRC_FIELDS, description: 'Play from an RTSP source instead of a terminal (needs an RTSP ingest plugin).' },
  keepIntv: {
    type: 'integer',
    minimum: 15,
    maximum: 600,
    detail: 'Use 15..600 seconds.',
    description: "Seconds between keep calls; the request closes when none comes in time. Default: the site's.",
  },
  record: bool('Also record the stream on the server (only with fmt 0).'),
  cb: {
    type: 'string',
    format: 'uri',
    description: 'Callback base URL: notices go to `<cb>/strm_notif`. May carry user:password (sent as Basic).',
  },
  connIdx: {
    type: 'integer',
    minimum: 0,
    default: 0,
    detail: 'Use an integer from 0.',
    description:
      "Connection index: which of the owner node's address sets the answer names (host, push ports' host, play and talk URLs): 0 its publicHost, k >= 1 its publicHosts[k - 1] (for example one address per carrier line). It never moves the channel to another node; an index the node does not have answers -7 naming connIdx.",
  },
  talkSendProtoVer: {
    type: 'integer',
    enum: [0, 1],
    detail: 'Use 0 or 1.',
    description: 'Intercom packets to the terminal: 0 2013 layout, 1 2019 layout (live, dataTyp 2).',
  },
  exclusive: bool('Open exclusively: later opens of the channel answer -25.'),
  detectMediaTyp: bool('Detect the media type from the stream (reported in mediaTyp).'),
  http: { type: 'boolean', detail: BOOL_DETAIL, description: 'Ask for the plain HTTP/WS play port.' },
  timedToken: {
    type: 'string',
    maxLength: MAX_TIMED_TOKEN_LENGTH,
    description: 'Time-limited token of a government platform (required for applications marked gov): one, or `new,old` during a rotation.',
  },
} as const satisfies FieldRules;

/** dataTyp values per typ: the accepted range, and the values known but refused as unsupported */
export const DATA_TYP_BY_TYP = {
  live: { values: [0, 1, 2, 3], unsupported: [4, 5], detail: 'Use 0..3.', unsupportedDetail: 'Center broadcast (4) and pass-through (5) are unsupported.' },
  replay: { values: [0, 1, 2], unsupported: [], detail: 'Use 0..2.', unsupportedDetail: '' },
} as const;

/** Schemes a client may ask for per fmt (http for HLS is not in the spec's list: an output without TLS serves only it). */
export const SCHEMES_BY_FMT: Readonly<Record<number, readonly string[]>> = {
  0: ['http', 'https', 'ws', 'wss', 'rtmp', 'webrtc'],
  1: ['https', 'http'],
  4: ['rtsp'],
};

/** Rules between fields, as the validator applies them and the document states them. */
export const OPEN_CROSS_RULES = {
  /** subFmt only with this fmt */
  subFmtFmt: 1,
  /** record: true only with this fmt */
  recordFmt: 0,
  recordDetail: 'Only with fmt 0 (FLV).',
} as const;
