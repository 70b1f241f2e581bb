import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import {
  STREAM_NAME,
  type CreateStreamOptions,
  type MediaBus,
  type MediaStream,
  type Off,
  type OwnedStream,
  type StageDefinition,
  type StageInstance,
  type StageRef,
  type UnitFormat,
  type Via,
} from '../../plugin-sdk/bus';
import { BusStream } from './stream';
import type { BusLimits } from './stream-deps';
import { ChunkPool } from './chunk-pool';
import { callerName } from './reader-name';

export type { BusLimits } from './stream-deps';
export type { BusStream } from './stream';

interface RegisteredStage {
  def: StageDefinition;
  owner: string;
  log: Logger;
}

/** Params in one canonical text (sorted keys), so equal forms name one derived stream. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- JSON.stringify answers undefined for undefined, a function or a symbol, though typed string
  return JSON.stringify(v) ?? 'null';
}

/**
 * The gateway's streams, by name, and the stages that derive streams from them. Plugins see it through a
 * `PluginBus` that remembers what each one created or registered, for the kernel to release at its stop.
 */
export class CoreMediaBus {
  private streams = new Map<string, BusStream>();
  private cbs: Array<(s: MediaStream) => void> = [];
  private stageDefs = new Map<string, RegisteredStage>();
  /** the stage whose start() runs now: what it subscribes to then is its reader (see nameReader) */
  private starting: string | undefined;
  /** formats shared between plugins by what their bytes are (MediaBus.shareFormat) */
  private readonly formats = new Map<string, UnitFormat<unknown>>();
  /** derived streams that close the link before them in a chain when they close */
  private chained = new WeakSet<BusStream>();
  constructor(
    readonly limits: BusLimits,
    private readonly log: Logger,
    private readonly now: () => number,
    /** payload chunks every stream's arena (Publisher.alloc) takes and gives back */
    readonly chunks: ChunkPool = new ChunkPool(now),
  ) {}

  get(name: string): BusStream | undefined {
    return this.streams.get(name);
  }

  list(): BusStream[] {
    return [...this.streams.values()];
  }

  get size(): number {
    return this.streams.size;
  }

