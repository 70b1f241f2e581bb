/**
 * One track of a playing session: RTP packets in, bus units out. Checks payload type and sequence (loss, reorder),
 * depacketises, and maps RTP time to the session's timeline in the track's own time base (90 kHz video, the sample
 * rate for audio), so units carry exact ticks.
 */
import { unitAt, type AccessUnit, type AudioTrackInfo, type TrackInfo, type VideoCodec, type VideoTrackInfo } from '../../../plugin-sdk';
import { parseH264Sps } from '../../../plugin-sdk/formats';
import { parseH265Sps } from '../../../plugin-sdk/formats';
import { NAL_FLAG, NalUnits, nalKindFlags } from '../../../plugin-sdk/formats';
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

export interface ReceiverStats {
  kind: string;
  codec: string;
  packets: number;
  lost: number;
  bad: number;
  malformed: number;
  dropped: number;
}

export function statsOf(r: TrackReceiver): ReceiverStats {
  return {
    kind: r.kind,
    codec: r.media.codec ?? r.media.encoding,
    packets: r.counters.packets,
    lost: r.counters.lost,
    bad: r.counters.badPackets,
    malformed: r.depack.stats.malformed,
    dropped: r.depack.stats.droppedFrames,
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
  /** reads a key frame's NAL index */
  private readonly nals = new NalUnits();

  /**
   * `rtptime`: RTP-Info's timestamp for the PLAY instant (tracks then line up exactly); without it, a track's first
   * packet is placed at `sinceStartMs()`, its arrival on the session's timeline.
   */
  constructor(
    readonly media: SdpMedia,
    rtptime: number | undefined,
    private readonly sinceStartMs: () => number,
    private readonly out: TrackOutput,
    maxFrameBytes: number,
  ) {
    this.kind = media.type === 'video' ? 'video' : 'audio';
    this.timescale = media.clockRate;
    if (rtptime !== undefined) this.baseExt = this.unwrap.unwrap(rtptime);
    switch (media.codec) {
      case 'h264':
        this.depack = h264Depacketizer(media.fmtp, maxFrameBytes);
        break;
      case 'h265':
        this.depack = h265Depacketizer(media.fmtp, maxFrameBytes);
        break;
      case 'aac': {
        const asc = parseAacConfig(media.fmtp.config)!;
        this.depack = new AacDepacketizer(media.fmtp, asc.frameSamples, maxFrameBytes);
        this.setInfo({ kind: 'audio', codec: 'aac', sampleRate: asc.sampleRate, channels: asc.channels, config: asc.config, frameSamples: asc.frameSamples });
        break;
      }
      default: {
        this.depack = new G711Depacketizer(media.channels);
        this.setInfo({
          kind: 'audio',
          codec: media.codec === 'g711u' ? 'g711u' : 'g711a',
          sampleRate: media.clockRate,
          channels: media.channels,
          bitsPerSample: 8,
        });
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
    // RTP times are presentation times; decode times must not go back (B frames, a camera's jitter)
    const dts = Math.max(ticks, this.lastDts + 1);
    if (this.kind === 'audio' && ticks <= this.lastDts - this.timescale) return; // an audio frame from the past: a duplicate
    const video = this.kind === 'video';
    // (a video unit's NAL index is found here, once: the parameter sets are read from it)
    const u = unitAt({
      kind: this.kind,
      codec: video ? (this.media.codec as VideoCodec) : this.info!.codec,
      timescale: this.timescale,
      dtsTicks: dts,
      ptsTicks: Math.max(ticks, dts),
      duration,
      keyframe: video ? keyframe : true,
      payload,
      receivedAt: performance.now(),
    });
    if (video && keyframe) this.checkParameterSets(u);
    if (video && !this.info) return; // nothing a reader can decode before the first parameter sets
    this.lastDts = dts;
    this.out.unit(u);
  }

  /** The key frame's parameter sets (the last of each kind), from its NAL index; a new track when they changed. */
  private checkParameterSets(u: AccessUnit): void {
    const cur = this.info as VideoTrackInfo | undefined;
    const r = this.nals;
    const p = u.payload;
    const codec = this.media.codec === 'h265' ? 'h265' : 'h264';
    let vps: Buffer | undefined, sps: Buffer | undefined, pps: Buffer | undefined;
    for (let i = 0, n = r.of(u); i < n; i++) {
      const k = nalKindFlags(codec, p[r.start(i)]);
      if (k === NAL_FLAG.SPS) sps = p.subarray(r.start(i), r.end(i));
      else if (k === NAL_FLAG.PPS) pps = p.subarray(r.start(i), r.end(i));
      else if (k === NAL_FLAG.VPS) vps = p.subarray(r.start(i), r.end(i));
    }
    if (codec === 'h264') {
      if (!sps || !pps || (cur?.sps?.equals(sps) && cur.pps?.equals(pps))) return;
      const info: VideoTrackInfo = { kind: 'video', codec: 'h264', sps: Buffer.from(sps), pps: Buffer.from(pps) };
      try {
        const s = parseH264Sps(sps);
        Object.assign(info, { width: s.width, height: s.height, profile: s.profile, profileIdc: s.profileIdc, level: s.levelIdc, frameRate: s.frameRate });
      } catch {
        // an SPS we cannot read still goes to players, which may
      }
      this.setInfo(info);
    } else {
      if (!vps || !sps || !pps || (cur?.sps?.equals(sps) && cur.pps?.equals(pps) && cur.vps?.equals(vps))) return;
      const info: VideoTrackInfo = { kind: 'video', codec: 'h265', vps: Buffer.from(vps), sps: Buffer.from(sps), pps: Buffer.from(pps) };
      try {
        const s = parseH265Sps(sps);
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
