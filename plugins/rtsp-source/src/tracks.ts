/**
 * One track of a playing session: RTP packets in, bus units out. Checks payload type and sequence (loss, reorder),
 * depacketises, and maps RTP time to the session's timeline in the track's own time base (90 kHz video, the sample
 * rate for audio), so units carry exact ticks.
 */
import { unitAt, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoTrackInfo } from '../../../plugin-sdk';
import { extractH264ParameterSets, parseH264Sps } from '../../../plugin-sdk/formats';
import { extractH265ParameterSets, parseH265Sps } from '../../../plugin-sdk/formats';
import { AacDepacketizer, G711Depacketizer, parseAacConfig } from './depacketize/audio';
import type { Depacketizer } from './depacketize/types';
import { h264Depacketizer, h265Depacketizer } from './depacketize/video';
import { parseRtp, TimestampUnwrapper } from './rtp';
import type { SdpMedia } from './sdp';

export interface TrackCounters {
  packets: number;
  lost: number;
  /** packets not RTP, of another payload type, or too old (reordered past the one taken) */
  badPackets: number;
}

export interface TrackOutput {
  track(info: TrackInfo): void;
  unit(u: AccessUnit): void;
}

export interface ReceiverStats { kind: string; codec: string; packets: number; lost: number; bad: number; malformed: number; dropped: number }

export function statsOf(r: TrackReceiver): ReceiverStats {
  return {
    kind: r.kind, codec: r.media.codec ?? r.media.encoding, packets: r.counters.packets, lost: r.counters.lost, bad: r.counters.badPackets,
    malformed: r.depack.stats.malformed, dropped: r.depack.stats.droppedFrames,
  };
}

/** why a track cannot be taken, or undefined */
export function trackProblem(m: SdpMedia): string | undefined {
  if (m.codec === 'aac' && !parseAacConfig(m.fmtp.config)) return 'AAC without a usable config= (AudioSpecificConfig)';
  return undefined;
}

export class TrackReceiver {
  readonly kind: 'video' | 'audio';
  readonly timescale: number;
  readonly counters: TrackCounters = { packets: 0, lost: 0, badPackets: 0 };
  readonly depack: Depacketizer;
  private readonly unwrap = new TimestampUnwrapper();
  private baseExt: number | undefined;
  private offsetTicks = 0;
  private lastSeq: number | undefined;
  private lastDts = -Infinity;
  private info: TrackInfo | undefined;

  /**
   * `rtptime`: RTP-Info's timestamp for the PLAY instant (tracks then line up exactly); without it, a track's first
   * packet is placed at `sinceStartMs()`, its arrival on the session's timeline.
   */
  constructor(readonly media: SdpMedia, rtptime: number | undefined, private readonly sinceStartMs: () => number, private readonly out: TrackOutput, maxFrameBytes: number) {
    this.kind = media.type === 'video' ? 'video' : 'audio';
    this.timescale = media.clockRate;
    if (rtptime !== undefined) this.baseExt = this.unwrap.unwrap(rtptime);
    switch (media.codec) {
      case 'h264': this.depack = h264Depacketizer(media.fmtp, maxFrameBytes); break;
      case 'h265': this.depack = h265Depacketizer(media.fmtp, maxFrameBytes); break;
      case 'aac': {
        const asc = parseAacConfig(media.fmtp.config)!;
        this.depack = new AacDepacketizer(media.fmtp, asc.frameSamples, maxFrameBytes);
        this.setInfo({ kind: 'audio', codec: 'aac', sampleRate: asc.sampleRate, channels: asc.channels, config: asc.config, frameSamples: asc.frameSamples });
        break;
      }
      default: {
        this.depack = new G711Depacketizer(media.channels);
        this.setInfo({ kind: 'audio', codec: media.codec === 'g711u' ? 'g711u' : 'g711a', sampleRate: media.clockRate, channels: media.channels, bitsPerSample: 8 });
      }
    }
  }

  get trackInfo(): TrackInfo | undefined {
    return this.info;
  }

