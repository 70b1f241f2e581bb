/**
 * The media bus: named streams that any plugin may publish, read, or derive from.
 *
 * - A stream has tracks (video, audio), a GOP cache (from the latest keyframe) and readers. Units are immutable
 *   and shared by reference (see media.ts).
 * - A reader is what a plugin gives `stream.subscribe()` (a `MediaReader`: write, writable, holdsPayloads…); it gets
 *   back a `ReaderHandle` (pause, resume, stats, close). Every reader has its own bounded queue: while it is not
 *   writable, units queue; past `maxQueueBytes` the queue is dropped and the reader resumes at the next keyframe
 *   (it loses whole GOPs, never memory, and never slows the publisher or another reader); a reader that takes
 *   nothing for `dropAfterMs` while media waits for it, or misses more than 4 x `maxQueueBytes`, is ended with
 *   reason 'reader stuck'.
 * - A format (`defineFormat`) frames each unit once per stream for all of that format's readers (an FLV tag, RTP
 *   packets, a CMAF chunk): its encoder sees every unit in order while the stream has such readers.
 * - A stage (`MediaBus.registerStage`) derives a form of a stream (audio as AAC): readers that ask for it share one
 *   derived stream per (stream, stage, params), which the bus starts with the first such reader and stops with the
 *   last.
 */
import type { Logger } from 'pino';
import type { AccessUnit, TrackInfo } from './media';

/** Removes what was registered. */
export type Off = () => void;

/**
 * A reader of a stream, as a plugin writes it. The bus calls `write` while `writable()` is true and queues otherwise;
 * call `ReaderHandle.resume()` when the reader can take more (e.g. on a socket's 'drain').
 * No method is called before `subscribe()` returns: the first calls come from a microtask.
 */
export interface MediaReader<F = undefined> {
  /** one unit; `framed` is its form in the reader's format (undefined when the reader asked for no format) */
  write(unit: AccessUnit, framed: F): void;
  /** tracks known so far (filtered by the reader's `media`), and again whenever one changes (new SPS, codec) */
  tracks?(tracks: ReadonlyArray<TrackInfo>): void;
  writable?(): boolean;
  /** the reader fell behind: what was queued for it is dropped and it resumes at the next keyframe */
  skipped?(info: { units: number; bytes: number }): void;
  /** the reader ended: the stream closed, or it was stuck ('reader stuck: …'), or it threw */
  end?(reason: string): void;
  /**
   * Whether this reader may still read the bytes of any payload it was given (`unit.payload`, or a view of it such as
   * a form's body that points into it). The bus asks after it wrote units, to decide when a payload's memory
   * (Publisher.alloc) may carry another frame: memory is shared by every stream of the bus, so a wrong `false` can
   * put one vehicle's bytes on another vehicle's player.
   *
   * "Holds" means: a payload, or a view of it, is still referenced anywhere the reader's work may read it later: kept
   * in a field or an array, queued in a socket's buffer (`socket.write(view)` keeps a reference until the kernel took
   * it: `writableLength > 0`), waiting in a timer, a promise or another thread. Bytes copied out (`Buffer.from(x)`,
   * `Buffer.concat`, an encoder's output) are not held.
   *
   * Answer false only when none is: e.g. a socket written by reference whose `writableLength` is 0, and nothing
   * kept. Answer true when unsure. Leave it out if the reader cannot tell (it keeps units, or hands them to code it
   * does not control): a reader without it is taken to hold everything it was given, which is always safe, but then
   * nothing of the stream's payload memory is reused while it reads (the log says so once per stream, naming the
   * reader, and /metrics counts such streams by reader: `gw_core_bus_payload_reuse_off_streams`). A reader that
   * throws here is taken to hold.
   *
   * Tests run with `GW_POISON_PAYLOADS=1` (test/setup.ts): memory that goes back to the pool is overwritten with a
   * poison pattern, so a payload read after a wrong `false` shows garbage, not a frame that passes for right.
   */
  holdsPayloads?(): boolean;
}

