/**
 * The pieces every operation shares: the reply envelope of decisions.md ({errCode, message, data, count}), the error
 * codes (from the SDK's ErrCode, with the HTTP status GatewayError gives each), Basic authentication.
 */
import type { JsonSchema } from '../../../plugin-sdk';
import { ErrCode, GatewayError } from '../../../plugin-sdk';

/** What each code means to a client (decisions.md "Error codes"). */
const MEANING: Record<keyof typeof ErrCode, string> = {
  OK: 'Success.',
  INTERNAL_ERROR: 'Internal error (never with details).',
  EXECUTION_ERROR: 'The call could not be carried out (a limit, a store or catalog not available).',
  TIMEOUT: 'Timed out.',
  INVALID_PARAM: 'Invalid parameter: the message names the first bad field (``Invalid parameter `field`.``).',
  RECORD_NOT_FOUND: "Not found (unknown route, record file that is not the caller's).",
  AUTHENTICATION_FAILED: 'No or bad Basic credentials (HTTP 401), or too many failed logins from the address (HTTP 429, Retry-After).',
  INVALID_TOKEN: 'Invalid timedToken.',
  ACCESS_DENIED: 'The application may not do this (administrative route, metrics).',
  BAD_REQUEST: 'Body not JSON or not an object (400), wrong Content-Type (415), body over the limit (413).',
  NO_CTRL: 'The channel is held exclusively, or an exclusive open met other requests.',
  NO_CONNECTION_AVAILABLE: 'The terminal is not online.',
  RETRY: 'The stream is closing or busy: retry.',
};

/** The codes with their names, HTTP status and meaning, in ErrCode's order. */
export function errorCodes(): Array<{ code: number; name: string; httpStatus: number; meaning: string }> {
  return (Object.keys(ErrCode) as Array<keyof typeof ErrCode>).map((name) => ({
    code: ErrCode[name],
    name,
    // the status the server really sends for the code (login throttling's 429 and 413/415 are special cases of their codes)
    httpStatus: name === 'OK' ? 200 : new GatewayError(ErrCode[name], '').httpStatus,
    meaning: MEANING[name],
  }));
}

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

export function sharedSchemas(): Record<string, JsonSchema> {
  const codes = errorCodes();
  const table = codes.map((c) => `| ${c.code} | ${c.name} | ${c.httpStatus} | ${c.meaning} |`).join('\n');
  return {
    ErrCode: {
      type: 'integer',
      enum: codes.map((c) => c.code),
      description:
        'Every reply carries one. Business errors keep HTTP 200: clients read errCode.\n\n| errCode | name | HTTP | meaning |\n|---|---|---|---|\n' + table,
      'x-enum-varnames': codes.map((c) => c.name),
    },
    ErrorEnvelope: {
      type: 'object',
      required: ['errCode', 'message'],
      properties: {
        errCode: { type: 'integer', enum: codes.filter((c) => c.code !== 0).map((c) => c.code), description: 'See ErrCode.' },
        message: { type: 'string', examples: ['Invalid parameter `chanId`. Use an integer 1..255.'] },
      },
    },
  };
}

/** the success envelope around `data` items */
export function successEnvelope(item: JsonSchema | undefined): JsonSchema {
  return {
    type: 'object',
    required: ['errCode', 'message', 'data', 'count'],
    properties: {
      errCode: { const: 0 },
      message: { type: 'string', examples: ['OK'] },
      data: { type: 'array', items: item ?? {} },
      count: { type: 'integer', minimum: 0, description: 'Number of items in data.' },
    },
  };
}

/** a response whose body is the error envelope */
export function envelopeOf(description: string): Record<string, unknown> {
  return { description, content: { 'application/json': { schema: ref('ErrorEnvelope') } } };
}

export function jsonBody(schema: JsonSchema): Record<string, unknown> {
  return { required: true, content: { 'application/json': { schema } } };
}

interface OperationSpec {
  description: string;
  parameters?: JsonSchema[];
  requestBody?: Record<string, unknown>;
  /** the items of `data` on success */
  data?: JsonSchema;
  /** 'admin': an admin application (others -11) */
  auth?: 'api' | 'admin';
}

/** A JSON operation of the API port: Basic credentials, the envelope, the error statuses the server can answer. */
export function operation(operationId: string, summary: string, o: OperationSpec, tag = 'core'): Record<string, unknown> {
  const responses: Record<string, unknown> = {
    200: {
      description: 'errCode 0 with data, or a business error (errCode < 0) with HTTP 200',
      content: { 'application/json': { schema: { oneOf: [successEnvelope(o.data), ref('ErrorEnvelope')] } } },
    },
    401: envelopeOf('errCode -9: no or bad Basic credentials'),
    429: envelopeOf('errCode -9: too many failed logins from this address (Retry-After)'),
    500: envelopeOf('errCode -2'),
  };
  if (o.auth === 'admin') responses[403] = envelopeOf('errCode -11: not an admin application');
  if (o.requestBody) {
    responses[400] = envelopeOf('errCode -13: body not JSON, or not an object');
    responses[413] = envelopeOf('errCode -13: body over the limit');
    responses[415] = envelopeOf('errCode -13: Content-Type is not application/json');
  }
  return {
    operationId,
    summary,
    description: o.description,
    tags: [tag],
    security: [{ basicAuth: [] }],
    ...(o.parameters ? { parameters: o.parameters } : {}),
    ...(o.requestBody ? { requestBody: o.requestBody } : {}),
    responses,
  };
}
