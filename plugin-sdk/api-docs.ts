/**
 * API documentation as data. A route's parameters are described once, as `FieldRule` tables that its validator
 * reads (limits, enums, patterns, the detail sentence of its -7 answer); `fieldSchema` turns the same tables into
 * JSON Schema for the OpenAPI document, so the document cannot drift from what the server checks.
 *
 * Plugins with API routes describe them through the `API_DOCS` service (provided by the console plugin, which
 * serves `GET /openapi.json`): declare `uses: [API_DOCS]` and call `ctx.services.find(API_DOCS)?.describe(...)`.
 * A site without the console simply has no document.
 */
import { defineService } from './services';

/** One field of a body or query: what the validator enforces and what the document says. */
export interface FieldRule {
  type: 'string' | 'integer' | 'boolean' | 'object';
  description: string;
  required?: boolean;
  enum?: readonly (string | number)[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  /** the validator's own RegExp (no flags: JSON Schema patterns are ECMA-262 without flags) */
  pattern?: RegExp;
  /** JSON Schema `format` hint, e.g. `uri`, `date-time` */
  format?: string;
  default?: unknown;
  /** the sentence after ``Invalid parameter `x`.`` when a value breaks the rule (no sentence when absent) */
  detail?: string;
  /** other names accepted for the field (chanId's channelId) */
  aliases?: readonly string[];
  /** an object's fields */
  properties?: Readonly<Record<string, FieldRule>>;
  /** a query parameter's example value, or a body field's */
  example?: unknown;
}

export type FieldRules = Readonly<Record<string, FieldRule>>;

/** A JSON Schema (2020-12, as OpenAPI 3.1 uses it): plain data. */
export type JsonSchema = Record<string, unknown>;

/**
 * The JSON Schema of one rule. `nullable`: the validators read `null` as "absent" for optional fields, so the
 * schema allows it there too.
 */
export function fieldSchema(rule: FieldRule, nullable = !rule.required): JsonSchema {
  const s: JsonSchema = { type: nullable ? [rule.type, 'null'] : rule.type, description: rule.description };
  if (rule.enum) s.enum = nullable ? [...rule.enum, null] : [...rule.enum];
  if (rule.minimum !== undefined) s.minimum = rule.minimum;
  if (rule.maximum !== undefined) s.maximum = rule.maximum;
  if (rule.minLength !== undefined) s.minLength = rule.minLength;
  if (rule.maxLength !== undefined) s.maxLength = rule.maxLength;
  if (rule.pattern) s.pattern = rule.pattern.source;
  if (rule.format) s.format = rule.format;
  if (rule.default !== undefined) s.default = rule.default;
  if (rule.example !== undefined) s.examples = [rule.example];
  if (rule.properties) Object.assign(s, objectSchema(rule.properties));
  return s;
}

/** `{ properties, required }` of a table of fields (aliases become properties of their own, described as such). */
export function objectSchema(rules: FieldRules): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [name, rule] of Object.entries(rules)) {
    properties[name] = fieldSchema(rule);
    if (rule.required && !rule.aliases?.length) required.push(name);
    for (const alias of rule.aliases ?? []) {
      properties[alias] = { ...fieldSchema(rule, true), description: `Another name for \`${name}\` (used when \`${name}\` is absent).` };
    }
  }
  const out: JsonSchema = { properties };
  if (required.length) out.required = required;
  return out;
}

/** OpenAPI query parameters of a table of fields. */
export function queryParameters(rules: FieldRules): JsonSchema[] {
  return Object.entries(rules).map(([name, rule]) => ({
    name,
    in: 'query',
    required: !!rule.required,
    description: rule.description,
    // a query parameter is text: integers and booleans are documented as their type, which clients serialise
    schema: (({ description: _d, ...rest }) => rest)(fieldSchema(rule, false)),
  }));
}

/** An OpenAPI path item (`{ get: {...}, post: {...} }`), as plain data. */
export type PathItem = Record<string, unknown>;

export interface ApiDescription {
  /** who describes it (a plugin name): the document's tag of these operations */
  owner: string;
  /** what the tag says */
  summary?: string;
  /** path → path item; `{param}` for path templates */
  paths: Record<string, PathItem>;
  /** schemas the paths refer to as `#/components/schemas/<name>` */
  schemas?: Record<string, JsonSchema>;
}

export interface ApiDocs {
  /** adds (or replaces, by owner) the description of a plugin's routes */
  describe(d: ApiDescription): void;
}

export const API_DOCS = defineService<ApiDocs>('api-docs', { providedBy: 'console' });
