/**
 * Channel claims in the Redis directory as one process makes and holds them: it looks up and claims a channel, and
 * refreshes the claim of each channel it serves once a beat, a slice at a time, until it releases it.
 */
import { channelName, memberValue, nodePrefix, parseMember, type ChannelRef, type ClaimAnswer, type Member } from './directory';
import { keys, type Link } from './redis-client';
import { beatMsFor } from './redis-liveness';

/** held claims are refreshed a slice this often (each once a beat) */
export const REFRESH_SLICE_MS = 100;

export class ChannelClaims {
  /** channels this process serves (refreshed each beat), by channelName */
  private readonly held = new Map<string, ChannelRef>();
  /** held claims still to refresh this beat */
  private refreshQueue: ChannelRef[] = [];

  constructor(private readonly link: Link) {}

  private async refresh(c: ChannelRef): Promise<void> {
    const { me, ttlMs } = this.link;
    const ok = await this.link.s.gwRefresh(keys.ch(c), keys.sim(c), memberValue(me), ttlMs, c.chan, nodePrefix(me));
    if (ok === 0)
      this.link.log.error({ channel: channelName(c) }, 'another node claimed a channel this node serves (it was unreachable longer than the claim TTL)');
  }

  /** every held claim refreshed now (after an outage, with the heartbeat) */
  refreshAll(): Array<Promise<void>> {
    return [...this.held.values()].map((c) => this.refresh(c));
  }

  /**
   * The held claims are refreshed a slice at a time, each once a beat: a thousand refreshes at once held an open's
   * command behind them on the connection, and their answers took a turn of the event loop (open p99 +2-6 ms).
   */
  refreshSlice(): void {
    if (!this.link.up || this.held.size === 0) return;
    if (this.refreshQueue.length === 0) this.refreshQueue = [...this.held.values()];
    const n = Math.ceil((this.held.size * REFRESH_SLICE_MS) / beatMsFor(this.link.ttlMs));
    for (const c of this.refreshQueue.splice(0, n)) {
      // one unheld since the queue was made is left to expire
      if (this.held.get(channelName(c)) === c) this.link.track(this.refresh(c));
    }
  }

  async lookup(c: ChannelRef): Promise<{ owner?: Member; simHolder?: Member }> {
    this.link.need();
    const [cur, holder] = await this.link.s.gwLookup(keys.ch(c), keys.sim(c), c.chan);
    return { owner: cur ? parseMember(cur) : undefined, simHolder: holder ? parseMember(holder) : undefined };
  }

  async claim(c: ChannelRef, replace?: Member): Promise<ClaimAnswer> {
    this.link.need();
    const { me, ttlMs } = this.link;
    const [what, v] = await this.link.s.gwClaim(keys.ch(c), keys.sim(c), memberValue(me), ttlMs, c.chan, nodePrefix(me), replace ? nodePrefix(replace) : '');
    if (what === 'ok') return { ok: true };
    return { ok: false, why: what === 'sim' ? 'sim' : 'owned', holder: parseMember(v)! };
  }

  hold(c: ChannelRef): void {
    const name = channelName(c);
    if (this.held.has(name)) return;
    // claimed by the open that made the stream (a third of its TTL ago at most), maybe in another process of this
    // node: from now on refreshed here, with the next slices (no round trip of its own on the open's path)
    this.held.set(name, c);
  }

  heldCount(): number {
    return this.held.size;
  }

  unhold(c: ChannelRef): void {
    if (!this.held.delete(channelName(c))) return;
    if (this.link.up) this.link.track(this.link.s.gwRelease(keys.ch(c), keys.sim(c), nodePrefix(this.link.me), c.chan));
  }
}
