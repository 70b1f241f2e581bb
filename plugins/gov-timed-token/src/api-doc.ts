/**
 * POST /strm/timed_token described for the OpenAPI document (API_DOCS), from the constants timed-token-body.ts
 * validates with.
 */
import type { ApiDescription, JsonSchema } from '../../../plugin-sdk';
import { EXPIRED_AT, MAX_TOKEN_LENGTH, MAX_TOKENS } from './timed-token-body';

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({ description, content: { 'application/json': { schema: ref('ErrorEnvelope') } } });

export function timedTokenApi(): ApiDescription {
  return {
    owner: 'gov-timed-token',
    summary: 'Timed tokens of government-platform applications',
    schemas: {
      TimedTokenBody: {
        type: 'object',
        required: ['tokens'],
        properties: {
          tokens: {
            type: 'array',
            minItems: 1,
            maxItems: MAX_TOKENS,
            description: 'The whole new set: one token, or new and old during a rotation. A token may not be given twice.',
            items: {
              type: 'object',
              required: ['token', 'expiredAt'],
              properties: {
                // printable ASCII without blanks or commas (a comma separates the pair in an open's timedToken)
                token: { type: 'string', minLength: 1, maxLength: MAX_TOKEN_LENGTH, pattern: '^[!-+\\--~]+$' },
                expiredAt: { type: 'string', pattern: EXPIRED_AT.source, description: '`yyyy-mm-ddTHH:mm:ss` then `Z` or an offset; a real date.' },
              },
            },
          },
        },
      },
      TimedTokenInfo: {
        type: 'object',
        required: ['fingerprint', 'expiredAt'],
        properties: {
          fingerprint: { type: 'string', pattern: '^[0-9a-f]{8}$', description: "First 8 hex digits of the token's SHA-256." },
          expiredAt: { type: 'string', format: 'date-time' },
        },
      },
    },
    paths: {
      '/strm/timed_token': {
        post: {
          operationId: 'setTimedTokens',
          summary: 'Replace the valid timed tokens',
          tags: ['gov-timed-token'],
          security: [{ basicAuth: [] }],
          description: 'Admin applications only. -7 names the first bad field and changes nothing; -3 when the store fails (the old set stays).',
          requestBody: { required: true, content: { 'application/json': { schema: ref('TimedTokenBody') } } },
          responses: {
            200: {
              description: 'errCode 0 with the set now in use (without secrets), or a business error',
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
                          data: { type: 'array', items: ref('TimedTokenInfo') },
                          count: { type: 'integer' },
                        },
                      },
                      ref('ErrorEnvelope'),
                    ],
                  },
                },
              },
            },
            400: error('errCode -13: body not JSON'),
            401: error('errCode -9'),
            403: error('errCode -11: not an admin application'),
            415: error('errCode -13: Content-Type is not application/json'),
          },
        },
      },
    },
  };
}
