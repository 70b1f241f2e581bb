/**
 * A small FLV demuxer for tests: parses the header and tags, checks the PreviousTagSize chain, classifies tags,
 * and turns AVC and Enhanced-FLV HEVC tags back into Annex-B, so ffprobe/ffmpeg can check what we muxed even
 * where they cannot read the container (Debian's ffmpeg 5.1 does not know Enhanced FLV).
 */

export interface FlvFileHeader {
  version: number;
  hasAudio: boolean;
  hasVideo: boolean;
  dataOffset: number;
}

export type TagCodec = 'h264' | 'h265' | 'aac' | 'g711a' | 'g711u' | 'script' | `video:${string}` | `audio:${number}`;

export interface ReadTag {
  type: 8 | 9 | 18;
  timestamp: number;
  /** offset of the tag header in the input */
  offset: number;
  body: Buffer;
  codec: TagCodec;
  /** FLV frame type 1 on a coded frame (not on a sequence header) */
  keyframe: boolean;
  /** AVC/AAC sequence header, or Enhanced SequenceStart */
  sequenceHeader: boolean;
  /** composition time offset, ms (0 for CodedFramesX and audio) */
  cts: number;
  /** video: Enhanced FLV (IsExHeader bit set) */
  enhanced: boolean;
  /** video: AVCPacketType or Enhanced VideoPacketType; audio: AACPacketType */
  packetType?: number;
  /** audio: the whole SoundFormat/rate/size/type byte */
  soundFlags?: number;
  /** the media data after the codec headers (NAL units with length prefixes, audio frame, AMF) */
  data: Buffer;
}

export interface ParsedFlv {
  header: FlvFileHeader;
  tags: ReadTag[];
  /** bytes after the last complete tag (only when allowTruncated) */
  trailing: number;
}

function classify(type: number, body: Buffer): Omit<ReadTag, 'type' | 'timestamp' | 'offset' | 'body'> {
  if (type === 18) {
    return { codec: 'script', keyframe: false, sequenceHeader: false, cts: 0, enhanced: false, data: body };
  }
  if (body.length < 1) throw new Error(`empty ${type === 8 ? 'audio' : 'video'} tag`);
  if (type === 8) {
    const fmt = body[0] >> 4;
    if (fmt === 10) {
      if (body.length < 2) throw new Error('AAC tag without AACPacketType');
      return {
        codec: 'aac',
        keyframe: false,
        sequenceHeader: body[1] === 0,
        cts: 0,
        enhanced: false,
        packetType: body[1],
        soundFlags: body[0],
        data: body.subarray(2),
      };
    }
    const codec: TagCodec = fmt === 7 ? 'g711a' : fmt === 8 ? 'g711u' : `audio:${fmt}`;
    return { codec, keyframe: false, sequenceHeader: false, cts: 0, enhanced: false, soundFlags: body[0], data: body.subarray(1) };
  }
  const enhanced = (body[0] & 0x80) !== 0;
  const frameType = (body[0] >> 4) & 0x07;
  if (enhanced) {
    if (body.length < 5) throw new Error('Enhanced video tag shorter than its header');
    const packetType = body[0] & 0x0f;
    const fourCC = body.toString('latin1', 1, 5);
    const codec: TagCodec = fourCC === 'hvc1' ? 'h265' : `video:${fourCC}`;
    let cts = 0;
    let at = 5;
    if (packetType === 1) {
      if (body.length < 8) throw new Error('Enhanced CodedFrames tag without its composition time');
      cts = body.readIntBE(5, 3);
      at = 8;
    }
    const seq = packetType === 0;
    return {
      codec,
      keyframe: !seq && frameType === 1,
      sequenceHeader: seq,
      cts,
      enhanced,
      packetType,
      data: body.subarray(at),
    };
  }
  const codecId = body[0] & 0x0f;
  if (codecId !== 7) {
    return { codec: `video:${codecId}`, keyframe: frameType === 1, sequenceHeader: false, cts: 0, enhanced, data: body.subarray(1) };
  }
  if (body.length < 5) throw new Error('AVC tag shorter than its header');
  const packetType = body[1];
  return {
    codec: 'h264',
    keyframe: packetType === 1 && frameType === 1,
    sequenceHeader: packetType === 0,
    cts: body.readIntBE(2, 3),
    enhanced,
    packetType,
    data: body.subarray(5),
  };
}

