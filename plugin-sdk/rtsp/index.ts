/** RTSP 1.0 on the wire, for RTSP servers and clients (rtsp-out, rtsp-source, a third party's). */
export { RtspReader, RtspHeaders } from './wire';
export type { RtspItem, RtspRequest, RtspResponse, RtspReaderOptions } from './wire';
export { STATUS_TEXT, serializeResponse, serializeRequest, cseqOf, parseSessionHeader, sessionIdOf, parseTransports, parseRtpInfo } from './headers';
export type { TransportSpec } from './headers';

// A plain copy keeps each importer's read a fast property load (see plugin-sdk/index.ts).
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- module.exports is typed any; the copy is the same names
module.exports = { __esModule: true, ...module.exports };
