/**
 * One RTMP player: a bus reader of its stream's RTMP form. The bus holds what the socket cannot take yet (bounded:
 * past the cap it skips to the next keyframe, and a reader that stays stuck is ended), so this writes each unit's
 * shared bytes, starts the player at a start point with the stream's configuration, and reports.
 */
import type { Socket } from 'node:net';
import { BYTE_TOTAL_START, DirectWriter, type AccessUnit, type MediaReader, type PlayerHandle, type ReaderHandle } from '../../../plugin-sdk';
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

  constructor(
    readonly id: string,
    readonly stream: string,
    readonly reqId: string,
    readonly remote: string,
    private readonly socket: Socket,
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
    return this.direct.backlog < this.highWater;
  }

  write(_unit: AccessUnit, f: RtmpFrame): void {
    if (this.socket.destroyed) return;
    let n: number;
    if (!this.starting) {
      this.direct.send(f.bytes);
      n = f.bytes.length;
    } else {
      // (the bus starts a reader at a keyframe; a unit that is no start point waits for one)
      if (f.init === undefined) return;
      n = 0;
      if (this.version !== f.version) {
        this.direct.send(f.init);
        n += f.init.length;
      }
      const own = f.mediaAt === 0 ? f.bytes : f.bytes.subarray(f.mediaAt);
      this.direct.send(own);
      n += own.length;
      this.starting = false;
    }
    this.version = f.version;
    this.bytesOut += n;
    this.sent(n);
    this.handle.sent(n);
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
      backlogBytes: this.direct.backlog + (this.sub?.stats.queuedBytes ?? 0),
      skips: this.skips,
      waitingForKeyframe: this.starting,
    };
  }
}
