/**
 * The gateway's own keys as one decorated class: buildConfig validates the site file and GW_ overrides against its
 * decorators and defaults, so the class holds nothing else and its helpers live in their own modules.
 */
import * as os from 'node:os';
import { IsArray, IsBoolean, IsIn, IsInt, IsNumber, IsObject, IsOptional, IsString, Max, Min, MinLength } from 'class-validator';

/** The kernel's own keys (site file "gateway"); env overrides are GW_<KEY>, e.g. GW_HTTP_PORT, GW_DATA_DIR. */
export class GatewayConfig {
  @IsInt()
  @Min(0)
  @Max(65535)
  httpPort = 7080;

  @IsString()
  @MinLength(1)
  listenHost = '0.0.0.0';

  /** written into play URLs and push addresses */
  @IsString()
  @MinLength(1)
  publicHost = '127.0.0.1';

  /** public base of the API for URLs given to clients (record file urls); default http://{publicHost}:{httpPort} */
  @IsOptional()
  @IsString()
  apiBase: string | undefined = undefined;

  @IsString()
  @MinLength(1)
  dataDir = './data';

  /**
   * worker processes (env GW_WORKERS): 0, the default, one per core of the machine; 1, a single process. With more
   * than one, a primary process binds the ports and hands each terminal connection and player to the worker that owns
   * its channel (core/cluster/).
   */
  @IsInt()
  @Min(0)
  @Max(256)
  workers = 0;

  /**
   * false, the default: the gateway's processes collect garbage on their own thread (node --single-threaded-gc,
   * core/gc-flags.ts), so V8's helper threads never take a core from an event loop; workers get the flag from the
   * primary, a single process from its command line (npm start). true: V8's helper threads, for a machine with more
   * cores than workers. Env GW_GC_HELPER_THREADS.
   */
  @IsBoolean()
  gcHelperThreads = false;

  /**
   * How far V8 lets the old generation grow past what the last full collection kept before it collects again, in
   * percent: 100 (the default) means to twice. 0 leaves it to V8, whose factor at the gateway's heap (~50 MB at 1,000
   * streams) left ~22 MB of room: less than the young generation (32 MB), and V8 starts marking whenever the room
   * left is less than one scavenge might promote, so a full collection ran every ~3 s however little was promoted.
   * Measured (test/bench/README.md, 1,000 terminals x 1 Mbit/s, one core, alternated): full collections 6-7 -> 1 in
   * 20 s, event-loop delay p99 38 -> 15-18 ms, end-to-end p99 66-88 -> 52-54 ms, CPU the same (paired at 700: 1.007),
   * RSS 4-7 % more. Lower (50) holds less memory for more full collections: for hosts short of memory rather than
   * CPU. Env GW_GC_HEAP_GROWTH_PERCENT.
   */
  @IsInt()
  @Min(0)
  @Max(1000)
  gcHeapGrowthPercent = 100;

  /**
   * true, the default: V8's optimising compiler inlines callees up to twice its own size budget and three times its
   * total (core/jit-flags.ts), so more of a frame's chain of calls through ingest, bus and outputs is compiled as one:
   * ~2 % less CPU at 500 streams (`paired`, 6 pairs: 0.978) for a few MB more RSS. false leaves V8's own budgets.
   * Env GW_WIDE_INLINING.
   */
  @IsBoolean()
  wideInlining = true;

  /**
   * false, the default: V8's allocation-site pretenuring is off (core/gc-flags.ts). V8 watches how many objects of each
   * literal in the code survive a scavenge, and past a ratio makes that literal allocate in the old generation from
   * then on. A backlog of a few hundred ms (a core shared with another busy process, a burst) makes a per-frame
   * literal look long-lived; once tenured, every frame's objects die in the old generation: it grew ~2.2 MB a
   * scavenge against 0.3-0.4, with a full collection every ~3 s and 20 % more RSS, for the rest of the run. Measured
   * (test/bench/README.md, `paired`, 500 terminals, 8 pairs): 4 of 8 runs with it on had 1-6 full collections
   * (351-376 KB a stream), none of 8 with it off (290-315 KB); CPU 0.988. true: V8's own. Env GW_GC_PRETENURING.
   */
  @IsBoolean()
  gcPretenuring = false;

