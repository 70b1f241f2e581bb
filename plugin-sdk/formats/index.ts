/**
 * `plugin-sdk/formats`: the media formats a plugin may build on. Annex-B and NAL units, H.264/H.265 parameter sets
 * and decoder configuration records, FLV tags and the FLV muxer, MP4 boxes, and byte-order helpers.
 */
export * from './annexb';
export * from './byte-order';
export * from './h264';
export * from './h265';
export * from './mp4-box';
export * from './nal-index';
export * from './flv-form';
export { h264TestPattern } from './h264-pattern';
export type { H264TestPattern, H264TestPatternOptions } from './h264-pattern';
export {
  FLV_TAG_AUDIO,
  FLV_TAG_SCRIPT,
  FLV_TAG_VIDEO,
  PREV_SIZE_SIZE,
  TAG_HEADER_SIZE,
  flvFileHeader,
  flvPrevTagSize,
  flvTagHeader,
  serializeTag,
} from './flv-tag';
export type { FlvTag } from './flv-tag';
export { encodeOnMetaData } from './flv-amf';
export type { AmfValue } from './flv-amf';
export { FlvMuxer } from './flv-muxer';
export type { FlvMuxerOptions, FlvMuxerStats } from './flv-muxer';
export { WIRE_VIEW_MIN, wireParts } from './flv-wire';
export type { WireUnit } from './flv-wire';

// Importers read these on the media path: a plain object keeps each read a fast property load (see plugin-sdk/index.ts).
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
