/**
 * The FLV muxer's video half: H.264 as classic AVC tags (codec id 7), H.265 as Enhanced FLV (`hvc1`). Tracks the
 * parameter sets, builds the sequence headers (AVCDecoderConfigurationRecord / HEVCDecoderConfigurationRecord),
 * and plans each unit's tag (planVideo) for FlvMuxer to lay out. Internal to formats/flv.
 */
import type { AccessUnit, VideoTrackInfo } from '../media';
import { h264NalType, h265NalType } from './annexb';
import { buildAvcC, parseH264Sps } from './h264';
import { buildHvcC, parseH265Sps } from './h265';
import { allocBody, FLV_TAG_VIDEO, type FlvTag } from './flv-tag';
import { keptCopy } from '../kept-bytes';
import { clampTs, emitMeta, ENHANCED_HEVC_FOURCC, sameBuf, type MuxState, type VideoPlan, type VideoState } from './flv-mux-state';
import { writeI24BE } from './byte-order';

export function setVideo(m: MuxState, info: VideoTrackInfo): void {
  let v = m.video;
  if (!v || v.codec !== info.codec) {
    // every field from the start: streams whose states gained fields in different orders made these loads polymorphic
    v = {
      codec: info.codec,
      sps: undefined,
      pps: undefined,
      vps: undefined,
      width: undefined,
      height: undefined,
      sizeGiven: false,
      frameRate: undefined,
      configDirty: true,
      seqHeader: undefined,
      started: false,
      lastTs: v?.lastTs ?? 0,
    };
    m.video = v;
    m.metaDirty = true;
  }
  if (info.width !== undefined && info.height !== undefined) {
    if (info.width !== v.width || info.height !== v.height) m.metaDirty = true;
    v.width = info.width;
    v.height = info.height;
    v.sizeGiven = true;
  }
  if (info.frameRate !== undefined && info.frameRate !== v.frameRate) {
    v.frameRate = info.frameRate;
    m.metaDirty = true;
  }
  updateParams(v, info.sps, info.pps, info.vps);
}

/** Parameter sets that changed are copied: they may be views of a payload whose memory is reused. */
function updateParams(v: VideoState, sps?: Buffer, pps?: Buffer, vps?: Buffer): void {
  if (sps && !sameBuf(sps, v.sps)) {
    v.sps = keptCopy(sps);
    v.configDirty = true;
  }
  if (pps && !sameBuf(pps, v.pps)) {
    v.pps = keptCopy(pps);
    v.configDirty = true;
  }
  if (vps && !sameBuf(vps, v.vps)) {
    v.vps = keptCopy(vps);
    v.configDirty = true;
  }
}

