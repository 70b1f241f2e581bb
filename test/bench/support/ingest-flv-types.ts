/**
 * ingest-flv's options and results, and the readers other benches put in place of its HTTP-FLV players (ingest-hls,
 * rtsp): the types every part of the bench and its comparisons share.
 */
import type { OwnGc } from './own-gc';
import type { LateFigures } from './late-episodes';
import type { Sample } from './process-probe';
import type { SynthStream, SynthTerminal } from './synth-terminals';
import type { CensusFigures } from './link-census';

/** What reads each terminal's stream: an HTTP-FLV player (this bench), or a fleet of another kind (ingest-hls, rtsp). */
export type ReaderKind = 'flv' | 'hls' | 'rtsp';

/** Readers other than the HTTP-FLV players, one per terminal, made and measured by their own module. */
export interface ReaderFleet {
  /** e.g. 'LL-HLS reader' */
  readonly what: string;
  /** the plugin the site needs for them */
  readonly plugin: { name: string; config: Record<string, unknown> };
  /** /strm/open fields that ask for this kind of play URL (fmt) */
  readonly openFields: Record<string, unknown>;
  /** the gateway's figure of bytes written to these readers, when it has one */
  readonly bytesOutMetric: string | undefined;
  /** starts a reader of `url` for `term`, which sends `stream` from frame `first`; it connects by itself */
  add(term: SynthTerminal, url: URL, stream: SynthStream, first: number): void;
  /** resolves once every reader has media; throws past timeoutMs */
  ready(signal: AbortSignal, timeoutMs: number): Promise<void>;
  startWindow(): void;
  endWindow(): void;
  /** bytes read so far, all readers, protocol framing included */
  bytesRead(): number;
  figures(seconds: number): ReaderFigures;
  /** the report lines for the window */
  report(seconds: number): string[];
  /** report lines from the gateway's /metrics at the end of the window (e.g. what the output plugin holds) */
  metricLines?(m: Map<string, Sample[]>, terminals: number): string[];
  close(): void;
}

export interface ReaderFigures {
  /** readers without an error */
  connected: number;
  /** readers that got no media in the window, or none for a while (the module's stall time) */
  stalled: number;
  /** failed fetches, protocol errors, media gaps: must be 0 */
  errors: number;
  /** lag behind the terminal (HLS: part age when fetched; RTSP: per frame, as the FLV end to end) */
  lagMs?: { p50: number; p99: number; max: number; count: number };
  /** parts (HLS) or video frames (RTSP) per reader-second */
  perReaderPerSecond: number;
}

export interface IngestFlvOptions {
  terminals: number;
  seconds: number;
  mbps: number;
  capture: string;
  ramp: boolean;
  rampSeconds: number;
  warmup: number;
  profile: boolean;
  pin: boolean;
  keepDir: boolean;
  /** extra node options for the gateway process (e.g. --trace-gc) */
  nodeOpts: string[];
  /** terminals send G.711A speech too (added to a capture without audio; a capture with audio keeps its own) */
  audio: boolean;
  audioFrameMs: number;
  /** the site runs audio-aac, so players (dataTyp 0) take AAC; default: with --audio */
  aac: boolean;
  /** run the bare-relay floor (floor/bare-relay.ts) instead of the gateway */
  floor: boolean;
  /** rounds of gateway and floor alternated on the same load, then the CPU ratio (0: off) */
  vsFloor: number;
  /** the gateway's worker processes (GW_WORKERS); CPU and RSS are summed over the primary and its workers */
  workers: number;
  /** rounds of one process and `workers` workers alternated on the same load and core, then streams per CPU-second (0: off) */
  vsWorkers: number;
  /** seconds between players joining and leaving through the run (PlayerChurn; 0: only the warm-up's one) */
  churnSeconds: number;
  /** print every wide late episode */
  episodes: boolean;
  /** internal (ingest-hls, rtsp): what reads the streams */
  readers: ReaderKind;
  /** internal: rounds of `readers` and FLV players alternated, then the CPU and RSS ratios (0: off) */
  vsFlv: number;
  /** the load generator spins (support/keep-awake.ts; default); --idle-client lets it sleep between events */
  busyClient: boolean;
  /** rounds of the same load without audio and with it (--audio implied), alternated: issue 11's main-thread ratio */
  vsVideo: number;
  /** terminals push over UDP, a datagram per packet (with workers, through the primary until their worker has a socket for them) */
  udp: boolean;
}