  /** Streams whose payload memory is not reused now, by the reader that keeps it so (BusStream.reuseOffBy). */
  reuseOffByReader(): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.streams.values()) {
      const by = s.reuseOffBy;
      if (by !== undefined) out.set(by, (out.get(by) ?? 0) + 1);
    }
    return out;
  }

  /**
   * A reader that gave no name and cannot say when it is done: the stage being started, whose start() subscribes to
   * its input (the stack would show the plugin that asked for the stage), else the plugin whose code called subscribe.
   */
  private readonly nameReader = (): string => this.starting ?? callerName();

  onStream(cb: (s: MediaStream) => void): Off {
    this.cbs.push(cb);
    return () => {
      const i = this.cbs.indexOf(cb);
      if (i >= 0) this.cbs.splice(i, 1);
    };
  }

  create(name: string, owner: string, opts: CreateStreamOptions = {}): BusStream {
    if (!STREAM_NAME.test(name)) throw new TypeError(`stream name '${name}': use 1-128 letters, digits and _ . ~ -`);
    if (this.streams.has(name)) throw new Error(`stream ${name} exists already (made by ${this.streams.get(name)!.owner})`);
    const s = this.newStream(name, owner);
    if (opts.expectVideo === false) s.expectVideo = false;
    this.added(s);
    return s;
  }

  /** Closes a stream (its readers end with the reason, its publisher is told). */
  remove(name: string, reason: string): void {
    this.streams.get(name)?.close(reason);
  }

  private newStream(name: string, owner: string, derivedFrom?: BusStream['derivedFrom']): BusStream {
    return new BusStream(
      name,
      owner,
      {
        limits: this.limits,
        log: this.log,
        now: this.now,
        derive: (from, via) => this.derive(from, via),
        chunks: this.chunks,
        nameReader: this.nameReader,
      },
      (s) => {
        if (this.streams.get(s.name) === s) this.streams.delete(s.name);
      },
      derivedFrom,
    );
  }

  private added(s: BusStream): void {
    this.streams.set(s.name, s);
    for (const cb of [...this.cbs]) {
      try {
        cb(s);
      } catch (err) {
        this.log.error({ err, stream: s.name }, 'onStream listener threw');
      }
    }
  }

  // --- stages -----------------------------------------------------------------------------------------------------

  registerStage<P extends object>(stage: StageDefinition<P>, owner: string, log: Logger): void {
    // (the bus hands a stage the params its own check made: P is the stage's business)
    const def = stage as unknown as StageDefinition;
    if (!/^[a-z][a-z0-9-]{0,39}$/.test(def.name)) throw new TypeError(`stage name '${def.name}': lower-case letters, digits and dashes, up to 40`);
    if (def.passes !== undefined && !(Array.isArray(def.passes) && def.passes.every((k) => k === 'video' || k === 'audio'))) {
      throw new TypeError(`stage '${def.name}': passes lists 'video' and/or 'audio'`);
    }
    const taken = this.stageDefs.get(def.name);
    if (taken) throw new Error(`stage '${def.name}' is registered already (by plugin ${taken.owner})`);
    this.stageDefs.set(def.name, { def, owner, log });
  }

  unregisterStage(name: string): void {
    if (!this.stageDefs.delete(name)) return;
    for (const s of [...this.streams.values()]) if (s.derivedFrom?.stage === name) s.close(`stage ${name} stopped`);
  }

  stageNames(): string[] {
    return [...this.stageDefs.keys()];
  }

  /**
   * The derived stream a `via` names: for a chain, each link derived from the one before. A link a later one failed
   * on, or whose only reader was a later link, closes with it (a stage that passes every track reads nothing).
   */
  private derive(from: BusStream, via: Via): BusStream {
    if (typeof via === 'string' || !Array.isArray(via)) return this.deriveOne(from, via as string | StageRef);
    if (via.length === 0) throw new TypeError('via: an empty chain of stages');
    let s = from;
    for (const link of via as ReadonlyArray<string | StageRef>) {
      const input = s;
      try {
        s = this.deriveOne(input, link);
      } catch (err) {
        if (input !== from) this.closeIfUnread(input);
        throw err;
      }
      if (input !== from && !this.chained.has(s)) {
        this.chained.add(s);
        s.on('closed', () => this.closeIfUnread(input));
      }
    }
    return s;
  }

  /** a derived stream nobody reads, directly or through a stream derived from it */
  private closeIfUnread(s: BusStream): void {
    if (s.closed || s.readerCount > 0) return;
    for (const d of this.streams.values()) if (!d.closed && d.derivedFrom?.stream === s.name) return;
    s.close('no readers');
  }

  /**
   * The derived stream for (from, stage, params): found, or made and its stage started. It closes, and its stage
   * stops, when its last reader leaves or its input closes.
   */
  private deriveOne(from: BusStream, via: string | StageRef): BusStream {
    const ref: StageRef = typeof via === 'string' ? { stage: via } : via;
    const st = this.stageDefs.get(ref.stage);
    if (!st) {
      const known = this.stageNames();
      throw new Error(`no stage '${ref.stage}' on this gateway (${known.length ? `stages: ${known.join(', ')}` : 'no plugin registered a stage'})`);
    }
    const params = st.def.params ? st.def.params(ref.params ?? {}) : { ...(ref.params ?? {}) };
    const key = canonical(params);
    const name = `${from.name}~${ref.stage}${key === '{}' ? '' : `~${createHash('sha1').update(key).digest('hex').slice(0, 10)}`}`;
    const found = this.streams.get(name);
    if (found && !found.closed) return found;

    const d = this.newStream(name, st.owner, { stream: from.name, stage: ref.stage, params });
    d.expectVideo = from.expectVideo;
    const output = d.attachPublisher();
    const log = st.log.child({ stage: ref.stage, stream: from.name });
    let instance: StageInstance | undefined;
    let stopped = false;
    const stop = () => {
      if (stopped) return;
      stopped = true;
      offInput();
      try {
        instance?.stop();
      } catch (err) {
        log.error({ err }, 'stage failed to stop');
      }
      log.debug('stage stopped');
    };
    const offInput = from.on('closed', (reason) => d.close(reason));
    d.on('closed', stop);
    d.onIdle = () => d.close('no readers');
    this.added(d);
    try {
      const outer = this.starting;
      this.starting = `stage ${ref.stage}`;
      try {
        instance = st.def.start({ input: from, output, params, log, fail: (reason) => d.close(`stage ${ref.stage} failed: ${reason}`) });
      } finally {
        this.starting = outer;
      }
      // after the stage started: the tracks it made of the input's reach its stream first (see passInto)
      if (st.def.passes?.length) {
        const inst = instance;
        if (inst.keep) d.passage.keep = (u) => inst.keep!(u);
        from.passInto(d, st.def.passes);
      }
    } catch (err) {
      d.close('stage failed to start');
      throw new Error(`stage '${ref.stage}' failed to start on ${from.name}: ${(err as Error | undefined)?.message ?? String(err)}`, { cause: err });
    }
    log.debug({ params }, 'stage started');
    return d;
  }

  shareFormat(key: string, format: UnitFormat<unknown>): void {
    this.formats.set(key, format);
  }

  sharedFormat<F>(key: string, make: () => UnitFormat<F>): UnitFormat<F> {
    let f = this.formats.get(key) as UnitFormat<F> | undefined;
    if (f === undefined) this.formats.set(key, (f = make()));
    return f;
  }

  /** Withdraws `format` from `key` (its plugin stopped), unless another took the key since. */
  unshareFormat(key: string, format: UnitFormat<unknown>): void {
    if (this.formats.get(key) === format) this.formats.delete(key);
  }

  /** A plugin's view: what it creates and registers is released when it stops. */
  viewFor(plugin: string, log: Logger): PluginBus {
    return new PluginBus(this, plugin, log);
  }
}