/** Everything about a video unit but its body: parameter sets, config tags, timestamps, the NAL units kept. */
export function planVideo(m: MuxState, au: AccessUnit): VideoPlan | undefined {
  const codec = au.codec;
  if (codec !== 'h264' && codec !== 'h265') {
    m.counters.droppedVideo++;
    return undefined;
  }
  let v = m.video;
  if (!v || v.codec !== codec) {
    setVideo(m, { kind: 'video', codec });
    v = m.video!;
  }
  const hevc = codec === 'h265';
  const payload = au.payload;
  const all = m.nals;
  const p = m.plan;
  const kept = p.kept;
  kept.clear();
  let keptBytes = 0;
  let idr = false;
  let sps: Buffer | undefined, pps: Buffer | undefined, vps: Buffer | undefined;
  for (let i = 0, n = all.of(au); i < n; i++) {
    const from = all.start(i);
    const to = all.end(i);
    if (hevc) {
      const t = h265NalType(payload, from);
      if (t === 32) {
        vps = payload.subarray(from, to);
        continue;
      }
      if (t === 33) {
        sps = payload.subarray(from, to);
        continue;
      }
      if (t === 34) {
        pps = payload.subarray(from, to);
        continue;
      }
      if (t === 35) continue; // AUD
      if (t >= 16 && t <= 23) idr = true; // IRAP
    } else {
      const t = h264NalType(payload, from);
      if (t === 7) {
        sps = payload.subarray(from, to);
        continue;
      }
      if (t === 8) {
        pps = payload.subarray(from, to);
        continue;
      }
      if (t === 9) continue; // AUD
      if (t === 5) idr = true;
    }
    kept.push(from, to);
    keptBytes += 4 + to - from;
  }
  updateParams(v, sps, pps, vps);
  const ready = hevc ? !!(v.vps && v.sps && v.pps) : !!(v.sps && v.pps);
  const key = au.keyframe || idr;
  if (!ready || (!v.started && !key) || kept.count === 0) {
    if (kept.count > 0) m.counters.droppedVideo++;
    return undefined;
  }
  const ts = clampTs(m, v, au.dts);
  let out: FlvTag[] | undefined;
  if (v.configDirty) {
    let seq: FlvTag;
    try {
      seq = videoSeqHeader(v, ts);
    } catch {
      // An SPS we cannot parse would make every later frame undecodable too: drop until a good one arrives.
      v.sps = undefined;
      m.counters.droppedVideo++;
      return undefined;
    }
    v.configDirty = false;
    v.seqHeader = seq;
    sizeFromSps(m, v);
    out = emitMeta(m, undefined);
    if (out === undefined) out = [seq];
    else out.push(seq);
  } else {
    out = emitMeta(m, undefined);
  }
  v.started = true;
  m.counters.videoTags++;
  p.out = out;
  p.ts = ts;
  p.cts = Math.max(-0x800000, Math.min(0x7fffff, Math.round(au.pts) - ts));
  p.key = key;
  p.hevc = hevc;
  p.keptBytes = keptBytes;
  return p;
}

/** onMetaData's width/height from the SPS (again on each new SPS) when the track info did not give them. */
function sizeFromSps(m: MuxState, v: VideoState): void {
  if (v.sizeGiven) return;
  try {
    const info = v.codec === 'h265' ? parseH265Sps(v.sps!) : parseH264Sps(v.sps!);
    if (info.width === v.width && info.height === v.height) return;
    v.width = info.width;
    v.height = info.height;
    m.metaDirty = true;
  } catch {
    // the size is only informative here; decoders read it from the sequence header
  }
}

function videoSeqHeader(v: VideoState, ts: number): FlvTag {
  let body: Buffer;
  if (v.codec === 'h265') {
    const rec = buildHvcC(v.vps!, v.sps!, v.pps!);
    body = allocBody(5 + rec.length);
    body[0] = 0x80 | (1 << 4) | 0; // IsExHeader | key frame | SequenceStart
    ENHANCED_HEVC_FOURCC.copy(body, 1);
    rec.copy(body, 5);
  } else {
    const rec = buildAvcC(v.sps!, v.pps!);
    body = allocBody(5 + rec.length);
    body[0] = 0x17;
    body[1] = 0; // AVC sequence header
    body.writeUIntBE(0, 2, 3);
    rec.copy(body, 5);
  }
  return { type: FLV_TAG_VIDEO, timestamp: ts, body, keyframe: false };
}

/** Bytes of a video tag body before its NAL units: the AVC header, or the Enhanced one with its FourCC (and CTS). */
export function videoPrefixSize(p: VideoPlan): number {
  return p.hevc && p.cts !== 0 ? 8 : 5;
}

export function writeVideoPrefix(b: Buffer, at: number, p: VideoPlan): number {
  const frameType = p.key ? 1 : 2;
  if (p.hevc) {
    const withCts = p.cts !== 0;
    b[at] = 0x80 | (frameType << 4) | (withCts ? 1 : 3); // IsExHeader | FrameType | CodedFrames(X)
    ENHANCED_HEVC_FOURCC.copy(b, at + 1);
    if (!withCts) return at + 5;
    writeI24BE(b, p.cts, at + 5);
    return at + 8;
  }
  b[at] = (frameType << 4) | 7;
  b[at + 1] = 1; // AVC NALU
  writeI24BE(b, p.cts, at + 2);
  return at + 5;
}