export interface IngestFlvResult {
  terminals: number;
  playersConnected: number;
  /** players that got no video tag during the measured window */
  stalledPlayers: number;
  seconds: number;
  mbpsIn: number;
  mbpsOut: number;
  gatewayMbpsIn: number;
  gatewayMbpsOut: number;
  cpuPct: number;
  /** the gateway's system calls and main-thread wake-ups per second in the window (/proc: syscr, syscw, voluntary switches) */
  syscallsPerSecond: { reads: number; writes: number; wakeups: number };
  /** % of one core: the gateway's main thread, its worker threads (the AAC stage's), and the rest (GC helpers, libuv) */
  threadCpuPct: { main: number; worker: number; other: number };
  rssMB: number;
  peakRssMB: number;
  idleRssMB: number;
  addedLatencyMs: { p50: number; p99: number; count: number };
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  endToEndMs: { p50: number; p99: number; count: number };
  /** frames over the p99 target, in episodes (support/late-episodes.ts); readers other than FLV players: none */
  late?: LateFigures;
  generatorCpuPct: number;
  /** CPU other processes used in the window, in cores (the gateway, this process and interrupts left out) */
  othersCores: number;
  /** interrupt time in the window, in cores (the kernel delivering loopback TCP, charged to no process) */
  irqCores: number;
  /** core 0 (the gateway's) busy % */
  core0BusyPct: number;
  /** this process's own event-loop delay in the window: when high, end-to-end figures include our stalls */
  generatorLoopDelayMs: { p99: number; max: number };
  /** this process's own collections in the window (support/own-gc.ts) */
  generatorGc: OwnGc;
  /** the /metrics scrape that opens the window (answered, whole), a second before the window starts */
  metricsScrapeMs: number;
  droppedFrames: number;
  /** audio frames each player got per second (AAC sequence headers not counted); 0 without audio */
  audioFramesPerPlayerSecond: number;
  /** players that got no audio in the window (when the terminals send audio) */
  silentPlayers: number;
  /** AAC: tag read - write of the terminal frame completing its input (see support/bench-player.ts); as received: - write of that frame */
  audioLatencyMs: { p50: number; p99: number; count: number };
  /** transcodes running at the end of the window, and worker calls that failed in it (audio-aac's metrics) */
  aac: { transcoders: number; failures: number };
  /**
   * the gateway's GC pauses in the window as V8 reports them (prom-client's gc metric): % of one core, by kind, and
   * mark-compacts. Incremental marking done in steps during allocation is not in it: a profile shows that.
   */
  gc: { pct: number; majorPct: number; minorPct: number; majors: number };
  /** socket reads in the window: handled at once, or set aside past the loop's slice (copied once more first); readers paused */
  reads: { atOnce: number; setAside: number; paused: number };
  /** the gateway's memory at the end of the window, MB: JS heap used, and ArrayBuffer memory (frame payloads, socket reads) */
  heapMB: number;
  /** JS heap committed (pages V8 holds, used or not), and of it the young generation's */
  heapTotalMB: number;
  newSpaceMB: number;
  arrayBuffersMB: number;
  /** payload the bus holds at the end of the window, MB: GOP caches and readers' queues */
  busHeldMB: { gop: number; queue: number };
  /** payload chunks (Publisher.alloc) in the window: allocated, reused, left to the collector, let go unused by the pool */
  chunks: { allocated: number; reused: number; escaped: number; released: number };
  /** payload chunk memory at the end of the window, MB: held by streams, free in the bus's pool (NaN: not reported) */
  chunkMB: { held: number; free: number };
  profile?: string;
  readers: ReaderKind;
  /** the HLS or RTSP readers' own figures (undefined for FLV players) */
  readerFigures?: ReaderFigures;
  /** terminals connected and counted at the window's end, and what took the others */
  census: CensusFigures;
}
