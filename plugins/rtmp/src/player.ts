/**
 * One RTMP player: a bus reader of its stream's RTMP form. The bus holds what the socket cannot take yet (bounded:
 * past the cap it skips to the next keyframe, and a reader that stays stuck is ended), so this writes each unit's
 * shared bytes, starts the player at a start point with the stream's configuration, and reports.
 */
import type { Socket } from 'node:net';
import {
  BYTE_TOTAL_START,
  DirectWriter,
  type WritableAccount,
  type AccessUnit,
  type MediaReader,
  type PlayerHandle,
  type ReaderHandle,
} from '../../../plugin-sdk';
import type { RtmpFrame } from './rtmp-format';

export interface RtmpPlayerStats {
  id: string;
  stream: string;
  reqId: string;
  remote: string;
  bytesOut: number;
  backlogBytes: number;
  skips: number;
  waitingForKeyframe: boolean;
}

export class RtmpPlayer implements MediaReader<RtmpFrame> {
  sub: ReaderHandle | undefined;
  bytesOut = BYTE_TOTAL_START;
  skips = 0;
  private starting = true;
  private version = -1;
  /** a unit's message goes to the socket's handle past node's Writable while nothing waits there (plugin-sdk) */
  private readonly direct: DirectWriter;
  /** the connection ended: kept here, so that a unit's path reads none of node's stream state (WritableAccount) */
  private closed = false;

  constructor(
    readonly id: string,
    readonly stream: string,
    readonly reqId: string,
    readonly remote: string,
    socket: Socket,
    /** the connection's account of what it has in node's Writable (it writes control messages to the socket too) */
    private readonly account: WritableAccount,
    private readonly highWater: number,
    private readonly handle: PlayerHandle,
    private readonly sent: (n: number) => void,
    private readonly ended: (reason: string) => void,
  ) {
    const resume = (): void => this.sub?.resume();
    socket.on('drain', resume);
    // a message the kernel took in part may be all the backlog there is: its end resumes the player as a drain would
    this.direct = new DirectWriter(socket, resume);
  }

  /** every form is a copy made by the encoder: nothing a player writes is a bus payload */
  holdsPayloads(): boolean {
    return false;
  }

  writable(): boolean {
    return this.backlog() < this.highWater;
  }

  /** bytes written that the kernel has not taken yet: in node's Writable, and handed to libuv past it */
  private backlog(): number {
    return this.account.held() + this.direct.pending;
  }

  write(_unit: AccessUnit, f: RtmpFrame): void {
    if (this.closed) return;
    let n: number;
    if (!this.starting) {
      this.send(f.bytes);
      n = f.bytes.length;
    } else {
      // (the bus starts a reader at a keyframe; a unit that is no start point waits for one)
      if (f.init === undefined) return;
      n = 0;
      if (this.version !== f.version) {
        this.send(f.init);
        n += f.init.length;
      }
      const own = f.mediaAt === 0 ? f.bytes : f.bytes.subarray(f.mediaAt);
      this.send(own);
      n += own.length;
      this.starting = false;
    }
    this.version = f.version;
    this.bytesOut += n;
    this.sent(n);
    this.handle.sent(n);
  }

  /** past node's Writable while nothing of the connection's is there, else through it, after what is */
  private send(b: Buffer): void {
    if (!this.direct.write(b, this.account.clear)) this.account.write(b);
  }

  skipped(): void {
    this.starting = true;
    this.skips++;
  }

  end(reason: string): void {
    this.ended(reason);
  }

  /** the connection ended */
  close(): void {
    this.closed = true;
    this.sub?.close();
    this.handle.close();
  }

  stats(): RtmpPlayerStats {
    return {
      id: this.id,
      stream: this.stream,
      reqId: this.reqId,
      remote: this.remote,
      bytesOut: this.bytesOut,
      backlogBytes: this.backlog() + (this.sub?.stats.queuedBytes ?? 0),
      skips: this.skips,
      waitingForKeyframe: this.starting,
    };
  }
}
