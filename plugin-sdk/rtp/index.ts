/**
 * RTP as a bus format, for outputs that send RTP (rtsp-out, webrtc, a third party's): one encoder per stream
 * packetises each unit once (RFC 6184 H.264, RFC 7798 H.265, RFC 3551 G.711, RFC 3640 AAC) for every reader.
 */
export { createRtpFormat, audioPayloadType, RTP_AUDIO_CODECS, VIDEO_CLOCK, VIDEO_PT } from './rtp-format';
export type { RtpFormatHooks } from './rtp-format';
export { Packetizer } from './packetizer';
export { RtpUnit, VIDEO, AUDIO } from './rtp-unit';
export type { RtpTrackState } from './packetizer';
export type { TrackIndex } from './rtp-unit';

// A plain copy keeps each importer's read a fast property load (see plugin-sdk/index.ts).
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
