/**
 * What flv-out takes from node-media-server: the FLV file header (`Flv.createHeader`) and the AMF0 encoder that
 * writes onMetaData (`encodeAmf0Data`). Both are pure functions that run once per stream configuration, not per
 * unit. These modules log only on paths not taken here (unknown commands, parsing), and nothing here touches
 * NMS's process-wide logger or context: any number of gateways can share the process.
 */
import NmsFlv = require('node-media-server/src/protocol/flv.js');
import nmsAmf = require('node-media-server/src/protocol/amf.js');
import type { AmfValue } from '../../../plugin-sdk/formats';

/** FLV file header and PreviousTagSize0, 13 bytes; the flags tell players (mpegts.js, flv.js) which tracks come */
export function flvHeader(hasAudio: boolean, hasVideo: boolean): Buffer {
  return NmsFlv.createHeader(hasAudio, hasVideo);
}

/**
 * The onMetaData script tag body: the name, then the properties as an AMF0 object. NMS writes a string's length
 * as its count of UTF-16 units, so only ASCII values are safe: the muxer's are (codec ids, sizes, 'jt1078-gateway').
 */
export function onMetaDataBody(props: Record<string, AmfValue>): Buffer {
  return nmsAmf.encodeAmf0Data({ cmd: 'onMetaData', dataObj: props });
}
