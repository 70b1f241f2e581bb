/**
 * GET /strm/record and the file route, described for the OpenAPI document (API_DOCS) from the constants
 * query-params.ts validates with: change a limit there and the document follows.
 */
import { queryParameters, type ApiDescription, type FieldRules, type JsonSchema } from '../../../plugin-sdk';
import { SIM_PATTERN } from '../../../plugin-sdk';
import { DEFAULT_LIMIT, DEFAULT_PAGE, MAX_APP_ID_LENGTH, MAX_LIMIT, MAX_PAGE, MAX_SPAN_MS, REQ_ID_PATTERN, TIME_PATTERN } from './query-params';
import { LINK_TTL_SEC } from './signed-link';

const SPAN_DAYS = MAX_SPAN_MS / 86_400_000;

/** The query of GET /strm/record, in the order parseRecordQuery checks it. */
export const RECORD_QUERY_FIELDS = {
  reqId: { type: 'string', pattern: REQ_ID_PATTERN, description: 'By-reqId mode: the records of this request (startTm, endTm and simNo are then ignored).' },
  startTm: {
    type: 'string',
    pattern: TIME_PATTERN,
    description: `Time-range mode (required without reqId): \`yyyy-mm-dd HH:mm:ss\` (the recorder's zone) or \`yyyy-mm-ddTHH:mm:ssZ\` / with an offset.`,
    example: '2026-11-23 00:00:00',
  },
  endTm: { type: 'string', pattern: TIME_PATTERN, description: `End of the range, same forms; default now. At most ${SPAN_DAYS} days after startTm.` },
  appId: { type: 'string', maxLength: MAX_APP_ID_LENGTH, description: "Only narrows to the caller's own records." },
  simNo: { type: 'string', pattern: SIM_PATTERN, description: 'Terminal (time-range mode only).' },
  __page: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE, description: 'Page, from 1.' },
  __limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: 'Records per page.' },
} as const satisfies FieldRules;

const STORED_AV: JsonSchema = {
  type: 'object',
  required: ['reqId', 'reqTm', 'appId', 'simNo', 'chan', 'live', 'path', 'ext', 'sz', 'url'],
  properties: {
    reqId: { type: 'string' },
    reqTm: { type: 'string', description: "`yyyy-mm-ddTHH:mm:ss+08:00`: the open's time in the recorder's zone." },
    appId: { type: 'string' },
    simNo: { type: 'string' },
    chan: { type: 'integer' },
    live: { type: 'boolean' },
    path: { type: 'string', description: 'Relative path in the store.' },
    ext: { const: 'flv' },
    sz: { type: 'integer', description: 'Bytes.' },
    url: { type: 'string', description: 'The file (`/strm/record/file/{path}`) on the gateway node that recorded it, same credentials as the API.' },
    mediaTyp: { enum: ['av', 'a', 'v'] },
  },
};

const FILE_CONTENT = {
  'video/x-flv': { schema: { type: 'string', contentMediaType: 'video/x-flv' } },
  'video/mp4': { schema: { type: 'string', contentMediaType: 'video/mp4' } },
};

const error = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } });

