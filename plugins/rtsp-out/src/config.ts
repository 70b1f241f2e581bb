import { IsArray, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { RTP_AUDIO_CODECS } from '../../../plugin-sdk/rtp';

export type RtpAudioCodec = (typeof RTP_AUDIO_CODECS)[number];

export class RtspOutConfig {
  /** RTSP (TCP) port (decisions.md: 7554) */
  @IsInt()
  @Min(0)
  @Max(65535)
  port = 7554;

  @IsOptional()
  @IsString()
  host: string | undefined = undefined;

  /** port written into play URLs when NAT or a proxy publishes this server elsewhere (default: port) */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(65535)
  publicPort: number | undefined = undefined;

  /** UDP port RTP leaves from for readers over UDP (server_port); even, as RFC 3550 advises */
  @IsInt()
  @Min(0)
  @Max(65535)
  rtpPort = 7556;

  /** UDP port of RTCP (sender reports out, receiver reports in) */
  @IsInt()
  @Min(0)
  @Max(65535)
  rtcpPort = 7557;

  /** largest RTP packet (header included): NAL units over it go as FU-A / FU fragments */
  @IsInt()
  @Min(400)
  @Max(8192)
  mtu = 1400;

  /**
   * RFC 2326 session timeout, announced in the Session header: a session not playing, or playing over UDP, that
   * hears nothing from its client (a request naming it, an RTCP report) for this long is torn down. A session over
   * TCP interleaving lives as long as its connection.
   */
  @IsInt()
  @Min(1)
  @Max(3600)
  sessionTimeoutSec = 60;

  /** a DESCRIBE for a stream without media yet (an early player) waits this long for it, then answers 503 */
  @IsInt()
  @Min(0)
  @Max(300)
  describeWaitSec = 30;

  /** a reader's queue on the bus past which it skips to the next keyframe; dropped past 4x missed */
  @IsInt()
  @Min(64 * 1024)
  maxPlayerBacklogBytes = 2 * 1024 * 1024;

  /**
   * Audio carried as received. Other audio goes through the site's AAC stage (plugin audio-aac) when it has one,
   * else it is left out of the SDP.
   */
  @IsArray()
  @IsIn(RTP_AUDIO_CODECS, { each: true })
  audioCodecs: RtpAudioCodec[] = ['g711a', 'g711u', 'aac'];

  /** request line and headers; a longer request is answered 400 and its connection closed */
  @IsInt()
  @Min(1024)
  @Max(65536)
  maxHeaderBytes = 8192;
}