  /**
   * V8's young-generation semi-space in MB (node --max-semi-space-size): 8, the default, half V8's own 16. The young
   * generation (two semi-spaces) is memory a busy process holds in full: 32 MB at V8's size, 32 KB of each stream's
   * RSS at 1,000 streams. At 8 the collector scavenges twice as often, each about as long (what survives one is what
   * is in flight, ~0.25 MB at 1,000 streams, not what was allocated). Measured (test/bench/README.md, 1,000 terminals
   * x 1 Mbit/s, one core, alternated, 2 rounds): RSS 282 / 279 against 300 / 298 KB a stream, scavenges 1.8-1.9
   * against 1.0 % of the core, CPU within the machine's drift (`paired` at 450 terminals, 3 pairs: 1.001). Like
   * --single-threaded-gc it only counts when a process starts: workers get it from the primary, a single process from
   * its command line (npm start passes 8) and warns at start when that differs. 0: V8's own. Env GW_GC_SEMI_SPACE_MB.
   */
  @IsInt()
  @Min(0)
  @Max(1024)
  gcSemiSpaceMB = 8;

  /**
   * How long, in ms, media reads may run at once in one turn of the event loop before the rest of that turn's reads
   * are set aside for its end (core/net/read-slices.ts): 1, the default. A loop reading a thousand terminals runs
   * turns of 10-60 ms at 80 % of a core, and an API call or a player's request that arrives waits up to two of them;
   * in slices it waits about one slice. Measured (test/bench/README.md, open-latency, 450 terminals x 1 Mbit/s on a
   * core that 1,000 saturate, 83-90 % busy, alternated): open p99 6.8-7.6 ms with 1 ms slices, 8.1-9.8 ms with 2,
   * 22-238 ms without; CPU the same (`paired`: 1 ms against 2, 4 pairs, 1.005; none against 2, 6 pairs, 1.029), RSS
   * +9-10 MB (the copies' slabs, at most 8 MB). 0: every read at once, no slices. Env GW_READ_SLICE_MS.
   */
  @IsNumber()
  @Min(0)
  @Max(1000)
  readSliceMs = 1;

  /**
   * true, the default: frame payloads live in chunks each stream reuses once no reader can read them any more
   * (core/bus/payload-arena.ts): 3x fewer mark-compacts, event-loop and end-to-end p99 ~40 % lower at 700 terminals,
   * for about one GOP of memory a stream held as spare chunks (RSS +15 % at 700 terminals of 1 Mbit/s, +33 % at 1,000).
   * false: fresh memory per frame, freed by the garbage collector. Env GW_REUSE_PAYLOADS.
   */
  @IsBoolean()
  reusePayloads = true;

  /**
   * With several workers, true (the default): a UDP peer (a terminal pushing over UDP) gets a socket of its own in the
   * worker that owns its channel, bound to the same port and connected to the peer, so its datagrams go to that
   * worker without crossing the primary (core/cluster/udp-peers.ts). This needs SO_REUSEADDR on the routed UDP
   * ports, which lets any local process of any user bind them too and take datagrams of peers that have no socket
   * yet: false on a host shared with users you do not trust (every datagram then crosses the primary, ~12 us of its
   * CPU each). No effect with one worker. Env GW_UDP_PEER_SOCKETS.
   */
  @IsBoolean()
  udpPeerSockets = true;

  @IsString()
  @MinLength(1)
  instId = os.hostname();

