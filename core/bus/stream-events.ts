import type { Logger } from 'pino';
import type { Off, StreamEvent } from '../../plugin-sdk/bus';

type Listener = (arg?: never) => void;

/** A bus stream's listeners: 'ready' is told once, and a listener added after the fact is answered at once. */
export class StreamEvents {
  private listeners: Record<StreamEvent, Listener[]> = { ready: [], tracks: [], publisher: [], closed: [] };

  constructor(
    private readonly log: Logger,
    private readonly stream: string,
  ) {}

  /** `ready`, `closed`: the stream's state now (a late 'ready' listener is called now; after the close, 'closed' ones are) */
  on(event: StreamEvent, cb: (arg: never) => void, ready: boolean, closed: boolean): Off {
    if (event === 'ready' && ready) {
      this.safe(() => (cb as () => void)(), event);
      return () => undefined;
    }
    if (closed) {
      if (event === 'closed') this.safe(() => (cb as (r: string) => void)('stream closed'), event);
      return () => undefined;
    }
    const list = this.listeners[event];
    list.push(cb as Listener);
    return () => {
      const l = this.listeners[event];
      const i = l.indexOf(cb as Listener);
      if (i >= 0) l.splice(i, 1);
    };
  }

  emit(event: StreamEvent, arg?: unknown): void {
    const list = this.listeners[event];
    if (list.length === 0) return;
    for (const cb of [...list]) this.safe(() => (cb as (a: unknown) => void)(arg), event);
  }

  /** forgets the listeners of these events (told for the last time) */
  clear(...events: StreamEvent[]): void {
    for (const e of events) this.listeners[e] = [];
  }

  private safe(fn: () => void, event: string): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err, stream: this.stream, event }, 'stream listener threw');
    }
  }
}
