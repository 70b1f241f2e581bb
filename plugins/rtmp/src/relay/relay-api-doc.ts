/** POST /strm/relay and /strm/relay/stop described for the OpenAPI document (API_DOCS), from the rules relay-routes.ts checks. */
import type { ApiDescription, JsonSchema } from '../../../../plugin-sdk';
import { RELAY_ID, REQ_ID } from './relay-routes';
import { MAX_URL_LENGTH } from './relay-url';

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({ description, content: { 'application/json': { schema: ref('ErrorEnvelope') } } });

function ok(item: string, description: string) {
  return {
    description,
    content: {
      'application/json': {
        schema: {
          oneOf: [
            {
              type: 'object',
              required: ['errCode', 'message', 'data', 'count'],
              properties: { errCode: { const: 0 }, message: { type: 'string' }, data: { type: 'array', items: ref(item) }, count: { type: 'integer' } },
            },
            ref('ErrorEnvelope'),
          ],
        },
      },
    },
  };
}

const common = { 400: error('errCode -13: body not JSON'), 401: error('errCode -9'), 415: error('errCode -13: Content-Type is not application/json') };
const reqId = {
  type: 'string',
  pattern: REQ_ID.source,
  description: "An open request of the calling application (another application's answers as an unknown one).",
};
const url = {
  type: 'string',
  maxLength: MAX_URL_LENGTH,
  pattern: '^rtmps?://',
  description:
    '`rtmp://host[:port]/app/streamKey` or `rtmps://…` (TLS): the stream key is the last path segment and its query, as ffmpeg reads such a URL. Never shown back: answers, status and notices redact it.',
  examples: ['rtmp://a.rtmp.youtube.com/live2/xxxx-xxxx-xxxx-xxxx'],
};

export function relayApi(): ApiDescription {
  return {
    owner: 'rtmp',
    summary: "RTMP: push an open request's stream out to an RTMP(S) server (a live platform, a CDN)",
    schemas: {
      RelayBody: { type: 'object', required: ['reqId', 'url'], properties: { reqId, url } },
      RelayStopBody: {
        type: 'object',
        required: ['reqId'],
        properties: {
          reqId,
          url: { ...url, description: 'Stop the relay to this URL only.' },
          relayId: { type: 'string', pattern: RELAY_ID.source, description: 'Stop this relay only.' },
        },
      },
      Relay: {
        type: 'object',
        required: ['reqId', 'relayId', 'url', 'state', 'since', 'bytesOut'],
        properties: {
          reqId: { type: 'string' },
          relayId: { type: 'string', pattern: RELAY_ID.source },
          url: { type: 'string', description: 'The URL with its stream key replaced by `***`.' },
          state: { enum: ['connecting', 'publishing', 'retrying', 'stopped'] },
          since: { type: 'string', format: 'date-time' },
          error: { type: 'string', description: 'While retrying (and connecting again): why the last attempt failed.' },
          bytesOut: { type: 'integer' },
        },
      },
      RelayStopped: {
        type: 'object',
        required: ['reqId', 'relayId', 'url', 'stopped'],
        properties: { reqId: { type: 'string' }, relayId: { type: 'string' }, url: { type: 'string' }, stopped: { const: true } },
      },
    },
    paths: {
      '/strm/relay': {
        post: {
          operationId: 'startRelay',
          summary: "Push a request's stream to an RTMP(S) URL",
          tags: ['rtmp'],
          security: [{ basicAuth: [] }],
          description:
            'One relay per (reqId, url): the same call again answers the relay that exists. It reconnects with a back-off until ' +
            "the request closes or it is stopped; status lists it in the request's `flags.relays`. -7 names `reqId` or `url`; -3 past " +
            "the application's relay cap (maxRelaysPerApp).",
          requestBody: { required: true, content: { 'application/json': { schema: ref('RelayBody') } } },
          responses: { 200: ok('Relay', 'errCode 0 with the relay, or a business error'), ...common },
        },
      },
      '/strm/relay/stop': {
        post: {
          operationId: 'stopRelay',
          summary: "Stop a request's relays",
          tags: ['rtmp'],
          security: [{ basicAuth: [] }],
          description:
            'Stops the relay to `url`, or the one with `relayId`, or every relay of the request. An unknown request (or ' +
            "another application's) answers errCode 0 with `data: []`, as /strm/close does.",
          requestBody: { required: true, content: { 'application/json': { schema: ref('RelayStopBody') } } },
          responses: { 200: ok('RelayStopped', 'errCode 0 with the relays stopped (none: empty), or a business error'), ...common },
        },
      },
    },
  };
}