  /**
   * This node's name in a fleet (env GW_NODE_ID): 1-64 letters, digits, '.', '_' or '-', one per node of the fleet.
   * Default: the host name (with dots and other characters a node id cannot hold turned into '-').
   */
  @IsString()
  @MinLength(1)
  nodeId =
    os
      .hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 64) || 'node';

  /**
   * The directory of channels and requests (core/directory/, env GW_DIRECTORY_URL): absent or 'memory:' for one node
   * (in-process, no server); for a fleet, its Redis: 'redis://[:password@]host:port', 'rediss://…' (TLS),
   * 'redis+sentinel://h1:26379,h2:26379/<master>' or 'redis+cluster://h1:7000,h2:7001'. Every node of a fleet names
   * the same one.
   */
  @IsOptional()
  @IsString()
  directoryUrl: string | undefined = undefined;

  /**
   * How long a claim or a node's heartbeat lives in the fleet directory unless refreshed (every third of it), in
   * seconds: a node that stops loses its channels within this, and a survivor then sends its requests' closed notices.
   * Env GW_DIRECTORY_TTL_SEC.
   */
  @IsInt()
  @Min(2)
  @Max(60)
  directoryTtlSec = 6;

  /**
   * This node's further address sets (env GW_PUBLIC_HOSTS, a JSON array): an open's connIdx k >= 1 answers with
   * publicHosts[k - 1] in place of publicHost (push host, play and talk URLs), for example one address per carrier line.
   * connIdx 0 is publicHost; an index the node does not have answers -7 naming connIdx.
   */
  @IsArray()
  @IsString({ each: true })
  @MinLength(1, { each: true })
  publicHosts: string[] = [];

  @IsIn(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
  logLevel = 'info';

  /**
   * the level of lines written once per request or player (request opened/closed, stream ready/closed, player
   * started/stopped): 'debug' keeps them out of an info log when applications open and close at high rates
   */
  @IsIn(['info', 'debug', 'trace', 'silent'])
  requestLogLevel: 'info' | 'debug' | 'trace' | 'silent' = 'info';

  @IsInt()
  @Min(1024)
  @Max(16 * 1024 * 1024)
  bodyLimit = 64 * 1024;

  /**
   * How long an HTTP connection may sit idle between requests before the gateway closes it. Node's own 5 s is shorter
   * than the idle times of the clients platforms use (Go 90 s, OkHttp 5 min, Apache HttpClient unlimited, load
   * balancers 60 s): such a client sends its next request on a connection the gateway is closing at that moment and
   * gets ECONNRESET, which a client does not retry for a POST such as /strm/open. 65 s outlasts a load balancer's 60 s;
   * the `Keep-Alive: timeout=` reply header tells clients that honour it. Applies to every HTTP listener.
   */
  @IsInt()
  @Min(1)
  @Max(3600)
  httpKeepAliveSec = 65;

  @IsInt()
  @Min(15)
  @Max(600)
  keepIntvDefault = 20;

  @IsInt()
  @Min(1)
  @Max(3600)
  openTimeoutSec = 60;

  @IsInt()
  @Min(1)
  @Max(86400)
  consumptionTimeoutSec = 120;

  /** a stream's GOP cache is dropped past this many bytes until the next keyframe */
  @IsInt()
  @Min(64 * 1024)
  maxGopBytes = 8 * 1024 * 1024;

  /** one subscriber's queue past this skips ahead to the next keyframe */
  @IsInt()
  @Min(64 * 1024)
  maxQueueBytes = 2 * 1024 * 1024;

  /** ceiling for a stream's queued media (GOP cache plus all subscriber queues) */
  @IsInt()
  @Min(256 * 1024)
  maxStreamBytes = 32 * 1024 * 1024;

  /** a reader (player, recorder, stage) that takes nothing this long while media waits for it is ended */
  @IsInt()
  @Min(1)
  @Max(3600)
  readerDropAfterSec = 30;

  /** [{appId, user, password, gov?, admin?, maxRequests?}] */
  @IsArray()
  applications: unknown[] = [];

  /**
   * open requests one application may hold at once (an application's own `maxRequests` overrides it): each costs
   * memory and timers, and one client in a loop must not take them all
   */
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  maxRequestsPerApp = 1000;

  /**
   * who may read /metrics (SIMs in stream labels, callback hosts) and the counts in /healthz: 'open' anyone;
   * 'admin' Basic credentials of an application marked admin, or an address in metricsAllow; 'allow-list' only an
   * address in metricsAllow
   */
  @IsIn(['open', 'admin', 'allow-list'])
  metricsAccess: 'open' | 'admin' | 'allow-list' = 'open';

  /** addresses or CIDRs (10.0.0.0/8, ::1/128) let in by metricsAccess 'admin' and 'allow-list' without credentials */
  @IsArray()
  @IsString({ each: true })
  metricsAllow: string[] = [];

  /** failed Basic logins from one address (an IPv6 /64) within authFailWindowSec that block it; 0: no brake */
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  authFailLimit = 20;

  @IsInt()
  @Min(1)
  @Max(86400)
  authFailWindowSec = 60;

  /** a blocked address answers 429 with Retry-After, without a credential check, this long */
  @IsInt()
  @Min(1)
  @Max(86400)
  authBlockSec = 60;

  /**
   * open connections one address (an IPv6 /64) may hold on one HTTP listener: the API port and plugins' own HTTP
   * ports (flv-out's players). A player takes one per stream and an API client a small pool, so 256 is a large video
   * wall behind one NAT; past it a single client could hold a listener's share of the descriptors. 0: no cap
   */
  @IsInt()
  @Min(0)
  @Max(10_000_000)
  maxHttpConnectionsPerAddress = 256;

  /**
   * the same for plugins' raw TCP listeners (jt1078-ingest's terminal ports): a carrier's NAT puts many vehicles
   * behind one address, each with a link per channel it pushes, so the cap is far higher. 0: no cap
   */
  @IsInt()
  @Min(0)
  @Max(10_000_000)
  maxTcpConnectionsPerAddress = 4096;

  /**
   * open connections on any one listener, from all addresses; 0: half of the descriptors the process may open below
   * fdReserve (Linux; elsewhere no cap), so a flood of one port from many addresses leaves the other ports theirs
   */
  @IsInt()
  @Min(0)
  @Max(10_000_000)
  maxConnectionsPerListener = 0;

  /**
   * addresses or CIDRs the per-address caps do not apply to: a reverse proxy or load balancer in front of the
   * gateway brings every client from its own address (loopback by default: a TLS front on the same machine)
   */
  @IsArray()
  @IsString({ each: true })
  perAddressExempt: string[] = ['127.0.0.0/8', '::1/128'];

  /**
   * Linux: descriptors kept back from the media and plugin ports (at most a quarter of the process's limit). Once
   * fewer than this are free those ports refuse new connections; the API port may still use half of them (keeps,
   * health, metrics), the rest stays for files, recordings and callbacks. 0: off
   */
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  fdReserve = 256;

  /**
   * per listener, by its port's name as in the "gateway started" line ("gateway.httpPort", "flv-out.port",
   * "jt1078-ingest.livePort2013"): {"maxConnections": n, "maxConnectionsPerAddress": n}, over the keys above
   */
  @IsObject()
  listenerLimits: Record<string, unknown> = {};

  /**
   * PEM certificate (chain) and private key: when both are given, the API port and plugins' HTTP ports (flv-out's
   * players) serve HTTPS and WSS only, and play URLs, apiBase and talk URLs say https/wss
   */
  @IsOptional()
  @IsString()
  @MinLength(1)
  tlsCertFile: string | undefined = undefined;

  @IsOptional()
  @IsString()
  @MinLength(1)
  tlsKeyFile: string | undefined = undefined;

  /** small-state store: {"kind":"sqlite"} (file in dataDir), {"kind":"redis","url":"redis://..."} or {"kind":"memory"} */
  @IsObject()
  store: Record<string, unknown> = { kind: 'sqlite' };
}
