/** What the RTSP server is given: its collaborators, its config, its UDP ports, and the counters it moves. */
import type { Logger } from 'pino';
import type { Clock, MediaBus, RequestLog, Sessions, UdpPort, UnitFormat } from '../../../plugin-sdk';
import type { RtspOutConfig } from './config';
import type { RtpUnit } from '../../../plugin-sdk/rtp';

export interface RtspServerHooks {
  refused(): void;
  badRequest(): void;
  timedOut(): void;
  udpDropped(): void;
  sent(n: number): void;
  /** a datagram from a peer ("host:port") this server holds no UDP session for (with workers: maybe another's) */
  unknownPeer(peer: string): void;
}

export interface RtspServerOptions {
  log: Logger;
  requestLog: RequestLog;
  sessions: Sessions;
  bus: MediaBus;
  clock: Clock;
  config: RtspOutConfig;
  format: UnitFormat<RtpUnit>;
  /** host:port for URLs when a client sent no absolute URI */
  publicAddress: string;
  rtpSocket: UdpPort;
  rtcpSocket: UdpPort;
  hooks: RtspServerHooks;
  cname: string;
}