/**
 * A format's framing of units, made once per unit for every reader of that format on a stream. The encoder sees
 * every unit of the stream in order from the latest keyframe on (the GOP cache first, when it is created), so it
 * may keep state (parameter sets, timestamps); it must not change the units.
 */
export interface FormatEncoder<F> {
  /** the stream's tracks (all of them), before the units that need them */
  tracks?(tracks: ReadonlyArray<TrackInfo>): void;
  /** the unit's form; undefined leaves the unit out for this format's readers */
  encode(unit: AccessUnit): F | undefined;
  /**
   * The forms of `units` (the stream's GOP cache, from its keyframe on) for a reader joining now, made without
   * changing this encoder's state: a new encoder of the same kind, say, given `tracks` and these units. A form may
   * differ from the one `encode` made then only in what a reader starting here cannot tell (FLV: its configuration
   * version). An encoder with it lets the bus keep its GOP cache as plain numbers instead of keeping each unit's
   * form as long as its GOP (see core/bus/gop-cache.ts); without it the bus keeps the forms, and the units with them.
   * Its units carry no `receivedAt`.
   */
  catchUp?(units: ReadonlyArray<AccessUnit>, tracks: ReadonlyArray<TrackInfo>): ReadonlyArray<F | undefined>;
  /** the last reader of this format left the stream, or the stream closed */
  close?(): void;
}

export interface UnitFormat<F> {
  readonly name: string;
  createEncoder(stream: StreamInfo): FormatEncoder<F>;
}

/** Declares a format; pass the same value to every subscribe that wants it (it is compared by identity). */
export function defineFormat<F>(name: string, createEncoder: (stream: StreamInfo) => FormatEncoder<F>): UnitFormat<F> {
  return { name, createEncoder };
}

/** Which tracks a reader takes: audio and video, audio only, video only (the names of the spec's mediaTyp). */
export type MediaSelect = 'av' | 'a' | 'v';

/** A stage's form of a stream: its name and parameters (a stage may take none). */
export interface StageRef {
  stage: string;
  params?: Record<string, unknown>;
}

/**
 * What `subscribe` reads through: a stage's form of the stream (its name, or a `StageRef`), or a chain of them, each
 * reading the form before it (`['video-thinner', aacRef]`: key frames only, then audio as AAC). The bus runs one
 * instance of each link per (its input, stage, params), shared by every reader of the same chain.
 */
export type Via = string | StageRef | ReadonlyArray<string | StageRef>;

export interface ReaderOptions<F = undefined> {
  /** tracks to read (default 'av'). An audio-only reader may start at any unit; a video reader at a keyframe */
  media?: MediaSelect;
  /** the format whose framing `write` gets as its second argument */
  format?: UnitFormat<F>;
  /** read a stage's form of the stream instead of the stream itself (e.g. { stage: 'aac' }), or a chain of forms */
  via?: Via;
  /** queued bytes past which this reader skips ahead to the next keyframe (default: the bus's maxQueueBytes) */
  maxQueueBytes?: number;
  /** a reader that takes nothing this long while media waits for it is ended (default: the bus's, 30 s) */
  dropAfterMs?: number;
  /** start from the GOP cache (latest keyframe) instead of the next start point; default true */
  fromKeyframe?: boolean;
  /**
   * Who reads, for the log and /metrics, e.g. 'hls-out segmenter': 1-100 characters on one line, a few values per
   * plugin (it is a metrics label, so never a stream or client name). A reader whose sink has no `holdsPayloads`
   * turns payload memory reuse off for its stream and is named there: without this name, by the stage being started
   * when it subscribes, or by the plugin whose code called subscribe.
   */
  reader?: string;
}

export interface ReaderStats {
  units: number;
  bytes: number;
  /** times the reader fell behind and was moved to the next keyframe */
  skips: number;
  /** units dropped by those skips */
  skippedUnits: number;
  queuedBytes: number;
}

