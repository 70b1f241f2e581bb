/**
 * One relay: publishes a request's stream to one RTMP(S) URL for as long as the request lives, reconnecting with a
 * back-off (retryMinMs doubling to retryMaxMs; back at retryMinMs after a publish that held retryMaxMs). It reads
 * the bus only while the server takes its publish, so a server that is away costs a timer, not a reader.
 */
import { BYTE_TOTAL_START, type Cancel, type Clock, type MediaStream, type PlayerHandle, type ReaderOptions } from '../../../../plugin-sdk';
import type { RtmpFrame } from '../rtmp-format';
import { RelayClient } from './relay-client';
import { resolveAllowed, type HostRule } from './relay-hosts';
import { RelaySink } from './relay-sink';
import type { RelayTarget } from './relay-url';

export type RelayState = 'connecting' | 'publishing' | 'retrying' | 'stopped';

/** what status shows of a relay (an element of the request's `relays` flag), kept up to date in place */
export interface RelayView {
  relayId: string;
  /** redacted: no stream key */
  url: string;
  state: RelayState;
  /** when it entered this state */
  since: string;
  /** retrying: why the last attempt failed */
  error?: string;
  /** bytes sent to the server, all connections */
  bytesOut: number;
}

export interface RelayEnv {
  clock: Clock;
  hosts: HostRule;
  ca: string[] | undefined;
  connectTimeoutMs: number;
  retryMinMs: number;
  retryMaxMs: number;
  highWaterBytes: number;
  /** the request's stream and how a relay reads it; undefined once it is gone */
  source(reqId: string): { media: MediaStream; opts: ReaderOptions<RtmpFrame> } | undefined;
  /** the state changed (view updated); `prev` was the state before */
  changed(r: Relay, prev: RelayState): void;
  sent(n: number): void;
}

export class Relay {
  readonly view: RelayView;
  /** failed attempts since the last publish that held */
  failures = 0;
  private client: RelayClient | undefined;
  private sink: RelaySink | undefined;
  private retry: Cancel | undefined;
  private publishingSince = 0;
  /** bumped by each attempt and failure: a callback of an earlier connection is ignored */
  private generation = 0;

  constructor(
    readonly id: string,
    readonly reqId: string,
    readonly appId: string,
    readonly target: RelayTarget,
    private readonly env: RelayEnv,
    private readonly handle: PlayerHandle,
  ) {
    this.view = { relayId: id, url: target.redacted, state: 'connecting', since: new Date(env.clock.now()).toISOString(), bytesOut: BYTE_TOTAL_START };
  }

  get state(): RelayState {
    return this.view.state;
  }

  start(): void {
    this.attempt();
  }

  stop(): void {
    if (this.view.state === 'stopped') return;
    this.generation++;
    this.retry?.();
    this.retry = undefined;
    this.teardown();
    this.handle.close();
    this.set('stopped', undefined);
  }

  private attempt(): void {
    const gen = ++this.generation;
    this.retry = undefined;
    this.set('connecting', this.view.error);
    resolveAllowed(this.target.host, this.env.hosts).then(
      (address) => {
        if (gen !== this.generation) return;
        this.client = new RelayClient({
          target: this.target,
          address,
          timeoutMs: this.env.connectTimeoutMs,
          ca: this.env.ca,
          highWaterBytes: this.env.highWaterBytes,
          publishing: (streamId) => this.publishing(gen, streamId),
          failed: (reason) => this.failed(gen, reason),
          drain: () => this.sink?.sub?.resume(),
        });
      },
      (err: NodeJS.ErrnoException) => this.failed(gen, err.code ? `${err.code}: ${err.message}` : err.message),
    );
  }

  private publishing(gen: number, streamId: number): void {
    const client = this.client;
    const src = this.env.source(this.reqId);
    if (gen !== this.generation || !client) return;
    if (!src || src.media.closed) return this.failed(gen, "the request's stream is gone");
    const sink = new RelaySink(
      client,
      streamId,
      (n) => {
        this.view.bytesOut += n;
        this.handle.sent(n);
        this.env.sent(n);
      },
      (reason) => this.failed(gen, `its reader of the stream ended (${reason})`),
    );
    this.sink = sink;
    try {
      sink.sub = src.media.subscribe(sink, src.opts);
    } catch (err) {
      return this.failed(gen, `the stream cannot be read (${(err as Error).message})`);
    }
    this.publishingSince = this.env.clock.now();
    this.set('publishing', undefined);
  }

  private failed(gen: number, reason: string): void {
    if (gen !== this.generation || this.view.state === 'stopped') return;
    this.generation++;
    this.teardown();
    if (this.publishingSince !== 0 && this.env.clock.now() - this.publishingSince >= this.env.retryMaxMs) this.failures = 0;
    this.publishingSince = 0;
    this.failures++;
    const delay = Math.min(this.env.retryMaxMs, this.env.retryMinMs * 2 ** Math.min(this.failures - 1, 20));
    this.set('retrying', reason);
    this.retry = this.env.clock.setTimeout(() => this.attempt(), delay);
  }

  private teardown(): void {
    this.sink?.sub?.close();
    this.sink = undefined;
    this.client?.close();
    this.client = undefined;
  }

  private set(state: RelayState, error: string | undefined): void {
    const prev = this.view.state;
    const v = this.view;
    if (state !== prev) v.since = new Date(this.env.clock.now()).toISOString();
    v.state = state;
    if (error === undefined) delete v.error;
    else v.error = error;
    this.env.changed(this, prev);
  }
}