export function recorderApi(): ApiDescription {
  return {
    owner: 'recorder',
    summary: 'Stored media (records of requests opened with record: true)',
    schemas: { StoredAv: STORED_AV },
    paths: {
      '/strm/record': {
        get: {
          operationId: 'queryRecords',
          summary: 'Stored media query',
          tags: ['recorder'],
          security: [{ basicAuth: [] }],
          description:
            "The caller's records, by reqId or by time range, ordered by request time. A bad parameter answers -7 naming it; an unknown reqId answers `data: []`; -3 when the catalog is not available.",
          parameters: queryParameters(RECORD_QUERY_FIELDS),
          responses: {
            200: {
              description: 'errCode 0 with StoredAv items, or a business error',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      {
                        type: 'object',
                        required: ['errCode', 'message', 'data', 'count'],
                        properties: {
                          errCode: { const: 0 },
                          message: { type: 'string' },
                          data: { type: 'array', items: { $ref: '#/components/schemas/StoredAv' } },
                          count: { type: 'integer' },
                        },
                      },
                      { $ref: '#/components/schemas/ErrorEnvelope' },
                    ],
                  },
                },
              },
            },
            401: error('errCode -9'),
          },
        },
      },
      '/strm/record/file/{path}': {
        get: {
          operationId: 'downloadRecord',
          summary: "A record's file",
          tags: ['recorder'],
          security: [{ basicAuth: [] }],
          description:
            'The FLV file of a record (its `url`), or its MP4 form with `format=mp4` (made on the fly: moov before mdat, video and AAC remuxed, G.711 audio encoded as AAC unless `audio=as-is`; a recording still being written answers the MP4 of what is on disk), to its owner only; one byte range per request. A record another gateway node recorded and this one does not hold answers 307 to its `url` there (query kept). An unknown `format` or `audio` answers 400 / -7; anything else 404 / -8.',
          parameters: [
            { name: 'path', in: 'path', required: true, description: "The record's path (slashes included).", schema: { type: 'string' } },
            {
              name: 'format',
              in: 'query',
              required: false,
              description: '`flv` (default): the file as stored; `mp4`: its MP4 form (`video/mp4`).',
              schema: { enum: ['flv', 'mp4'], default: 'flv' },
            },
            {
              name: 'audio',
              in: 'query',
              required: false,
              description:
                'MP4 only: `aac` (default) carries G.711 audio as AAC-LC 8 kHz mono, which every player plays (encoded once per file version, about a second for 10 minutes); `as-is` keeps it G.711 (`alaw`/`ulaw`: Chromium, VLC, ffmpeg only). AAC audio is never re-encoded.',
              schema: { enum: ['aac', 'as-is'], default: 'aac' },
            },
            {
              name: 'If-Range',
              in: 'header',
              required: false,
              description: 'MP4: the ETag of the answer the range belongs to; another one gets the whole file.',
              schema: { type: 'string' },
            },
            { name: 'Range', in: 'header', required: false, description: 'One byte range, e.g. `bytes=0-1023`.', schema: { type: 'string' } },
          ],
          responses: {
            200: { description: 'The file', content: FILE_CONTENT },
            206: { description: 'The range', content: FILE_CONTENT },
            400: error('errCode -7: an unknown `format` or `audio`'),
            307: {
              description: 'The file is on the gateway node that recorded it: repeat the request (credentials, Range) at `Location`',
              headers: { Location: { schema: { type: 'string' } } },
            },
            401: error('errCode -9'),
            404: error('errCode -8: no such record of the caller'),
            416: { description: 'The range starts past the end' },
          },
        },
      },
      '/strm/record/link': {
        get: {
          operationId: 'recordLink',
          summary: "A signed link to a record's file",
          tags: ['recorder'],
          security: [{ basicAuth: [] }],
          description: `A URL of the record's file (\`/strm/record/signed/{path}?format[&audio]&app&exp&sig\`) that needs no credentials, valid for ${LINK_TTL_SEC / 60} minutes: for a \`<video>\` element or a download link, which cannot send Basic credentials. Another application's or an unknown reqId answers -8.`,
          parameters: [
            { name: 'reqId', in: 'query', required: true, schema: { type: 'string', pattern: REQ_ID_PATTERN.source } },
            { name: 'format', in: 'query', required: false, schema: { enum: ['mp4', 'flv'], default: 'mp4' } },
            {
              name: 'audio',
              in: 'query',
              required: false,
              description:
                "Carried in the link as `audio` (not signed: it picks the form of the file the link grants); without it the file route's default, `aac`.",
              schema: { enum: ['aac', 'as-is'] },
            },
          ],
          responses: {
            200: {
              description: 'errCode 0 with `data: [{url, expiresAt}]`, or a business error (-7, -8, -3)',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      {
                        type: 'object',
                        required: ['errCode', 'message', 'data', 'count'],
                        properties: {
                          errCode: { const: 0 },
                          message: { type: 'string' },
                          count: { type: 'integer' },
                          data: {
                            type: 'array',
                            items: {
                              type: 'object',
                              required: ['url', 'expiresAt'],
                              properties: { url: { type: 'string' }, expiresAt: { type: 'string', format: 'date-time' } },
                            },
                          },
                        },
                      },
                      { $ref: '#/components/schemas/ErrorEnvelope' },
                    ],
                  },
                },
              },
            },
            401: error('errCode -9'),
          },
        },
      },
      '/strm/record/signed/{path}': {
        get: {
          operationId: 'downloadRecordSigned',
          summary: "A record's file through a signed link",
          tags: ['recorder'],
          security: [],
          description:
            'As `/strm/record/file/{path}` (format, audio, Range, 307), for the application the link was made for, without credentials. A changed or expired link answers 403 / -10.',
          parameters: [
            { name: 'path', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'format', in: 'query', required: false, schema: { enum: ['flv', 'mp4'] } },
            {
              name: 'audio',
              in: 'query',
              required: false,
              description: 'As for the file route (not part of the signature).',
              schema: { enum: ['aac', 'as-is'], default: 'aac' },
            },
            { name: 'app', in: 'query', required: true, schema: { type: 'string' } },
            { name: 'exp', in: 'query', required: true, schema: { type: 'integer' } },
            { name: 'sig', in: 'query', required: true, schema: { type: 'string' } },
          ],
          responses: {
            200: { description: 'The file', content: FILE_CONTENT },
            206: { description: 'The range', content: FILE_CONTENT },
            400: error('errCode -7: an unknown `format` or `audio`'),
            403: error('errCode -10: the link is not valid or has expired'),
            404: error('errCode -8'),
            416: { description: 'The range starts past the end' },
          },
        },
      },
    },
  };
}
