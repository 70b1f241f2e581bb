/**
 * A generic client driven by the OpenAPI document, as a generated one would be: calls go by operationId, the method,
 * path and parameters come from the document, the request body is checked against the documented schema before it
 * is sent (unless asked not to, to send what the document forbids), and every answer is checked against the response
 * schema documented for its HTTP status. A mismatch throws, naming the operation and the first violation.
 */
import { SchemaChecker } from './schema-check';

export interface CallOptions {
  query?: Record<string, string | number>;
  body?: unknown;
  path?: Record<string, string>;
  /** 'user:password', or null for none */
  auth?: string | null;
  /** false: send a body the document rejects (an error case) */
  validate?: boolean;
}

export interface CallResult {
  status: number;
  contentType: string;
  json: any;
  text: string;
}

export class DocClient {
  readonly schemas: SchemaChecker;

  constructor(
    readonly baseUrl: string,
    readonly doc: Record<string, any>,
    readonly defaultAuth: string,
  ) {
    this.schemas = new SchemaChecker(doc);
  }

  operation(operationId: string): { method: string; path: string; op: Record<string, any> } {
    for (const [path, item] of Object.entries(this.doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(item)) if (op.operationId === operationId) return { method: method.toUpperCase(), path, op };
    }
    throw new Error(`the document has no operation ${operationId}`);
  }

  /** the documented request body schema's verdict on a body (undefined: accepted) */
  requestProblem(operationId: string, body: unknown): string | undefined {
    const { op } = this.operation(operationId);
    const schema = op.requestBody?.content?.['application/json']?.schema;
    if (!schema) throw new Error(`${operationId} documents no JSON body`);
    return this.schemas.check(schema, body);
  }

  async call(operationId: string, o: CallOptions = {}): Promise<CallResult> {
    const { method, path, op } = this.operation(operationId);
    let url = path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const v = o.path?.[name];
      if (v === undefined) throw new Error(`${operationId}: path parameter ${name} missing`);
      return v;
    });
    const params = (op.parameters ?? []) as Array<{ name: string; in: string; required?: boolean; schema: Record<string, unknown> }>;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(o.query ?? {})) {
      if (!params.some((p) => p.in === 'query' && p.name === k)) throw new Error(`${operationId}: the document has no query parameter ${k}`);
      q.set(k, String(v));
    }
    for (const p of params) if (p.in === 'query' && p.required && !q.has(p.name)) throw new Error(`${operationId}: query parameter ${p.name} is required`);
    if (q.size) url += `?${q}`;
    if (o.body !== undefined && o.validate !== false) {
      const problem = this.requestProblem(operationId, o.body);
      if (problem) throw new Error(`${operationId}: the document rejects this body: ${problem}`);
    }
    const auth = o.auth === undefined ? this.defaultAuth : o.auth;
    const headers: Record<string, string> = {};
    if (auth) headers.Authorization = `Basic ${Buffer.from(auth).toString('base64')}`;
    if (o.body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(this.baseUrl + url, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
    const text = await res.text();
    const contentType = res.headers.get('content-type') ?? '';
    const json = contentType.startsWith('application/json') ? JSON.parse(text) : undefined;
    const documented = op.responses?.[String(res.status)] ?? op.responses?.default;
    if (!documented) throw new Error(`${operationId}: HTTP ${res.status} is not documented (${text.slice(0, 200)})`);
    const schema = documented.content?.['application/json']?.schema;
    if (schema && json !== undefined) {
      const problem = this.schemas.check(schema, json);
      if (problem) throw new Error(`${operationId}: the HTTP ${res.status} answer does not match the document: ${problem}; answer ${text.slice(0, 300)}`);
    }
    return { status: res.status, contentType, json, text };
  }
}