/**
 * Parses a whole FLV file or stream capture. Throws on a bad signature or a broken PreviousTagSize chain.
 * With allowTruncated, an incomplete last tag (a capture cut mid-tag) is ignored instead of being an error.
 */
export function parseFlv(buf: Buffer, opts: { allowTruncated?: boolean } = {}): ParsedFlv {
  if (buf.length < 13 || buf.toString('latin1', 0, 3) !== 'FLV') throw new Error('not an FLV stream (no FLV signature)');
  const dataOffset = buf.readUInt32BE(5);
  if (dataOffset < 9 || dataOffset + 4 > buf.length) throw new Error(`bad FLV DataOffset ${dataOffset}`);
  const header: FlvFileHeader = {
    version: buf[3],
    hasAudio: (buf[4] & 0x04) !== 0,
    hasVideo: (buf[4] & 0x01) !== 0,
    dataOffset,
  };
  if (buf.readUInt32BE(dataOffset) !== 0) throw new Error('PreviousTagSize0 is not 0');
  const tags: ReadTag[] = [];
  let at = dataOffset + 4;
  while (at < buf.length) {
    if (at + 11 > buf.length) break;
    const type = buf[at];
    const size = buf.readUIntBE(at + 1, 3);
    if (at + 11 + size + 4 > buf.length) break;
    if (type !== 8 && type !== 9 && type !== 18) throw new Error(`unknown FLV tag type ${type} at offset ${at}`);
    const timestamp = (buf.readUIntBE(at + 4, 3) | (buf[at + 7] << 24)) >>> 0;
    const prev = buf.readUInt32BE(at + 11 + size);
    if (prev !== 11 + size) throw new Error(`PreviousTagSize ${prev} after the tag at offset ${at} should be ${11 + size}`);
    const body = buf.subarray(at + 11, at + 11 + size);
    tags.push({ type, timestamp, offset: at, body, ...classify(type, body) });
    at += 11 + size + 4;
  }
  if (at < buf.length && !opts.allowTruncated) throw new Error(`FLV ends inside a tag at offset ${at}`);
  return { header, tags, trailing: buf.length - at };
}

/** NAL units of a length-prefixed payload (4-byte lengths unless said otherwise). */
export function splitLengthPrefixed(data: Buffer, lengthSize = 4): Buffer[] {
  const nals: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    if (at + lengthSize > data.length) throw new Error('truncated NAL length');
    const len = data.readUIntBE(at, lengthSize);
    at += lengthSize;
    if (at + len > data.length) throw new Error(`NAL length ${len} runs past the tag`);
    nals.push(data.subarray(at, at + len));
    at += len;
  }
  return nals;
}

export interface DecoderConfig {
  lengthSize: number;
  /** parameter sets in the order they should precede a frame (VPS, SPS, PPS / SPS, PPS) */
  parameterSets: Buffer[];
}

export function parseAvcC(rec: Buffer): DecoderConfig {
  if (rec.length < 7 || rec[0] !== 1) throw new Error('bad AVCDecoderConfigurationRecord');
  const lengthSize = (rec[4] & 3) + 1;
  const sets: Buffer[] = [];
  let at = 5;
  const nSps = rec[at++] & 0x1f;
  for (let i = 0; i < nSps; i++) {
    const len = rec.readUInt16BE(at);
    sets.push(rec.subarray(at + 2, at + 2 + len));
    at += 2 + len;
  }
  const nPps = rec[at++];
  for (let i = 0; i < nPps; i++) {
    const len = rec.readUInt16BE(at);
    sets.push(rec.subarray(at + 2, at + 2 + len));
    at += 2 + len;
  }
  if (at > rec.length) throw new Error('AVCDecoderConfigurationRecord runs past its tag');
  return { lengthSize, parameterSets: sets };
}

