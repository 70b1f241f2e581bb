/**
 * flv-out's service: its players, for tests and other plugins that want to see them (declare it in `uses`).
 * Per gateway, not per process: each flv-out provides its own.
 */
import { defineService } from '../../plugin-sdk';
import type { PlayerStats } from './src/player';

export type { PlayerStats };

export interface FlvPlayers {
  /** the port HTTP-FLV and WS-FLV are served on */
  readonly port: number;
  /** every connected player, those still waiting for their first keyframe included */
  playerStats(): PlayerStats[];
}

export const FLV_PLAYERS = defineService<FlvPlayers>('flv-players', { providedBy: 'flv-out' });
