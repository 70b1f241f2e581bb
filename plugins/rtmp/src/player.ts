/**
 * One RTMP player: a bus reader of its stream's RTMP form. The bus holds what the socket cannot take yet (bounded:
 * past the cap it skips to the next keyframe, and a reader that stays stuck is ended), so this writes each unit's
 * shared bytes, starts the player at a start point with the stream's configuration, and reports.
 */
import type { Socket } from 'node:net';
import type { AccessUnit, MediaReader, PlayerHandle, ReaderHandle } from '../../../plugin-sdk';
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
  bytesOut = 0;
  skips = 0;
  private starting = true;
  private version = -1;

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
    socket.on('drain', () => this.sub?.resume());
  }

  /** every form is a copy made by the encoder: nothing a player writes is a bus payload */
  holdsPayloads(): boolean {
    return false;
  }

  writable(): boolean {
    return this.socket.writableLength < this.highWater;
  }

  write(_unit: AccessUnit, f: RtmpFrame): void {
    const s = this.socket;
    if (s.destroyed) return;
    let n: number;
    if (!this.starting) {
      s.write(f.bytes);
      n = f.bytes.length;
    } else {
      // (the bus starts a reader at a keyframe; a unit that is no start point waits for one)
      if (f.init === undefined) return;
      n = 0;
      if (this.version !== f.version) {
        s.write(f.init);
        n += f.init.length;
      }
      const own = f.mediaAt === 0 ? f.bytes : f.bytes.subarray(f.mediaAt);
      s.write(own);
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
      backlogBytes: this.socket.writableLength + (this.sub?.stats.queuedBytes ?? 0),
      skips: this.skips,
      waitingForKeyframe: this.starting,
    };
  }
}
