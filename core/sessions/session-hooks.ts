/**
 * The plugins' hooks on the life of streams and requests, in the order they were added. Each hook runs guarded: a
 * plugin that throws is logged and the session carries on, so one faulty plugin cannot leave a request half opened
 * or half closed. The stream-closed hooks are awaited where the stream is torn down (stream-registry.ts).
 */
import type { Logger } from 'pino';
import type { ChannelStream, CloseCauseValue, StrmRequest } from '../../plugin-sdk/sessions';

export class SessionHooks {
  readonly streamOpened: Array<(s: ChannelStream) => void> = [];
  readonly streamClosed: Array<(s: ChannelStream) => void | Promise<void>> = [];
  readonly requestOpened: Array<(r: StrmRequest, s: ChannelStream) => void> = [];
  readonly requestClosed: Array<(r: StrmRequest, cause: CloseCauseValue) => void> = [];

  constructor(private readonly log: Logger) {}

  fireStreamOpened(s: ChannelStream): void {
    for (const cb of this.streamOpened) this.safe(() => cb(s), 'stream-opened hook');
  }

  fireRequestOpened(r: StrmRequest, s: ChannelStream): void {
    for (const cb of this.requestOpened) this.safe(() => cb(r, s), 'request-opened hook');
  }

  fireRequestClosed(r: StrmRequest, cause: CloseCauseValue): void {
    for (const cb of this.requestClosed) this.safe(() => cb(r, cause), 'request-closed hook');
  }

  private safe(fn: () => void, what: string): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err }, `${what} failed`);
    }
  }
}
