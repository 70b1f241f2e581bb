/**
 * The description of the kernel's own routes (open, keep, close, status, healthz, metrics). The open body's schema
 * comes from the sessions (Sessions.openRequestSchema), generated from the field tables the kernel's validator
 * reads, so a change of a rule changes the document.
 */
import type { ApiDescription, JsonSchema } from '../../../plugin-sdk';
import { envelopeOf, jsonBody, operation, ref } from './openapi-parts';

/** The keep and close body: the session manager's check (1..1000 ids of at most 64 characters). */
export const REQ_IDS_MAX = 1000;
export const REQ_ID_MAX_LENGTH = 64;

const codecSchema: JsonSchema = {
  type: 'object',
  required: ['kind', 'codec'],
  properties: {
    kind: { enum: ['video', 'audio'] },
    codec: { type: 'string', examples: ['h264', 'aac', 'g711a'] },
    width: { type: 'integer' },
    height: { type: 'integer' },
    sampleRate: { type: 'integer' },
  },
};

const str = (description: string): JsonSchema => ({ type: 'string', description });
const bool = (description: string): JsonSchema => ({ type: 'boolean', description });
const int = (description: string): JsonSchema => ({ type: 'integer', description });
const urls: JsonSchema = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description: 'Play URLs of outputs that serve every request their own way, by output name.',
};

/** the schemas of the kernel's routes, given the open body's schema */
export const coreSchemas = (openRequest: JsonSchema): Record<string, JsonSchema> => ({
  OpenRequest: openRequest,
  OpenResult: {
    type: 'object',
    required: ['reqId', 'ctrl', 'playUrl', 'ready', 'mediaTyp', 'keepIntv', 'host', 'port', 'tcp', 'port2019', 'tcp2019'],
    properties: {
      reqId: str('Request id (given or made).'),
      ctrl: bool('The first request on the channel: only it may send push commands to the terminal.'),
      playUrl: str('Play URL of the requested fmt.'),
      ready: bool('Playable now; otherwise wait for the `ready` notice (or poll status).'),
      mediaTyp: { enum: ['av', 'a', 'v'] },
      keepIntv: int('Seconds between keep calls.'),
      host: str('Push address host for the terminal.'),
      port: int('Push port, JT/T 808-2013 terminals.'),
      tcp: bool('`port` is TCP (false: UDP).'),
      port2019: int('Push port, JT/T 808-2019 terminals.'),
      tcp2019: bool('`port2019` is TCP.'),
      urls,
      taUrl: str("Intercom: binary WebSocket for the client's voice (live, dataTyp 2)."),
      wsUrl: str('Intercom: STOMP WebSocket (live, dataTyp 2).'),
      recording: bool('Recorded on the server; omitted when not.'),
      recordingError: str('Why a request that asked to record is not recorded.'),
      audioCfg: { type: 'object', properties: { sampleRate: { type: 'integer' }, channels: { type: 'integer' } } },
      detectMediaTyp: bool('Detection was used.'),
    },
  },
  ReqIds: {
    type: 'object',
    required: ['reqIds'],
    properties: {
      reqIds: {
        type: 'array',
        minItems: 1,
        maxItems: REQ_IDS_MAX,
        items: { type: 'string', maxLength: REQ_ID_MAX_LENGTH },
        description: "Request ids of the calling application; others' count as unknown.",
      },
    },
  },
  KeepResult: { type: 'object', required: ['reqId', 'keep'], properties: { reqId: { type: 'string' }, keep: bool('Kept (false: unknown or closed).') } },
  CloseResult: {
    type: 'object',
    required: ['reqId', 'closed'],
    properties: { reqId: { type: 'string' }, closed: bool('Closed now (false: unknown or closed already).') },
  },
  StatusEntry: {
    type: 'object',
    required: ['reqId', 'typ', 'simNo', 'chanId', 'stream', 'fmt', 'playUrl', 'ctrl', 'ready', 'players', 'openedAt', 'keepDeadline', 'bytesIn', 'bytesOut'],
    properties: {
      reqId: { type: 'string' },
      typ: { enum: ['live', 'replay'] },
      simNo: str('As opened.'),
      chanId: { type: 'integer' },
      stream: str('The bus stream: `{normSim}_{chanId}_{1 live|0 replay}`.'),
      fmt: { type: 'integer' },
      playUrl: { type: 'string' },
      urls,
      taUrl: { type: 'string' },
      wsUrl: { type: 'string' },
      ctrl: { type: 'boolean' },
      exclusive: { type: 'boolean' },
      ready: bool('The stream is playable.'),
      consumed: bool('A player attached at some point.'),
      players: int('Players attached now.'),
      keepIntv: { type: 'integer' },
      openedAt: { type: 'string', format: 'date-time' },
      keepDeadline: { type: 'string', format: 'date-time', description: 'Closed after this unless kept.' },
      mediaTyp: { enum: ['av', 'a', 'v'] },
      flags: { type: 'object', description: 'What plugins set (recording, recordingError, ...).' },
      codecs: { type: 'array', items: codecSchema },
      bytesIn: int('Media bytes the stream received.'),
      bytesOut: int("Bytes sent to this stream's players."),
      streamRequests: int('Open requests on the stream (any application).'),
    },
  },
  Health: {
    type: 'object',
    required: ['status'],
    properties: {
      status: { enum: ['ok', 'degraded', 'starting'] },
      requests: int('Open requests (for readers allowed the counts).'),
      streams: int('Open streams (idem).'),
      degraded: { type: 'object', additionalProperties: { type: 'string' }, description: "Each degraded part's reason." },
    },
  },
});

