/**
 * The RTSP server's sessions, found three ways: by id (the Session header), by request (closing a request ends its
 * players) and by UDP peer (a UDP client's RTP and RTCP address:port, whose datagrams keep its session alive). The
 * three maps change together here, so a session is never in one and not the others.
 */
import type { TrackIndex } from '../../../plugin-sdk/rtp';
import type { RtspSession, TrackTransport } from './session';

export class SessionRegistry {
  private readonly byId = new Map<string, RtspSession>();
  private readonly byReq = new Map<string, Set<RtspSession>>();
  private readonly udpPeers = new Map<string, RtspSession>();

  get size(): number {
    return this.byId.size;
  }

  get(id: string): RtspSession | undefined {
    return this.byId.get(id);
  }

  /** a copy: ending sessions while walking it is safe */
  all(): RtspSession[] {
    return [...this.byId.values()];
  }

  /** the sessions of one request (a copy) */
  ofRequest(reqId: string): RtspSession[] {
    return [...(this.byReq.get(reqId) ?? [])];
  }

  /** the session a UDP peer (`address:port`, IPv4-mapped addresses as IPv4) belongs to */
  ofPeer(peer: string): RtspSession | undefined {
    return this.udpPeers.get(peer);
  }

  countBy(lower: 'tcp' | 'udp', playing: boolean): number {
    let n = 0;
    for (const s of this.byId.values()) if (s.lower === lower && (s.state === 'playing') === playing) n++;
    return n;
  }

  add(s: RtspSession): void {
    this.byId.set(s.id, s);
    let set = this.byReq.get(s.reqId);
    if (!set) this.byReq.set(s.reqId, (set = new Set()));
    set.add(s);
  }

  /** A track's transport (SETUP again replaces it): a UDP one's peers now find the session, the old one's do not. */
  setTransport(s: RtspSession, track: TrackIndex, tt: TrackTransport): void {
    const before = s.setup.get(track);
    if (before?.lower === 'udp') {
      this.udpPeers.delete(`${before.host}:${before.rtp}`);
      this.udpPeers.delete(`${before.host}:${before.rtcp}`);
    }
    s.setup.set(track, tt);
    if (tt.lower === 'udp') {
      this.udpPeers.set(`${tt.host}:${tt.rtp}`, s);
      this.udpPeers.set(`${tt.host}:${tt.rtcp}`, s);
    }
  }

  /** Forgets the session everywhere; false when it was not (or no longer) registered. */
  remove(s: RtspSession): boolean {
    if (this.byId.get(s.id) !== s) return false;
    this.byId.delete(s.id);
    const set = this.byReq.get(s.reqId);
    set?.delete(s);
    if (set?.size === 0) this.byReq.delete(s.reqId);
    for (const t of s.setup.values()) {
      if (t.lower !== 'udp') continue;
      for (const port of [t.rtp, t.rtcp]) if (this.udpPeers.get(`${t.host}:${port}`) === s) this.udpPeers.delete(`${t.host}:${port}`);
    }
    return true;
  }
}