export interface ReaderHandle {
  /** the sink can take more: deliver what is queued */
  resume(): void;
  /** stop reading (no `end` call follows) */
  close(): void;
  readonly closed: boolean;
  readonly stats: Readonly<ReaderStats>;
}

export interface Publisher {
  setTrack(info: TrackInfo): void;
  /** one unit (owned by the bus from here on: never change it) */
  push(unit: AccessUnit): void;
  /**
   * Memory for the payload of the next unit you push, not zeroed: the bus reuses it once no reader can read it any
   * more, which spares the collector (see core/bus/payload-arena.ts). Write all of it, and push it before you call
   * alloc again (or drop it: memory carved and never pushed is simply not reused). A unit's payload may also be any
   * Buffer of your own.
   */
  alloc(bytes: number): Buffer;
  /**
   * Memory from `alloc` that no unit will carry after all (a frame dropped, or its payload made anew elsewhere): the
   * bus may reuse it. Without this call the chunk it was carved from is never reused (its other units' memory is
   * left to the collector). Call it once you no longer read it; nothing else may hold it.
   */
  discard(payload: Buffer): void;
  /** the source stopped for now (e.g. terminal disconnected); readers stay */
  pause(): void;
  /**
   * Anchors the stream's timeline to wall-clock time: `dtsMs` on the timeline was `epochMs` (e.g. from an RTCP
   * sender report). Without it the bus anchors each publisher's first unit to the gateway clock's now.
   */
  setWallClock(epochMs: number, dtsMs: number): void;
  /** false once replaced by another publisher or the stream closed */
  readonly active: boolean;
  readonly closed: boolean;
  /** called once when the stream closes (e.g. last request gone): the source should stop */
  onClose(cb: () => void): void;
}

export interface MediaStreamStats {
  unitsIn: number;
  bytesIn: number;
  videoFrames: number;
  audioFrames: number;
  /** readers, stage inputs included */
  subscribers: number;
  gopBytes: number;
  queuedBytes: number;
  skips: number;
  /** readers ended because they stayed stuck */
  droppedReaders: number;
  /** per format in use: its readers */
  formats: Record<string, number>;
}

/** What a format encoder or a stage learns about the stream it works on. */
export interface StreamInfo {
  readonly name: string;
  readonly tracks: ReadonlyArray<TrackInfo>;
  /** wall-clock time (epoch ms) of a time on the timeline (ms), once the stream has a unit */
  wallClock(dtsMs: number): number | undefined;
}

export type StreamEvent = 'ready' | 'tracks' | 'publisher' | 'closed';

export interface MediaStream extends StreamInfo {
  /** who made it: 'sessions' for request streams, else the plugin's name */
  readonly owner: string;
  /** for a stage's stream: the stream it derives from, and the stage */
  readonly derivedFrom?: { stream: string; stage: string; params: Readonly<Record<string, unknown>> };
  /** true from the first keyframe (or after audio alone, for a stream that expects no video) */
  readonly ready: boolean;
  readonly closed: boolean;
  /** counts publishers: 1 for the first, +1 at each replacement (a timeline discontinuity for HLS and RTCP) */
  readonly epoch: number;
  /** at most one publisher at a time; a second attach replaces the first (terminal reconnect) */
  attachPublisher(): Publisher;
  subscribe<F = undefined>(sink: MediaReader<F>, opts?: ReaderOptions<F>): ReaderHandle;
  /** 'ready' (once), 'tracks' (on each change), 'publisher' (a new publisher attached), 'closed' (with the reason) */
  on(event: 'ready' | 'publisher', cb: () => void): Off;
  on(event: 'tracks', cb: (tracks: ReadonlyArray<TrackInfo>) => void): Off;
  on(event: 'closed', cb: (reason: string) => void): Off;
  stats(): MediaStreamStats;
}

