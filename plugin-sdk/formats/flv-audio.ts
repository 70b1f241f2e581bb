/**
 * The FLV muxer's audio half: G.711A/U (SoundFormat 7/8) and AAC (10), raw or ADTS. Other audio codecs are not
 * representable in FLV: their units are skipped and counted. Internal to formats/flv.
 */
import type { AccessUnit, AudioCodec, AudioTrackInfo } from '../media';
import type { BufferSlab } from '../buffer-slab';
import { writeU32BE } from './byte-order';
import { allocBody, FLV_TAG_AUDIO, PREV_SIZE_SIZE, TAG_HEADER_SIZE, writeTagHeader, type FlvTag } from './flv-tag';
import { clampTs, emitMeta, flagsOf, sameBuf, type AudioState, type MuxState } from './flv-mux-state';
import { bytesOf, configOf, WIRE_VIEW_MIN, wireOfTags, type WireUnit } from './flv-wire';
import { Buffer } from 'node:buffer';

const AAC_SAMPLE_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

export function setAudio(m: MuxState, info: AudioTrackInfo): void {
  const a = m.audio;
  if (!a || a.codec !== info.codec || a.sampleRate !== info.sampleRate || a.channels !== info.channels) {
    m.audio = {
      codec: info.codec,
      sampleRate: info.sampleRate,
      channels: info.channels,
      config: info.config,
      configDirty: true,
      seqHeader: undefined,
      lastTs: a?.lastTs ?? 0,
    };
    m.metaDirty = true;
  } else if (info.config && !sameBuf(info.config, a.config)) {
    a.config = info.config;
    a.configDirty = true;
  }
}

/** the audio state for a unit of `codec`: a unit of another codec than the track's starts a track of its own */
function stateFor(m: MuxState, codec: AudioCodec): AudioState {
  const a = m.audio;
  if (a && a.codec === codec) return a;
  setAudio(m, { kind: 'audio', codec, sampleRate: codec === 'aac' ? 0 : 8000, channels: 1 });
  return m.audio!;
}

export function pushAudio(m: MuxState, au: AccessUnit): FlvTag[] {
  const codec = au.codec as AudioCodec;
  const a = stateFor(m, codec);
  const flags = flagsOf(m, a);
  if (flags === undefined) return skipAudio(m, codec);
  if (codec === 'aac') return pushAac(m, a, au);
  if (au.payload.length === 0) return [];
  const ts = clampTs(m, a, au.dts);
  const out: FlvTag[] = [];
  emitMeta(m, out);
  const body = m.slab.allocBody(1 + au.payload.length);
  body[0] = flags;
  au.payload.copy(body, 1);
  out.push({ type: FLV_TAG_AUDIO, timestamp: ts, body, keyframe: false });
  m.counters.audioTags++;
  return out;
}

/**
 * The same tags as pushAudio, framed for the wire (FlvMuxer.pushWire): the tag header and the body's first bytes in
 * `small`, the frame itself a range of the unit's payload (from WIRE_VIEW_MIN bytes: G.711's 160, AAC's few hundred),
 * so the form made of it copies a few bytes, not the frame, and the frame is copied once, into what a player
 * writes. A packet of ADTS frames goes the tag way (several tags; the bus's units are raw frames, so it is rare).
 */
