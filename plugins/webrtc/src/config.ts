import { IsArray, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/** A STUN or TURN server handed to clients (WHEP Link headers, rel="ice-server") for their side of ICE. */
export interface IceServerConfig {
  /** e.g. 'stun:stun.example.com:3478' or 'turn:turn.example.com:3478?transport=udp' */
  urls: string;
  username?: string;
  credential?: string;
}

export class WebrtcConfig {
  /**
   * The UDP port every WebRTC session of this process shares (ICE, DTLS and SRTP muxed on one port, as MediaMTX and
   * Pion do): one firewall rule. With several workers, worker i uses udpPort + i. 0: a free port each (tests).
   */
  @IsInt()
  @Min(0)
  @Max(65535)
  udpPort = 7090;

  /** interface the UDP port binds to (default: the site's listenHost) */
  @IsOptional()
  @IsString()
  host: string | undefined = undefined;

  /**
   * address written into the answer's host candidate (default: the site's publicHost, env GW_PUBLIC_HOST): what
   * a browser can reach the UDP port at
   */
  @IsOptional()
  @IsString()
  publicHost: string | undefined = undefined;

  /**
   * STUN and TURN servers handed to clients with the answer (WHEP Link headers, rel="ice-server"); the gateway itself
   * needs none. A TURN server reached over TCP or TLS is the fallback for networks that block UDP (see the README).
   */
  @IsArray()
  iceServers: IceServerConfig[] = [];

  /** largest RTP packet sent (header included): below the path MTU once SRTP, UDP and IP headers are added */
  @IsInt()
  @Min(600)
  @Max(1400)
  mtu = 1200;

  /** RTP packets per track kept for retransmission on a NACK (about 2.5 s of a 1 Mbit/s stream) */
  @IsInt()
  @Min(0)
  @Max(4096)
  nackBufferPackets = 256;

  /** a session whose ICE and DTLS have not connected by then is closed and freed */
  @IsInt()
  @Min(1000)
  connectTimeoutMs = 10_000;

  /** the largest SDP offer read */
  @IsInt()
  @Min(1024)
  maxOfferBytes = 64 * 1024;

  /** sessions this process holds at most; past it an offer answers 503 */
  @IsInt()
  @Min(1)
  maxSessions = 2000;

  /** bytes a viewer's track may hold unsent before the bus queues for it (and skips a GOP when it is too far behind) */
  @IsInt()
  @Min(16 * 1024)
  highWaterBytes = 256 * 1024;
}
