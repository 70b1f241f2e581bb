/**
 * `plugin-sdk/router`: what a connection router module may use (PluginDefinition.routers). With several workers the
 * primary process loads a router module alone, to say which worker a new connection goes to, and must not load the
 * plugin, the rest of the SDK or their dependencies: this entry point loads only the modules it names here.
 */
export { channelKey, streamKey } from '../cluster';
export type { ConnectionRouter, RouteDecision } from '../cluster';
export { normaliseSim, SIM_PATTERN } from '../sim';
export { readU16BE, readU32BE } from '../formats/byte-order';

// A plain copy keeps each importer's read a fast property load (see plugin-sdk/index.ts).
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
