/**
 * RTMP as a bus format: one encoder per stream turns each unit into its RTMP messages once, chunked, for every RTMP
 * player of the stream. An RTMP message is an FLV tag's body under a chunk header, so the FLV muxer makes the tags
 * (sequence headers, onMetaData, H.265 as Enhanced RTMP `hvc1`): a unit's media tag is chunked straight from the
 * muxer's wire form (wire-message.ts), the rare config tags by node-media-server's `chunksCreate`.
 *
 * Every player gets the same bytes, so they carry what every player shares: message stream id 1 (the id a client's
 * first createStream gets), chunk size 65,535 (what every connection announces at connect, as NMS does), and
 * timestamps of the stream's timeline (absolute, chunk type 0 each time: a player starts at whatever time its first
 * message says).
 */
import NmsRtmp = require('node-media-server/src/protocol/rtmp.js');
import { defineFormat, type AccessUnit, type FormatEncoder, type StreamInfo, type TrackInfo, type UnitFormat } from '../../../plugin-sdk';
import { FLV_TAG_AUDIO, FLV_TAG_SCRIPT, FLV_TAG_VIDEO, PREV_SIZE_SIZE, TAG_HEADER_SIZE, type FlvTag } from '../../../plugin-sdk/formats';
import { FlvMuxer } from '../../../plugin-sdk/formats';
import { wireParts } from '../../../plugin-sdk/formats';
import { wireMessage } from './wire-message';
import type { AudioCodec } from '../../../plugin-sdk';

/** the message stream id of the shared bytes (see above) */
export const MEDIA_STREAM_ID = 1;
const CHUNK_STREAM: Record<number, number> = { [FLV_TAG_AUDIO]: 4, [FLV_TAG_VIDEO]: 5, [FLV_TAG_SCRIPT]: 6 };

/** A unit's RTMP messages, shared by every RTMP player of its stream. */
export interface RtmpFrame {
  /** the config messages that changed with this unit (sequence headers, onMetaData), then the unit's own */
  readonly bytes: Buffer;
  /** where the unit's own messages start in `bytes` */
  readonly mediaAt: number;
  /** the stream's configuration version after this unit (see FlvFrame.version in flv-out: same idea) */
  readonly version: number;
  /** start points (video key frames; audio of a stream without video): everything a player starting here needs first */
  readonly init: Buffer | undefined;
  /** H.265 video: only Enhanced RTMP clients read it */
  readonly hevc: boolean;
  readonly video: boolean;
}

/** One tag as an RTMP message, chunked. */
export function messageOf(tag: FlvTag, streamId = MEDIA_STREAM_ID): Buffer {
  return NmsRtmp.chunksCreate({
    header: { fmt: 0, cid: CHUNK_STREAM[tag.type] ?? 6, timestamp: tag.timestamp, length: tag.body.length, type: tag.type, stream_id: streamId },
    payload: tag.body,
  });
}

function messagesOf(tags: FlvTag[]): Buffer {
  return tags.length === 1 ? messageOf(tags[0]) : Buffer.concat(tags.map((t) => messageOf(t)));
}

/** whole FLV tags back to back (header, body, PreviousTagSize each) as the muxer's tags */
function tagsOf(flv: Buffer): FlvTag[] {
  const out: FlvTag[] = [];
  for (let at = 0; at + TAG_HEADER_SIZE <= flv.length;) {
    const size = flv.readUIntBE(at + 1, 3);
    const timestamp = flv.readUIntBE(at + 4, 3) + flv[at + 7] * 0x1000000;
    out.push({ type: flv[at] as FlvTag['type'], timestamp, body: flv.subarray(at + TAG_HEADER_SIZE, at + TAG_HEADER_SIZE + size), keyframe: false });
    at += TAG_HEADER_SIZE + size + PREV_SIZE_SIZE;
  }
  return out;
}

export interface RtmpFormatHooks {
  audioCodecs: readonly AudioCodec[];
  /** a stream's encoder started (+1) or stopped (-1) */
  encoders(delta: 1 | -1): void;
  /** messages made, once per stream */
  messages(n: number): void;
}

class RtmpEncoder implements FormatEncoder<RtmpFrame> {
  private readonly muxer: FlvMuxer;
  private version = 0;
  private init: Buffer | undefined;
  private initVersion = -1;
  private hevc = false;
  private closed = false;

  constructor(
    private readonly h: RtmpFormatHooks,
    private readonly only: 'video' | 'audio' | undefined,
    private readonly counted: boolean,
  ) {
    this.muxer = new FlvMuxer({ audioCodecs: h.audioCodecs });
    if (counted) h.encoders(1);
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    for (const t of list) {
      // a track this form leaves out is not announced either (onMetaData says only what comes)
      if (this.only !== undefined && t.kind !== this.only) continue;
      this.muxer.setTrack(t);
      if (t.kind === 'video') this.hevc = t.codec === 'h265';
    }
  }

  encode(unit: AccessUnit): RtmpFrame | undefined {
    if (this.only !== undefined && unit.kind !== this.only) return undefined;
    const w = this.muxer.pushWire(unit);
    if (w === undefined) return undefined;
    let own = wireMessage(w, CHUNK_STREAM[w.mediaType], MEDIA_STREAM_ID);
    if (own === undefined) {
      const parts: Buffer[] = [];
      wireParts(w, (b) => parts.push(b));
      own = messagesOf(tagsOf(Buffer.concat(parts)));
    }
    const config = w.config;
    if (config !== undefined) this.version++;
    const bytes = config !== undefined ? Buffer.concat([messagesOf(config.flatMap(tagsOf)), own]) : own;
    const mediaAt = bytes.length - own.length;
    if (this.counted) this.h.messages((config?.length ?? 0) + w.mediaTags);
    const start = w.keyframe || (unit.kind === 'audio' && !this.muxer.hasVideo);
    return { bytes, mediaAt, version: this.version, init: start ? this.initAt(w.timestamp) : undefined, hevc: this.hevc, video: unit.kind === 'video' };
  }

  catchUp(units: ReadonlyArray<AccessUnit>, tracks: ReadonlyArray<TrackInfo>): Array<RtmpFrame | undefined> {
    const e = new RtmpEncoder(this.h, this.only, false);
    e.tracks(tracks);
    return units.map((u) => e.encode(u));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.counted) this.h.encoders(-1);
  }

  private initAt(timestamp: number): Buffer {
    if (this.init !== undefined && this.initVersion === this.version) return this.init;
    this.init = messagesOf(this.muxer.configTags(timestamp));
    this.initVersion = this.version;
    return this.init;
  }
}

export interface RtmpFormats {
  av: UnitFormat<RtmpFrame>;
  v: UnitFormat<RtmpFrame>;
  a: UnitFormat<RtmpFrame>;
}

/** The RTMP formats of one rtmp plugin instance (compared by identity: each gateway has its own). */
export function createRtmpFormats(hooks: RtmpFormatHooks): RtmpFormats {
  const make = (name: string, only?: 'video' | 'audio') => defineFormat<RtmpFrame>(name, (_stream: StreamInfo) => new RtmpEncoder(hooks, only, true));
  return { av: make('rtmp'), v: make('rtmp-video', 'video'), a: make('rtmp-audio', 'audio') };
}