export function coreApi(openRequest: JsonSchema): ApiDescription {
  const reqId = { name: 'reqId', in: 'query', required: false, description: 'Only this request.', schema: { type: 'string', maxLength: REQ_ID_MAX_LENGTH } };
  return {
    owner: 'core',
    summary: 'Sessions (strm-api 3.4.4) and health',
    schemas: coreSchemas(openRequest),
    paths: {
      '/strm/open': {
        post: operation('openStream', 'Open a channel', {
          description:
            'Opens a live or replay channel of a terminal (or an RTSP source) and answers its play URL. ' +
            'Business errors: -7 (first bad field), -3 (the application holds its maximum of requests; a plugin failed), ' +
            '-10 (timedToken), -25 (exclusive), -27 (terminal offline), -207 (the stream is closing: retry).',
          requestBody: jsonBody(ref('OpenRequest')),
          data: ref('OpenResult'),
        }),
      },
      '/strm/keep': {
        post: operation('keepStreams', 'Keep requests open', {
          description: "Moves each request's keep deadline (keepIntv from now). -7 for a bad reqIds list.",
          requestBody: jsonBody(ref('ReqIds')),
          data: ref('KeepResult'),
        }),
      },
      '/strm/close': {
        post: operation('closeStreams', 'Close requests', {
          description: 'Closes requests of the calling application; a stream closes with its last request. -7 for a bad reqIds list.',
          requestBody: jsonBody(ref('ReqIds')),
          data: ref('CloseResult'),
        }),
      },
      '/strm/status': {
        get: operation('streamStatus', 'Open requests of the application', {
          description: "The calling application's open requests and their streams (ready, codecs, bytes, players).",
          parameters: [reqId],
          data: ref('StatusEntry'),
        }),
      },
      '/healthz': {
        get: {
          operationId: 'health',
          summary: 'Health',
          tags: ['core'],
          security: [{}, { basicAuth: [] }],
          description: 'No credentials needed. 200 while started (degraded included), 503 while starting. Counts only for readers allowed metrics.',
          responses: {
            200: { description: 'Started', content: { 'application/json': { schema: ref('Health') } } },
            503: { description: 'Starting', content: { 'application/json': { schema: ref('Health') } } },
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          summary: 'Prometheus metrics',
          tags: ['core'],
          security: [{}, { basicAuth: [] }],
          description: "Prometheus text. Per the site's metricsAccess: open, an admin application, or an allow-listed address.",
          responses: {
            200: { description: 'Metrics', content: { 'text/plain': { schema: { type: 'string' } } } },
            401: envelopeOf('No credentials where they are needed'),
            403: envelopeOf('Not an admin application (-11)'),
          },
        },
      },
    },
  };
}
