/**
 * Types for the two node-media-server 4.4.3 modules flv-out loads (CommonJS, untyped). The version is pinned in
 * package.json: these are internals, not a public API, and change between releases.
 */

declare module 'node-media-server/src/protocol/flv.js' {
  class Flv {
    /** the 9-byte FLV file header with its audio/video flags, followed by PreviousTagSize0 (13 bytes in all) */
    static createHeader(hasAudio: boolean, hasVideo: boolean): Buffer;
  }
  export = Flv;
}

declare module 'node-media-server/src/protocol/amf.js' {
  type AmfScalar = number | boolean | string | null;
  /** an AMF0 data message: the command's name, then its fields (for onMetaData, `dataObj` as an AMF0 object) */
  export function encodeAmf0Data(opt: { cmd: string; dataObj?: Record<string, AmfScalar> }): Buffer;
}
