/**
 * A small JSON Schema (2020-12) checker for the tests' document-driven client: the keywords the document uses
 * (type, enum, const, bounds, lengths, pattern, required, properties, additionalProperties, items, minItems,
 * maxItems, allOf, anyOf, oneOf, if/then/else, $ref). It answers the first violation with its location, so a
 * failing test says which field the document and the server disagree on.
 */
type Schema = Record<string, unknown>;

export class SchemaChecker {
  constructor(private readonly doc: Record<string, any>) {}

  /** undefined when `value` fits `schema`, else the first violation */
  check(schema: Schema, value: unknown, at = '$'): string | undefined {
    if (typeof schema.$ref === 'string') {
      const target = schema.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce<any>((o, k) => o?.[k], this.doc);
      if (!target) return `${at}: unresolved ${schema.$ref}`;
      return this.check(target as Schema, value, at);
    }
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some((t) => typeOk(t as string, value))) return `${at}: ${JSON.stringify(value)} is not ${types.join('|')}`;
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) return `${at}: ${JSON.stringify(value)} not in ${JSON.stringify(schema.enum)}`;
    if ('const' in schema && schema.const !== value) return `${at}: ${JSON.stringify(value)} is not ${JSON.stringify(schema.const)}`;
    if (typeof value === 'number') {
      if (typeof schema.minimum === 'number' && value < schema.minimum) return `${at}: ${value} < ${schema.minimum}`;
      if (typeof schema.maximum === 'number' && value > schema.maximum) return `${at}: ${value} > ${schema.maximum}`;
    }
    if (typeof value === 'string') {
      // JSON Schema counts code points
      const len = [...value].length;
      if (typeof schema.minLength === 'number' && len < schema.minLength) return `${at}: shorter than ${schema.minLength}`;
      if (typeof schema.maxLength === 'number' && len > schema.maxLength) return `${at}: longer than ${schema.maxLength}`;
      if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) return `${at}: does not match ${schema.pattern}`;
    }
    if (Array.isArray(value)) {
      if (typeof schema.minItems === 'number' && value.length < schema.minItems) return `${at}: fewer than ${schema.minItems} items`;
      if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) return `${at}: more than ${schema.maxItems} items`;
      if (schema.items && typeof schema.items === 'object') {
        for (let i = 0; i < value.length; i++) {
          const e = this.check(schema.items as Schema, value[i], `${at}[${i}]`);
          if (e) return e;
        }
      }
    }
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const obj = value as Record<string, unknown>;
      for (const r of (schema.required as string[] | undefined) ?? []) if (!(r in obj)) return `${at}: ${r} is required`;
      const props = (schema.properties ?? {}) as Record<string, Schema>;
      for (const [k, v] of Object.entries(obj)) {
        if (props[k]) {
          const e = this.check(props[k], v, `${at}.${k}`);
          if (e) return e;
        } else if (schema.additionalProperties === false) {
          return `${at}: ${k} is not allowed`;
        } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
          const e = this.check(schema.additionalProperties as Schema, v, `${at}.${k}`);
          if (e) return e;
        }
      }
    }
    for (const s of (schema.allOf as Schema[] | undefined) ?? []) {
      const e = this.check(s, value, at);
      if (e) return e;
    }
    if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => !this.check(s as Schema, value, at))) return `${at}: matches none of anyOf`;
    if (Array.isArray(schema.oneOf)) {
      const fits = schema.oneOf.filter((s) => !this.check(s as Schema, value, at)).length;
      if (fits !== 1) {
        const why = schema.oneOf.map((s) => this.check(s as Schema, value, at)).join(' / ');
        return `${at}: matches ${fits} of oneOf (${why})`;
      }
    }
    if (schema.if && typeof schema.if === 'object') {
      const branch = !this.check(schema.if as Schema, value, at) ? schema.then : schema.else;
      if (branch && typeof branch === 'object') return this.check(branch as Schema, value, at);
    }
    return undefined;
  }
}

function typeOk(t: string, v: unknown): boolean {
  switch (t) {
    case 'null':
      return v === null;
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    case 'string':
      return typeof v === 'string';
    case 'boolean':
      return typeof v === 'boolean';
    case 'array':
      return Array.isArray(v);
    case 'object':
      return !!v && typeof v === 'object' && !Array.isArray(v);
    default:
      return false;
  }
}
