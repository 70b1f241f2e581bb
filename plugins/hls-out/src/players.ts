/**
 * HLS players as the sessions count them. An HLS player holds no connection: it fetches a playlist and segments
 * again and again. One player is one request fetching from one address; it is attached (sessions.attachPlayer) at
 * its first fetch and released once it has fetched nothing for playerIdleSec, or when its request closes.
 */
import type { Cancel, Clock, PlayerHandle, Sessions } from '../../../plugin-sdk';

interface Player {
  reqId: string;
  handle: PlayerHandle;
  lastSeen: number;
  /** fetches under way (a blocked playlist reload is not idleness) */
  busy: number;
}

export class HlsPlayers {
  private readonly players = new Map<string, Player>();
  private readonly sweepCancel: Cancel;

  constructor(
    private readonly sessions: Sessions,
    private readonly clock: Clock,
    private readonly idleMs: number,
  ) {
    this.sweepCancel = clock.setInterval(() => this.sweep(), Math.min(1000, idleMs / 2));
  }

  get count(): number {
    return this.players.size;
  }

  /** a fetch of reqId's media started; returns what to call with the bytes sent and when it ends, or undefined */
  fetch(reqId: string, address: string): { sent(n: number): void; done: () => void } | undefined {
    const key = `${reqId} ${address}`;
    let p = this.players.get(key);
    if (!p) {
      const handle = this.sessions.attachPlayer(reqId, { protocol: 'hls', remote: address });
      if (!handle) return undefined;
      p = { reqId, handle, lastSeen: this.clock.now(), busy: 0 };
      this.players.set(key, p);
    }
    const player = p;
    player.busy++;
    player.lastSeen = this.clock.now();
    let open = true;
    return {
      sent: (n) => player.handle.sent(n),
      done: () => {
        if (!open) return;
        open = false;
        player.busy--;
        player.lastSeen = this.clock.now();
      },
    };
  }

  closeRequest(reqId: string): void {
    for (const [key, p] of this.players) {
      if (p.reqId !== reqId) continue;
      p.handle.close();
      this.players.delete(key);
    }
  }

  stop(): void {
    this.sweepCancel();
    for (const p of this.players.values()) p.handle.close();
    this.players.clear();
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [key, p] of this.players) {
      if (p.busy > 0 || now - p.lastSeen < this.idleMs) continue;
      p.handle.close();
      this.players.delete(key);
    }
  }
}