export function pushAudioWire(m: MuxState, au: AccessUnit, small: BufferSlab): WireUnit | undefined {
  const codec = au.codec as AudioCodec;
  const p = au.payload;
  if (codec === 'aac' && isAdts(p)) return wireOfTags(pushAudio(m, au), p);
  const a = stateFor(m, codec);
  const flags = flagsOf(m, a);
  if (flags === undefined) {
    skipAudio(m, codec);
    return undefined;
  }
  if (p.length === 0) return undefined;
  const aac = codec === 'aac';
  if (aac && !a.config) {
    skipAudio(m, 'aac');
    return undefined;
  }
  const ts = clampTs(m, a, au.dts);
  let config = emitMeta(m, undefined);
  if (aac && a.configDirty) (config ??= []).push(aacSequenceHeader(a, ts));
  m.counters.audioTags++;
  const head = TAG_HEADER_SIZE + (aac ? 2 : 1);
  const bodyLen = head - TAG_HEADER_SIZE + p.length;
  const ref = p.length >= WIRE_VIEW_MIN;
  const mem = small.take(head + (ref ? 0 : p.length) + PREV_SIZE_SIZE);
  writeTagHeader(mem, 0, FLV_TAG_AUDIO, bodyLen, ts);
  mem[TAG_HEADER_SIZE] = flags;
  if (aac) mem[TAG_HEADER_SIZE + 1] = 1; // AAC raw
  let ranges: number[];
  if (ref) {
    writeU32BE(mem, TAG_HEADER_SIZE + bodyLen, head);
    ranges = [0, head, 0, p.length, head, head + PREV_SIZE_SIZE];
  } else {
    p.copy(mem, head);
    writeU32BE(mem, TAG_HEADER_SIZE + bodyLen, head + p.length);
    ranges = [0, mem.length];
  }
  const framed = config === undefined ? undefined : configOf(config);
  return {
    config: framed,
    configBytes: bytesOf(framed),
    mem,
    payload: p,
    ranges,
    mediaBytes: TAG_HEADER_SIZE + bodyLen + PREV_SIZE_SIZE,
    mediaType: FLV_TAG_AUDIO,
    mediaTags: 1,
    timestamp: ts,
    keyframe: false,
  };
}

function isAdts(p: Buffer): boolean {
  return p.length >= 7 && p[0] === 0xff && (p[1] & 0xf6) === 0xf0;
}

/** the track's AAC sequence header at `ts`, kept for configTags; the config is clean after it */
function aacSequenceHeader(a: AudioState, ts: number): FlvTag {
  const config = a.config!;
  const seq = allocBody(2 + config.length);
  seq[0] = 0xaf;
  seq[1] = 0; // AAC sequence header
  config.copy(seq, 2);
  a.seqHeader = { type: FLV_TAG_AUDIO, timestamp: ts, body: seq, keyframe: false };
  a.configDirty = false;
  return a.seqHeader;
}

function skipAudio(m: MuxState, codec: AudioCodec): FlvTag[] {
  m.counters.skippedAudio++;
  m.skippedCodecs.add(codec);
  return [];
}

/** AAC as raw frames, or ADTS (one or more frames), whose headers are stripped and give the config if none was set. */
function pushAac(m: MuxState, a: AudioState, au: AccessUnit): FlvTag[] {
  const p = au.payload;
  const frames: Buffer[] = [];
  if (isAdts(p)) {
    let at = 0;
    while (at + 7 <= p.length && p[at] === 0xff && (p[at + 1] & 0xf6) === 0xf0) {
      const headerLen = p[at + 1] & 0x01 ? 7 : 9;
      const frameLen = ((p[at + 3] & 0x03) << 11) | (p[at + 4] << 3) | (p[at + 5] >> 5);
      if (frameLen < headerLen || at + frameLen > p.length) break;
      if (!a.config) {
        const objectType = ((p[at + 2] >> 6) & 3) + 1;
        const freqIdx = (p[at + 2] >> 2) & 0x0f;
        const chanCfg = ((p[at + 2] & 1) << 2) | (p[at + 3] >> 6);
        const asc = Buffer.allocUnsafe(2);
        asc.writeUInt16BE((objectType << 11) | (freqIdx << 7) | (chanCfg << 3), 0);
        a.config = asc;
        a.configDirty = true;
        if (!a.sampleRate) a.sampleRate = AAC_SAMPLE_RATES[freqIdx] ?? 0;
        if (chanCfg) a.channels = chanCfg;
        m.metaDirty = true;
      }
      frames.push(p.subarray(at + headerLen, at + frameLen));
      at += frameLen;
    }
  } else if (p.length > 0) {
    frames.push(p);
  }
  if (frames.length === 0) return [];
  if (!a.config) return skipAudio(m, 'aac');
  const out: FlvTag[] = [];
  const frameMs = a.sampleRate > 0 ? (1024 * 1000) / a.sampleRate : 0;
  for (let i = 0; i < frames.length; i++) {
    const ts = clampTs(m, a, au.dts + i * frameMs);
    if (i === 0) emitMeta(m, out);
    if (a.configDirty) out.push(aacSequenceHeader(a, ts));
    const body = m.slab.allocBody(2 + frames[i].length);
    body[0] = 0xaf;
    body[1] = 1; // AAC raw
    frames[i].copy(body, 2);
    out.push({ type: FLV_TAG_AUDIO, timestamp: ts, body, keyframe: false });
    m.counters.audioTags++;
  }
  return out;
}
