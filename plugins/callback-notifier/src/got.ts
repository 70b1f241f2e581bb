/**
 * got 14 is ESM-only. Node >= 20.19 (package.json engines) loads an ESM package with require() when it has no
 * top-level await, which got has not, so a plain require works from our CommonJS output; no dynamic-import trick.
 * The types come from got's own declaration file: `moduleResolution: node` ignores package exports, so the
 * bare 'got' specifier has no types for tsc, while the file path resolves.
 */
import type * as GotModule from 'got/dist/source/index.js';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- got is ESM-only: require() loads it from CommonJS (see above)
const gotModule = require('got') as typeof GotModule;

export const got: GotModule.Got = gotModule.got;
export type { Got, Response, RequestError } from 'got/dist/source/index.js';
