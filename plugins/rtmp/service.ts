/**
 * rtmp's service: its port, publish URLs, players and publishers, for tests and other plugins (declare it in `uses`).
 * Per gateway, not per process: each rtmp plugin provides its own.
 */
import { defineService } from '../../plugin-sdk';
import type { RtmpPlayerStats } from './src/player';

export type { RtmpPlayerStats };

export interface RtmpPublisherStats {
  /** the bus stream it publishes: `{normSim}_{chanId}_1` */
  stream: string;
  appId: string;
  remote: string;
  units: number;
  bytes: number;
  /** a request's stream is fed by it now */
  feeding: boolean;
}

export interface RtmpService {
  readonly port: number;
  /** where an encoder of this application publishes channel (simNo, chanId); undefined when it has no publish key */
  publishUrl(appId: string, simNo: string, chanId: number): string | undefined;
  playerStats(): RtmpPlayerStats[];
  publisherStats(): RtmpPublisherStats[];
}

export const RTMP_SERVER = defineService<RtmpService>('rtmp-server', { providedBy: 'rtmp' });