/** The bus as one plugin sees it (`ctx.bus`). */
export class PluginBus implements MediaBus {
  private owned = new Set<BusStream>();
  private stageNames = new Set<string>();
  private shared = new Map<string, UnitFormat<unknown>>();
  private offs: Off[] = [];

  constructor(
    private readonly core: CoreMediaBus,
    private readonly plugin: string,
    private readonly log: Logger,
  ) {}

  get(name: string): MediaStream | undefined {
    return this.core.get(name);
  }
  list(): MediaStream[] {
    return this.core.list();
  }
  onStream(cb: (s: MediaStream) => void): Off {
    const off = this.core.onStream(cb);
    this.offs.push(off);
    return off;
  }
  create(name: string, opts?: CreateStreamOptions): OwnedStream {
    const s = this.core.create(name, this.plugin, opts);
    this.owned.add(s);
    s.on('closed', () => this.owned.delete(s));
    return s;
  }
  registerStage<P extends object>(def: StageDefinition<P>): void {
    this.core.registerStage(def, this.plugin, this.log);
    this.stageNames.add(def.name);
  }
  stages(): string[] {
    return this.core.stageNames();
  }
  shareFormat(key: string, format: UnitFormat<unknown>): void {
    this.core.shareFormat(key, format);
    this.shared.set(key, format);
  }
  sharedFormat<F>(key: string, make: () => UnitFormat<F>): UnitFormat<F> {
    return this.core.sharedFormat(key, make);
  }

  /** The plugin stopped: its stages go (their running instances with them), its streams close. */
  release(): void {
    for (const off of this.offs) off();
    this.offs = [];
    for (const name of this.stageNames) this.core.unregisterStage(name);
    this.stageNames.clear();
    for (const [key, f] of this.shared) this.core.unshareFormat(key, f);
    this.shared.clear();
    for (const s of [...this.owned]) s.close(`plugin ${this.plugin} stopped`);
    this.owned.clear();
  }
}
