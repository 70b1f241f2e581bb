/**
 * The OpenAPI 3.1 document of the API port: the kernel's routes (core-api.ts) and what plugins described through
 * the API_DOCS service, put together at each request (plugins describe their routes during setup, after this one).
 */
import type { ApiDescription, ApiDocs, JsonSchema } from '../../../plugin-sdk';
import { coreApi } from './core-api';
import { sharedSchemas } from './openapi-parts';

export interface DocumentInfo {
  version: string;
  siteName: string;
}

export class ApiDocRegistry implements ApiDocs {
  private readonly byOwner = new Map<string, ApiDescription>();

  /** `openRequest`: the open body's schema, as the sessions generate it from their field tables */
  constructor(private readonly openRequest: JsonSchema) {}

  describe(d: ApiDescription): void {
    this.byOwner.set(d.owner, d);
  }

  document(info: DocumentInfo): Record<string, unknown> {
    const all = [coreApi(this.openRequest), ...this.byOwner.values()];
    const paths: Record<string, Record<string, unknown>> = {};
    const schemas: Record<string, JsonSchema> = { ...sharedSchemas() };
    for (const d of all) {
      for (const [p, item] of Object.entries(d.paths)) {
        const current = paths[p] ?? {};
        for (const method of Object.keys(item)) {
          // two owners documenting one operation is a bug in one of them: fail the document loudly rather than hide one
          if (current[method]) throw new Error(`api docs: ${method.toUpperCase()} ${p} described by two plugins (${d.owner})`);
        }
        paths[p] = { ...current, ...item };
      }
      for (const [name, s] of Object.entries(d.schemas ?? {})) {
        if (schemas[name] && schemas[name] !== s) throw new Error(`api docs: schema ${name} described twice (${d.owner})`);
        schemas[name] = s;
      }
    }
    return {
      openapi: '3.1.0',
      info: {
        title: 'JT/T 1078 media gateway API',
        version: info.version,
        description:
          `The REST API of the API port (strm-api 3.4.4 and the gateway's own routes) on site \`${info.siteName}\`. ` +
          'Every JSON reply is the envelope `{errCode, message, data, count}`; business errors keep HTTP 200 and are told by errCode ' +
          '(see the ErrCode schema). Generated from the validation rules the server runs.',
      },
      servers: [{ url: '/' }],
      tags: all.map((d) => ({ name: d.owner, description: d.summary ?? `Routes of plugin ${d.owner}` })),
      paths,
      components: {
        schemas,
        securitySchemes: { basicAuth: { type: 'http', scheme: 'basic', description: 'The Basic credentials of a site application.' } },
      },
      security: [{ basicAuth: [] }],
    };
  }
}