export function parseHvcC(rec: Buffer): DecoderConfig & { profileIdc: number; levelIdc: number; chromaFormat: number } {
  if (rec.length < 23 || rec[0] !== 1) throw new Error('bad HEVCDecoderConfigurationRecord');
  const lengthSize = (rec[21] & 3) + 1;
  const sets: Buffer[] = [];
  const arrays = rec[22];
  let at = 23;
  for (let i = 0; i < arrays; i++) {
    at += 1;
    const n = rec.readUInt16BE(at);
    at += 2;
    for (let j = 0; j < n; j++) {
      const len = rec.readUInt16BE(at);
      sets.push(rec.subarray(at + 2, at + 2 + len));
      at += 2 + len;
    }
  }
  if (at > rec.length) throw new Error('HEVCDecoderConfigurationRecord runs past its tag');
  return { lengthSize, parameterSets: sets, profileIdc: rec[1] & 0x1f, levelIdc: rec[12], chromaFormat: rec[16] & 3 };
}

const START = Buffer.from([0, 0, 0, 1]);

/**
 * Annex-B of the video tags of one codec (h264 or h265), each frame preceded by the parameter sets of the
 * latest sequence header when it is a keyframe or the first frame after a new header.
 */
export function videoAnnexB(tags: ReadTag[], codec: 'h264' | 'h265'): { annexB: Buffer; frames: number } {
  const parts: Buffer[] = [];
  let config: DecoderConfig | undefined;
  let fresh = false;
  let frames = 0;
  for (const t of tags) {
    if (t.type !== 9 || t.codec !== codec) continue;
    if (t.sequenceHeader) {
      config = codec === 'h264' ? parseAvcC(t.data) : parseHvcC(t.data);
      fresh = true;
      continue;
    }
    if (codec === 'h264' && t.packetType !== 1) continue;
    if (codec === 'h265' && t.packetType !== 1 && t.packetType !== 3) continue;
    if (!config) throw new Error(`${codec} frame at ${t.timestamp} ms before any sequence header`);
    if (fresh || t.keyframe) {
      for (const ps of config.parameterSets) parts.push(START, ps);
      fresh = false;
    }
    for (const nal of splitLengthPrefixed(t.data, config.lengthSize)) parts.push(START, nal);
    frames++;
  }
  return { annexB: Buffer.concat(parts), frames };
}

/** Decodes an onMetaData script tag (AMF0 string + ECMA array or object) into a plain object. */
export function decodeScriptTag(body: Buffer): { name: string; props: Record<string, unknown> } {
  let at = 0;
  const str = (): string => {
    const len = body.readUInt16BE(at);
    const s = body.toString('utf8', at + 2, at + 2 + len);
    at += 2 + len;
    return s;
  };
  const value = (): unknown => {
    const marker = body[at++];
    switch (marker) {
      case 0x00: {
        const v = body.readDoubleBE(at);
        at += 8;
        return v;
      }
      case 0x01:
        return body[at++] !== 0;
      case 0x02:
        return str();
      case 0x03:
      case 0x08: {
        if (marker === 0x08) at += 4;
        const o: Record<string, unknown> = {};
        for (;;) {
          const k = str();
          if (k === '' && body[at] === 0x09) {
            at++;
            return o;
          }
          o[k] = value();
        }
      }
      case 0x05:
        return null;
      default:
        throw new Error(`AMF0 marker ${marker} not supported by the test reader`);
    }
  };
  const name = value();
  if (typeof name !== 'string') throw new Error('script tag does not start with a name');
  const props = value();
  return { name, props: (props ?? {}) as Record<string, unknown> };
}
