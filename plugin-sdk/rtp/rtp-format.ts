/**
 * RTP as a bus format: one encoder per stream packetises each unit once, for every RTSP reader of the stream, TCP
 * and UDP alike. Sequence numbers, SSRC and timestamp offsets belong to the encoder (random per RFC 3550), so all
 * readers of a stream see the same packets; a reader that joins gets the GOP cache's packets first (RTP-Info tells
 * it where it starts) and one that skips a GOP sees a gap in sequence numbers, as after loss.
 */
import { randomInt } from 'node:crypto';
import { defineFormat, type FormatEncoder, type UnitFormat } from '../bus';
import type { AccessUnit, AudioTrackInfo, TrackInfo } from '../media';
import { AUDIO, Packetizer, VIDEO, type RtpTrackState, type RtpUnit } from './packetizer';

export const VIDEO_CLOCK = 90_000;
export const VIDEO_PT = 96;
const AAC_PT = 97;
const G711_DYNAMIC_PT = 98;

/** audio this server carries as received */
export const RTP_AUDIO_CODECS = ['g711a', 'g711u', 'aac'] as const;

/**
 * The payload type of an audio track, or undefined when RTP here cannot carry it. G.711 at 8 kHz mono has its
 * static type (PCMA 8, PCMU 0, RFC 3551); other rates and channel counts a dynamic one with an rtpmap.
 */
export function audioPayloadType(t: AudioTrackInfo): number | undefined {
  if (t.codec === 'g711a' || t.codec === 'g711u') {
    if (t.sampleRate === 8000 && t.channels === 1) return t.codec === 'g711a' ? 8 : 0;
    return G711_DYNAMIC_PT;
  }
  if (t.codec === 'aac') return t.config && t.config.length >= 2 ? AAC_PT : undefined;
  return undefined;
}

interface Inc {
  inc(n?: number): void;
}

export interface RtpFormatHooks {
  mtu: number;
  /** packets made, by track kind (children resolved once) */
  packets: { video: Inc; audio: Inc };
  /** an encoder started (+1) or stopped (-1): a stream has RTSP readers */
  encoders(delta: 1 | -1): void;
}

function trackState(): RtpTrackState {
  return { ssrc: randomInt(1, 2 ** 32 - 1) >>> 0, seq: randomInt(0, 65536), tsOffset: randomInt(0, 2 ** 32 - 1) };
}

/** ticks of one time base to another, rounded (RTP clocks are integers) */
function rescale(ticks: number, from: number, to: number): number {
  return from === to ? ticks : Math.round((ticks * to) / from);
}

class RtpEncoder implements FormatEncoder<RtpUnit> {
  private readonly p: Packetizer;
  private readonly video = trackState();
  private readonly audio = trackState();
  private videoCodec: string | undefined;
  /** the video track's parameter sets (H.264: SPS, PPS; H.265: VPS, SPS, PPS), for key frames that carry none */
  private paramSets: Buffer[] | undefined;
  private audioTrack: AudioTrackInfo | undefined;
  private audioPt: number | undefined;
  private closed = false;

  constructor(private readonly h: RtpFormatHooks) {
    this.p = new Packetizer(h.mtu);
    h.encoders(1);
  }

  tracks(list: ReadonlyArray<TrackInfo>): void {
    for (const t of list) {
      if (t.kind === 'video') {
        this.videoCodec = t.codec;
        const sets = t.codec === 'h265' ? [t.vps, t.sps, t.pps] : [t.sps, t.pps];
        this.paramSets = sets.every((b) => b !== undefined && b.length > 0) ? (sets as Buffer[]) : undefined;
      } else {
        this.audioTrack = t;
        this.audioPt = audioPayloadType(t);
      }
    }
  }

  encode(unit: AccessUnit): RtpUnit | undefined {
    let out: RtpUnit | undefined;
    if (unit.kind === 'video') {
      if (unit.codec !== this.videoCodec) return undefined;
      // RFC 6184 5.1 / RFC 7798 4.1: the timestamp is the sampling (presentation) time, 90 kHz
      const ts = (this.video.tsOffset + rescale(unit.ptsTicks, unit.timescale, VIDEO_CLOCK)) >>> 0;
      out =
        unit.codec === 'h264'
          ? this.p.h264(unit, this.paramSets, VIDEO, VIDEO_PT, ts, this.video)
          : this.p.h265(unit, this.paramSets, VIDEO, VIDEO_PT, ts, this.video);
      if (out) this.h.packets.video.inc(out.count);
      return out;
    }
    const t = this.audioTrack;
    const pt = this.audioPt;
    if (!t || pt === undefined || unit.codec !== t.codec) return undefined;
    const ts = (this.audio.tsOffset + rescale(unit.dtsTicks, unit.timescale, t.sampleRate)) >>> 0;
    out = t.codec === 'aac' ? this.p.aac(unit.payload, AUDIO, pt, ts, this.audio) : this.p.g711(unit.payload, AUDIO, pt, ts, this.audio, t.channels);
    if (out) this.h.packets.audio.inc(out.count);
    return out;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.h.encoders(-1);
  }
}

/** An RTP format of one output plugin instance (readers ask for it by identity, so each has its own, with its MTU). */
export function createRtpFormat(hooks: RtpFormatHooks): UnitFormat<RtpUnit> {
  return defineFormat<RtpUnit>('rtp', () => new RtpEncoder(hooks));
}