/** A stream a plugin made: it closes it (or the kernel does, when the plugin stops). */
export interface OwnedStream extends MediaStream {
  close(reason: string): void;
}

/** A stage's params as its `params` check completes them (a stage without a check gets what readers gave). */
export type StageParams = Record<string, unknown>;

/** What a stage gets when the bus starts it for one (stream, params). */
export interface StageContext<P extends object = StageParams> {
  /** the stream to read */
  readonly input: MediaStream;
  /** the derived stream's publisher */
  readonly output: Publisher;
  readonly params: Readonly<P>;
  readonly log: Logger;
  /** the stage cannot go on (e.g. its input reader was ended): closes the derived stream, ending its readers */
  fail(reason: string): void;
}

export interface StageInstance {
  /** the last reader left, or the input closed: stop reading and release what the stage holds */
  stop(): void;
  /**
   * Of the units the bus passes through (StageDefinition.passes), which go on to the stage's stream (default: all).
   * It runs on the publisher's path for each passed unit, the input's GOP at start included: cheap and synchronous.
   * A throw drops the unit. Passed units keep their input's numbering, so payload reuse stays exact.
   */
  keep?(unit: AccessUnit): boolean;
}

/**
 * A stage, typed by its params `P`: what `params` returns is what `start` finds in `ctx.params`. A stage with params
 * gives `params`, so that `P` is what the bus hands over, not whatever a reader wrote.
 */
export interface StageDefinition<P extends object = StageParams> {
  /** unique on the gateway; readers name it in `via` */
  name: string;
  /**
   * Checks and completes the reader's params (defaults filled in), so equal forms share one instance. Throw a
   * TypeError to refuse: the subscribe throws it.
   */
  params?(given: Readonly<Record<string, unknown>>): P;
  /**
   * Tracks the stage leaves as they are: the bus hands their units and track changes to the derived stream itself,
   * the same objects in the same order, as the input gets them (and its GOP cache when the stage starts), so the
   * stage neither reads nor republishes them. Subscribe to the rest only (e.g. `media: 'a'` when video passes).
   * Why: a unit republished by a stage costs a reader's queue, a call and a second push; and the bus can see who
   * still holds a passed unit, so the input's payload memory stays reusable (Publisher.alloc).
   */
  passes?: ReadonlyArray<'video' | 'audio'>;
  start(ctx: StageContext<P>): StageInstance;
}

export interface CreateStreamOptions {
  /** false for an audio-only source: ready comes with its first audio unit (default true: ready at a keyframe) */
  expectVideo?: boolean;
}

export interface MediaBus {
  get(name: string): MediaStream | undefined;
  /** streams open now, derived ones included */
  list(): MediaStream[];
  /** called for every stream created from now on (request streams, plugin streams, stage streams) */
  onStream(cb: (s: MediaStream) => void): Off;
  /**
   * A stream of the plugin's own (names: letters, digits and `_ . ~ -`, up to 128). Throws if the name is taken.
   * The kernel closes it when the plugin stops, if the plugin did not.
   */
  create(name: string, opts?: CreateStreamOptions): OwnedStream;
  /** A stage other plugins' readers can ask for by name; unregistered when the plugin stops. */
  registerStage<P extends object>(def: StageDefinition<P>): void;
  /** names of the stages registered */
  stages(): string[];
  /**
   * Makes `format` the gateway's format for `key` (one that names what its bytes are, e.g. formats/flv-form's
   * flvFormatKey): readers of other plugins asking for the key get it, and so share its one encoder per stream.
   * Withdrawn when the plugin stops.
   */
  shareFormat(key: string, format: UnitFormat<unknown>): void;
  /** The gateway's format for `key`: the one shared under it, else `make()`'s, shared from now on. */
  sharedFormat<F>(key: string, make: () => UnitFormat<F>): UnitFormat<F>;
}

export const STREAM_NAME = /^[A-Za-z0-9_.~-]{1,128}$/;
