/**
 * RTP as a bus format: one encoder per stream packetises each unit once, for every RTSP reader of the stream, TCP
 * and UDP alike. Sequence numbers, SSRC and timestamp offsets belong to the encoder (random per RFC 3550), so all
 * readers of a stream see the same packets; a reader that joins gets the GOP cache's packets first (RTP-Info tells
 * it where it starts) and one that skips a GOP sees a gap in sequence numbers, as after loss.
 *
 * The joiner's GOP packets are made again (`catchUp`), numbered from where each unit's numbering started then, rather
 * than kept: a kept form (an object and its small parts) lives as long as its GOP, past two young-generation
 * collections, so each was copied twice and promoted (0.9 MB a scavenge at 300 RTSP readers, against 3 KB with FLV
 * players), and left for a full collection (core/bus/gop-cache.ts says the same of FLV forms).
 */
import { randomInt } from 'node:crypto';
import { defineFormat, type FormatEncoder, type UnitFormat } from '../bus';
import type { AccessUnit, AudioTrackInfo, TrackInfo } from '../media';
import { Packetizer, type RtpTrackState } from './packetizer';
import { AUDIO, VIDEO, type RtpUnit } from './rtp-unit';

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

/**
 * Units since the stream's last video key frame (the bus's GOP cache holds the same ones), each as where its packets'
 * numbering started on both tracks and how many packets it made: what `catchUp` needs to make a joiner's packets
 * again with the numbers the readers in step got, so that the joiner's sequence goes on into the live packets.
 * Numbers in arrays kept across GOPs (emptied by their count).
 */
class GopNumbering {
  /** a GOP past this many units is forgotten from its start (a joiner's first units are then left out) */
  static readonly MAX = 8192;
  n = 0;
  readonly video: number[] = [];
  readonly dtsTicks: number[] = [];
  readonly videoSeq: number[] = [];
  readonly audioSeq: number[] = [];
  /** packets made, or -1: none (a unit left out) */
  readonly packets: number[] = [];

  /** Where a unit's numbering starts; returns its row, whose `packets` the encoder sets once it has made them. */
  add(unit: AccessUnit, videoSeq: number, audioSeq: number): number {
    if (unit.kind === 'video' && unit.keyframe) this.n = 0;
    else if (this.n === GopNumbering.MAX) this.n = 0;
    const i = this.n++;
    this.video[i] = unit.kind === 'video' ? 1 : 0;
    this.dtsTicks[i] = unit.dtsTicks;
    this.videoSeq[i] = videoSeq;
    this.audioSeq[i] = audioSeq;
    this.packets[i] = -1;
    return i;
  }

  /** The row of a unit given again (the GOP cache's, in order, so from the tail), or -1 when it is not the same one. */
  rowOf(units: ReadonlyArray<AccessUnit>, k: number): number {
    const i = this.n - units.length + k;
    const u = units[k];
    if (i < 0 || this.video[i] !== (u.kind === 'video' ? 1 : 0) || this.dtsTicks[i] !== u.dtsTicks) return -1;
    return i;
  }
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
  private readonly gop = new GopNumbering();

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
    const row = this.gop.add(unit, this.video.seq, this.audio.seq);
    const out = this.packetize(this.p, unit, this.video, this.audio);
    if (out) {
      this.gop.packets[row] = out.count;
      (unit.kind === 'video' ? this.h.packets.video : this.h.packets.audio).inc(out.count);
    }
    return out;
  }

  /**
   * The GOP's packets again, numbered as they were: a reader joining now starts with the GOP (RTP-Info names its first
   * packet) and goes on into the live packets without a gap. A unit this encoder does not remember as the same one,
   * or that makes another number of packets than it did (the tracks changed since), is left out for the joiner, as a
   * loss would be.
   */
  catchUp(units: ReadonlyArray<AccessUnit>): Array<RtpUnit | undefined> {
    const p = new Packetizer(this.h.mtu);
    const video = { ...this.video };
    const audio = { ...this.audio };
    const g = this.gop;
    return units.map((u, k) => {
      const i = g.rowOf(units, k);
      if (i < 0 || g.packets[i] < 0) return undefined;
      video.seq = g.videoSeq[i];
      audio.seq = g.audioSeq[i];
      const out = this.packetize(p, u, video, audio);
      return out !== undefined && out.count === g.packets[i] ? out : undefined;
    });
  }

  private packetize(p: Packetizer, unit: AccessUnit, video: RtpTrackState, audio: RtpTrackState): RtpUnit | undefined {
    if (unit.kind === 'video') {
      if (unit.codec !== this.videoCodec) return undefined;
      // RFC 6184 5.1 / RFC 7798 4.1: the timestamp is the sampling (presentation) time, 90 kHz
      const ts = (video.tsOffset + rescale(unit.ptsTicks, unit.timescale, VIDEO_CLOCK)) >>> 0;
      return unit.codec === 'h264' ? p.h264(unit, this.paramSets, VIDEO, VIDEO_PT, ts, video) : p.h265(unit, this.paramSets, VIDEO, VIDEO_PT, ts, video);
    }
    const t = this.audioTrack;
    const pt = this.audioPt;
    if (!t || pt === undefined || unit.codec !== t.codec) return undefined;
    const ts = (audio.tsOffset + rescale(unit.dtsTicks, unit.timescale, t.sampleRate)) >>> 0;
    return t.codec === 'aac' ? p.aac(unit.payload, AUDIO, pt, ts, audio) : p.g711(unit.payload, AUDIO, pt, ts, audio, t.channels);
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
