/**
 * One HTTP-FLV or WS-FLV player: a reader of its stream's FLV form on the bus. The bus holds what the player's
 * socket cannot take yet (bounded; past the cap it skips to the next keyframe; a reader that stays stuck is ended),
 * so all this does is write each unit's shared bytes, start the player properly, and report.
 */
import { BYTE_TOTAL_START, type AccessUnit, type MediaReader, type PlayerHandle, type ReaderHandle } from '../../../plugin-sdk';
import type { FlvFrame } from './flv-format';
import type { Transport } from './transport';
import type { TickFlush } from './tick';

/** a player we ended that is still not gone this long after (its peer not reading) is destroyed */
const END_GRACE_MS = 5000;

export interface PlayerStats {
  id: string;
  stream: string;
  reqId: string;
  protocol: 'http-flv' | 'ws-flv';
  /** the peer, address:port */
  remote: string;
  /** FLV bytes written to it */
  bytesOut: number;
  /** bytes it has not taken yet: in its socket's buffer, and queued for it on the bus */
  backlogBytes: number;
  peakBacklogBytes: number;
  /** times it fell behind and was moved to the next keyframe */
  skips: number;
  /** it has not started yet, or was skipped: it waits for a keyframe */
  waitingForKeyframe: boolean;
}

/** What players report to the server they belong to. */
export interface PlayerOwner {
  readonly tick: TickFlush;
  sent(n: number): void;
  gone(p: Player): void;
  dropped(p: Player, reason: string): void;
}

export class Player implements MediaReader<FlvFrame> {
  sub: ReaderHandle | undefined;
  bytesOut = BYTE_TOTAL_START;
  skips = 0;
  peakBacklog = 0;
  private starting = true;
  private headerSent = false;
  /** the configuration version of the last unit written (see FlvFrame.version) */
  private version = -1;
  private closing = false;
  private isGone = false;
  private endTimer: NodeJS.Timeout | undefined;
  /**
   * MediaReader.holdsPayloads: the units' bytes are only ever in the socket's buffer (written by reference), so an empty
   * buffer means this player reads none of them any more and the stream's payload memory can be reused.
   */
  readonly holdsPayloads: (() => boolean) | undefined;

  constructor(
    readonly id: string,
    readonly stream: string,
    readonly reqId: string,
    readonly remote: string,
    private readonly t: Transport,
    private readonly handle: PlayerHandle,
    private readonly owner: PlayerOwner,
  ) {
    t.onDrain(this.resume);
    t.onGone(this.onGone);
    this.holdsPayloads = t.backlogCoversAll ? () => t.backlog() > 0 : undefined;
  }

  get protocol(): 'http-flv' | 'ws-flv' {
    return this.t.protocol;
  }

  get gone(): boolean {
    return this.isGone;
  }

  writable(): boolean {
    return this.t.backlog() < this.t.writableBelow;
  }

  write(unit: AccessUnit, f: FlvFrame): void {
    const t = this.t;
    if (!t.open) return;
    let n: number;
    if (!this.starting) {
      t.send(f, true);
      n = f.bytes;
    } else {
      const init = f.init;
      // (the bus starts a reader at a keyframe; a unit that is no start point waits for one)
      if (init === undefined) return;
      // the header only now: its flags say which tracks the stream turned out to have
      n = t.start(f, this.headerSent ? undefined : init.header, this.version !== f.version ? init.config : undefined);
      this.headerSent = true;
      this.starting = false;
    }
    this.version = f.version;
    this.bytesOut += n;
    this.owner.sent(n);
    this.handle.sent(n);
    if (!f.observed && unit.receivedAt !== undefined) {
      f.observed = true;
      this.owner.tick.unitWritten(unit.receivedAt);
    }
    const backlog = t.backlog() + (this.sub?.stats.queuedBytes ?? 0);
    if (backlog > this.peakBacklog) this.peakBacklog = backlog;
  }

  skipped(): void {
    this.starting = true;
    this.skips++;
  }

  end(reason: string): void {
    if (reason.startsWith('reader stuck')) {
      this.owner.dropped(this, reason);
      this.drop();
    } else {
      this.close();
    }
  }

  private readonly resume = (): void => {
    this.sub?.resume();
  };

  /** Ends it gracefully (HTTP end, WS close 1000); destroys it if the peer does not take the rest in time. */
  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.sub?.close();
    this.t.end();
    this.endTimer = setTimeout(() => this.drop(), END_GRACE_MS);
    this.endTimer.unref();
  }

  drop(): void {
    this.closing = true;
    this.sub?.close();
    this.t.destroy();
  }

  private readonly onGone = (): void => {
    if (this.isGone) return;
    this.isGone = true;
    if (this.endTimer) clearTimeout(this.endTimer);
    this.sub?.close();
    this.handle.close();
    this.owner.gone(this);
  };

  stats(): PlayerStats {
    const queued = this.sub?.stats.queuedBytes ?? 0;
    return {
      id: this.id,
      stream: this.stream,
      reqId: this.reqId,
      protocol: this.t.protocol,
      remote: this.remote,
      bytesOut: this.bytesOut,
      backlogBytes: this.isGone ? 0 : this.t.backlog() + queued,
      peakBacklogBytes: this.peakBacklog,
      skips: this.skips,
      waitingForKeyframe: this.starting,
    };
  }
}