  /** a session-timeline time (ms) of an RTP timestamp near the latest, for sender reports */
  msOf(rtpTimestamp: number): number | undefined {
    const ext = this.unwrap.peek(rtpTimestamp);
    if (ext === undefined || this.baseExt === undefined) return undefined;
    return ((ext - this.baseExt + this.offsetTicks) * 1000) / this.timescale;
  }

  rtp(data: Buffer): void {
    const p = parseRtp(data);
    if (!p || p.payloadType !== this.media.payloadType) {
      this.counters.badPackets++;
      return;
    }
    this.counters.packets++;
    let gap = false;
    if (this.lastSeq !== undefined) {
      const d = (p.seq - this.lastSeq) & 0xffff;
      if (d === 0 || d > 0x8000) {
        // a duplicate or a packet older than one taken: too late to place
        this.counters.badPackets++;
        return;
      }
      if (d > 1) {
        this.counters.lost += d - 1;
        gap = true;
      }
    }
    this.lastSeq = p.seq;
    const ext = this.unwrap.unwrap(p.timestamp);
    if (this.baseExt === undefined) {
      this.baseExt = ext;
      this.offsetTicks = Math.round((this.sinceStartMs() * this.timescale) / 1000);
    }
    for (const f of this.depack.push(p, gap)) {
      const fext = f.timestamp === p.timestamp ? ext : ext + ((f.timestamp - p.timestamp) | 0);
      this.emit(fext - this.baseExt + this.offsetTicks, f.payload, f.keyframe, f.duration);
    }
  }

  private emit(ticks: number, payload: Buffer, keyframe: boolean, duration: number): void {
    if (this.kind === 'video' && keyframe) this.checkParameterSets(payload);
    if (this.kind === 'video' && !this.info) return; // nothing a reader can decode before the first parameter sets
    // RTP times are presentation times; decode times must not go back (B frames, a camera's jitter)
    const dts = Math.max(ticks, this.lastDts + 1);
    if (this.kind === 'audio' && ticks <= this.lastDts - this.timescale) return; // an audio frame from the past: a duplicate
    this.lastDts = dts;
    this.out.unit(unitAt({
      kind: this.kind, codec: this.info!.codec, timescale: this.timescale, dtsTicks: dts, ptsTicks: Math.max(ticks, dts),
      duration, keyframe: this.kind === 'audio' ? true : keyframe, payload, receivedAt: performance.now(),
    }));
  }

  private checkParameterSets(frame: Buffer): void {
    const cur = this.info as VideoTrackInfo | undefined;
    if (this.media.codec === 'h264') {
      const ps = extractH264ParameterSets(frame);
      if (!ps.sps || !ps.pps || (cur?.sps?.equals(ps.sps) && cur.pps?.equals(ps.pps))) return;
      const info: VideoTrackInfo = { kind: 'video', codec: 'h264', sps: Buffer.from(ps.sps), pps: Buffer.from(ps.pps) };
      try {
        const s = parseH264Sps(ps.sps);
        Object.assign(info, { width: s.width, height: s.height, profile: s.profile, profileIdc: s.profileIdc, level: s.levelIdc, frameRate: s.frameRate });
      } catch {
        // an SPS we cannot read still goes to players, which may
      }
      this.setInfo(info);
    } else {
      const ps = extractH265ParameterSets(frame);
      if (!ps.vps || !ps.sps || !ps.pps || (cur?.sps?.equals(ps.sps) && cur.pps?.equals(ps.pps) && cur.vps?.equals(ps.vps))) return;
      const info: VideoTrackInfo = { kind: 'video', codec: 'h265', vps: Buffer.from(ps.vps), sps: Buffer.from(ps.sps), pps: Buffer.from(ps.pps) };
      try {
        const s = parseH265Sps(ps.sps);
        Object.assign(info, { width: s.width, height: s.height, profile: s.profile, profileIdc: s.generalProfileIdc, level: s.generalLevelIdc });
      } catch {
        // as above
      }
      this.setInfo(info);
    }
  }

  private setInfo(info: VideoTrackInfo | AudioTrackInfo): void {
    this.info = info;
    this.out.track(info);
  }
}
