/**
 * The FLV muxer's audio half: G.711A/U (SoundFormat 7/8) and AAC (10), raw or ADTS. Other audio codecs are not
 * representable in FLV: their units are skipped and counted. Internal to formats/flv.
 */
import type { AccessUnit, AudioCodec, AudioTrackInfo } from '../media';
import { allocBody, FLV_TAG_AUDIO, type FlvTag } from './flv-tag';
import { clampTs, emitMeta, flagsOf, sameBuf, type AudioState, type MuxState } from './flv-mux-state';

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

export function pushAudio(m: MuxState, au: AccessUnit): FlvTag[] {
  const codec = au.codec as AudioCodec;
  let a = m.audio;
  if (!a || a.codec !== codec) {
    setAudio(m, { kind: 'audio', codec, sampleRate: codec === 'aac' ? 0 : 8000, channels: 1 });
    a = m.audio!;
  }
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

function skipAudio(m: MuxState, codec: AudioCodec): FlvTag[] {
  m.counters.skippedAudio++;
  m.skippedCodecs.add(codec);
  return [];
}

/** AAC as raw frames, or ADTS (one or more frames), whose headers are stripped and give the config if none was set. */
function pushAac(m: MuxState, a: AudioState, au: AccessUnit): FlvTag[] {
  const p = au.payload;
  const frames: Buffer[] = [];
  if (p.length >= 7 && p[0] === 0xff && (p[1] & 0xf6) === 0xf0) {
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
    if (a.configDirty) {
      const seq = allocBody(2 + a.config.length);
      seq[0] = 0xaf;
      seq[1] = 0; // AAC sequence header
      a.config.copy(seq, 2);
      a.seqHeader = { type: FLV_TAG_AUDIO, timestamp: ts, body: seq, keyframe: false };
      a.configDirty = false;
      out.push(a.seqHeader);
    }
    const body = m.slab.allocBody(2 + frames[i].length);
    body[0] = 0xaf;
    body[1] = 1; // AAC raw
    frames[i].copy(body, 2);
    out.push({ type: FLV_TAG_AUDIO, timestamp: ts, body, keyframe: false });
    m.counters.audioTags++;
  }
  return out;
}
