/**
 * FLV muxing shared by the flv-out (live players) and recorder (files) plugins.
 *
 * The muxer turns TrackInfo updates and AccessUnits into FLV tags, in two shapes:
 * - `push`: tags ({type, timestamp, body, keyframe}) whose body is written once, into a buffer with room for the
 *   11-byte tag header before it and the 4-byte PreviousTagSize after it, so `serializeTag` frames it for a file
 *   without copying the payload again (the recorder);
 * - `pushWire`: the unit's tags framed for the wire, where large NAL units and audio frames are ranges of the unit's
 *   own payload instead of copies (flv-out: the bus keeps a unit and its FLV form for as long as the GOP lives, so a
 *   copy would double the memory a GOP holds; and a player lays a unit out in one copy of its own anyway).
 *
 * Codecs: H.264 as classic AVC tags (codec id 7); H.265 as Enhanced FLV (`hvc1`), which ffmpeg before 6.1
 * cannot read; G.711A/U (SoundFormat 7/8) and AAC (10). Other audio codecs are not representable in FLV:
 * their units are skipped and counted.
 *
 * This module is the public entry; the code lives in:
 * - flv-tag.ts: FlvTag, the file header, tag header / PreviousTagSize, serializeTag, and the framed tag bodies;
 * - flv-amf.ts: the AMF0 onMetaData body;
 * - flv-muxer.ts: FlvMuxer (push, pushWire, configTags), on
 *   - flv-mux-state.ts: the state its halves share, timestamp clamping, onMetaData,
 *   - flv-video.ts: H.264/H.265 parameter sets, sequence headers (avcC/hvcC), planVideo, the video tag prefix,
 *   - flv-audio.ts: G.711 and AAC (raw or ADTS) tags;
 * - flv-wire.ts: WireUnit, wireParts, WIRE_VIEW_MIN.
 */
export { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, FLV_TAG_VIDEO, flvFileHeader, flvPrevTagSize, flvTagHeader, serializeTag } from './flv-tag';
export type { FlvTag } from './flv-tag';
export { encodeOnMetaData } from './flv-amf';
export type { AmfValue } from './flv-amf';
export { FlvMuxer } from './flv-muxer';
export type { FlvMuxerOptions, FlvMuxerStats } from './flv-muxer';
export { WIRE_VIEW_MIN, wireParts } from './flv-wire';
export type { WireUnit } from './flv-wire';
