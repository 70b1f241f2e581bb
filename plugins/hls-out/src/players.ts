/**
 * HLS players as the sessions count them. An HLS player holds no connection: it fetches a playlist and segments
 * again and again. One player is one request fetching from one address; it is attached (sessions.attachPlayer) at
 * its first fetch and released once it has fetched nothing for playerIdleSec, or when its request closes.
 */
import type { Cancel, Clock, PlayerHandle, Sessions } from '../../../plugin-sdk';

export interface HlsPlayer {
  readonly reqId: string;
  readonly handle: PlayerHandle;
  lastSeen: number;
  /** fetches under way (a blocked playlist reload is not idleness) */
  busy: number;
}

export class HlsPlayers {
  /** by request, then address: a fetch finds its player without a key string made for it */
  private readonly players = new Map<string, Map<string, HlsPlayer>>();
  private n = 0;
  private readonly sweepCancel: Cancel;

  constructor(
    private readonly sessions: Sessions,
    private readonly clock: Clock,
    private readonly idleMs: number,
  ) {
    this.sweepCancel = clock.setInterval(() => this.sweep(), Math.min(1000, idleMs / 2));
  }

  get count(): number {
    return this.n;
  }

  /** a fetch of reqId's media started: its player (busy until ended()), or undefined */
  fetch(reqId: string, address: string): HlsPlayer | undefined {
    let ofReq = this.players.get(reqId);
    let p = ofReq?.get(address);
    if (!p) {
      const handle = this.sessions.attachPlayer(reqId, { protocol: 'hls', remote: address });
      if (!handle) return undefined;
      p = { reqId, handle, lastSeen: this.clock.now(), busy: 0 };
      if (!ofReq) this.players.set(reqId, (ofReq = new Map<string, HlsPlayer>()));
      ofReq.set(address, p);
      this.n++;
    }
    p.busy++;
    p.lastSeen = this.clock.now();
    return p;
  }

  /** a fetch that fetch() returned p for is over (once per fetch) */
  ended(p: HlsPlayer): void {
    p.busy--;
    p.lastSeen = this.clock.now();
  }

  closeRequest(reqId: string): void {
    const ofReq = this.players.get(reqId);
    if (!ofReq) return;
    for (const p of ofReq.values()) p.handle.close();
    this.n -= ofReq.size;
    this.players.delete(reqId);
  }

  stop(): void {
    this.sweepCancel();
    for (const ofReq of this.players.values()) for (const p of ofReq.values()) p.handle.close();
    this.players.clear();
    this.n = 0;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [reqId, ofReq] of this.players) {
      for (const [address, p] of ofReq) {
        if (p.busy > 0 || now - p.lastSeen < this.idleMs) continue;
        p.handle.close();
        ofReq.delete(address);
        this.n--;
      }
      if (ofReq.size === 0) this.players.delete(reqId);
    }
  }
}
