/**
 * The SDP a DESCRIBE answers (RFC 4566 / RFC 2326 C): one media section per track, each with an absolute
 * `a=control` (see play-url.ts) and the codec's parameters, so a client can set up its decoder before the first
 * packet: `sprop-parameter-sets` (RFC 6184), `sprop-vps/sps/pps` (RFC 7798), the AAC AudioSpecificConfig (RFC 3640).
 */
import type { AudioTrackInfo, VideoTrackInfo } from '../../../plugin-sdk';
import { AUDIO, VIDEO, VIDEO_CLOCK, VIDEO_PT, audioPayloadType, type TrackIndex } from '../../../plugin-sdk/rtp';

export interface Presentation {
  video?: VideoTrackInfo;
  audio?: AudioTrackInfo;
}

export interface SdpOptions {
  /** the stream's name, for the session name */
  stream: string;
  /** o= session id (digits) */
  sessionId: string;
  /** a=control of a track */
  control(track: TrackIndex): string;
}

/** The SDP of a presentation; its tracks must be ones the RTP format carries (audioPayloadType defined). */
export function buildSdp(p: Presentation, o: SdpOptions): string {
  const lines = [
    'v=0',
    `o=- ${o.sessionId} 1 IN IP4 0.0.0.0`,
    `s=${o.stream}`,
    'c=IN IP4 0.0.0.0',
    't=0 0',
    'a=tool:jt1078-gateway rtsp-out',
    // live: no duration; a client does not seek
    'a=range:npt=0-',
    'a=control:*',
  ];
  if (p.video) lines.push(...videoSection(p.video), `a=control:${o.control(VIDEO)}`);
  if (p.audio) lines.push(...audioSection(p.audio), `a=control:${o.control(AUDIO)}`);
  return lines.join('\r\n') + '\r\n';
}

function videoSection(v: VideoTrackInfo): string[] {
  const out = [`m=video 0 RTP/AVP ${VIDEO_PT}`];
  if (v.codec === 'h264') {
    out.push(`a=rtpmap:${VIDEO_PT} H264/${VIDEO_CLOCK}`);
    const fmtp = ['packetization-mode=1'];
    if (v.sps && v.sps.length >= 4) fmtp.push(`profile-level-id=${v.sps.subarray(1, 4).toString('hex').toUpperCase()}`);
    if (v.sps && v.pps) fmtp.push(`sprop-parameter-sets=${v.sps.toString('base64')},${v.pps.toString('base64')}`);
    out.push(`a=fmtp:${VIDEO_PT} ${fmtp.join(';')}`);
  } else {
    out.push(`a=rtpmap:${VIDEO_PT} H265/${VIDEO_CLOCK}`);
    const fmtp: string[] = [];
    if (v.vps) fmtp.push(`sprop-vps=${v.vps.toString('base64')}`);
    if (v.sps) fmtp.push(`sprop-sps=${v.sps.toString('base64')}`);
    if (v.pps) fmtp.push(`sprop-pps=${v.pps.toString('base64')}`);
    if (fmtp.length) out.push(`a=fmtp:${VIDEO_PT} ${fmtp.join(';')}`);
  }
  if (v.width && v.height) out.push(`a=x-dimensions:${v.width},${v.height}`);
  if (v.frameRate) out.push(`a=framerate:${Number(v.frameRate.toFixed(3))}`);
  return out;
}

function audioSection(a: AudioTrackInfo): string[] {
  const pt = audioPayloadType(a);
  if (pt === undefined) throw new TypeError(`audio ${a.codec} has no RTP payload format here`);
  const out = [`m=audio 0 RTP/AVP ${pt}`];
  const ch = a.channels > 1 ? `/${a.channels}` : '';
  if (a.codec === 'aac') {
    out.push(`a=rtpmap:${pt} MPEG4-GENERIC/${a.sampleRate}${ch}`);
    out.push(`a=fmtp:${pt} streamtype=5;profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3;config=${a.config!.toString('hex')}`);
  } else {
    // static types need no rtpmap, but clients are happier with one (RFC 4566 6)
    out.push(`a=rtpmap:${pt} ${a.codec === 'g711a' ? 'PCMA' : 'PCMU'}/${a.sampleRate}${ch}`);
  }
  return out;
}

/** The tracks a presentation has, by their index (SETUP and PLAY walk them). */
export function presentTracks(p: Presentation): TrackIndex[] {
  const out: TrackIndex[] = [];
  if (p.video) out.push(VIDEO);
  if (p.audio) out.push(AUDIO);
  return out;
}
