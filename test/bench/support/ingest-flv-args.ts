/**
 * ingest-flv's command line: its usage text and the parse into IngestFlvOptions (ingest-hls and rtsp take it too).
 */
import { BenchArgs, captureFile, floorArg, loadArg, windowArg } from './bench-args';
import { IDLE_CLIENT_USAGE } from './keep-awake';
import type { IngestFlvOptions } from './ingest-flv-types';

export const USAGE = `usage: npm run bench -- ingest-flv [--terminals N] [--seconds S] [--mbps X] [--capture FILE] [--audio]
                       [--audio-frame-ms MS] [--aac|--no-aac] [--ramp] [--ramp-seconds S] [--warmup S] [--profile]
                       [--floor | --vs-floor K] [--workers N] [--vs-workers K] [--vs-video K] [--no-pin] [--keep-dir]
                       [--idle-client] [--udp] [--churn S] [--episodes] [--node-opt OPT]...
  --terminals N     simulated terminals, one HTTP-FLV player each (default 500)
  --seconds S       measured window (default 30)
  --mbps X          per-terminal rate in Mbit/s, audio included; the capture's video frames are padded up to it (default 1)
  --capture FILE    JT/T 1078 capture to re-pack (default shared/fixtures/jt1078/glaciall-cif-h264-2013.bin)
  --audio           terminals also send G.711A 8 kHz speech (a capture with audio keeps its own), and the site runs
                    audio-aac: every player takes AAC, flv-out's default
  --audio-frame-ms MS  duration of the added G.711A frames, one packet each (default 20)
  --aac, --no-aac   put audio-aac on the site or leave it off (default: on with --audio, off without); --audio --no-aac:
                    the audio is ingested but left out of the FLV (browsers cannot play G.711)
  --ramp            open terminals gradually (over --ramp-seconds, default 20) instead of all at once
  --warmup S        seconds of load before the window opens (default 5)
  --profile         run the gateway under node --cpu-prof and print its top self-time functions
  --workers N       the gateway runs N worker processes (GW_WORKERS; default 1); CPU and RSS add up the primary and its
                    workers, all on the gateway's core when pinned
  --vs-workers K    K rounds of 1 process and --workers N (default 2) alternated, then streams per gateway CPU-second of each
                    and their ratio: what a worker costs on top of the work (1.0: N workers on N cores hold N times the streams)
  --vs-video K      K rounds of the same terminals without audio and with it (--audio: players take AAC unless --no-aac)
                    alternated, then the main thread's CPU with audio / without (issue 11: 1.10 or less)
  --udp             terminals push over UDP, a datagram per JT/T 1078 packet (2013 layout, to the live port); with
                    --workers the primary routes a terminal's first datagrams to its channel's worker, whose own socket
                    for the terminal takes the rest (GW_UDP_PEER_SOCKETS=false: all through the primary; not with --floor)
  --churn S         from the warm-up on, a player joins the next stream mid-GOP every S seconds and leaves after 1 s
                    (players coming and going, as in service; the warm-up's one late player joins either way)
  --episodes        list every late episode that reached 90 % of the players, with its time since the gateway started
                    (to match with --node-opt --log-deopt or --trace-gc)
  --floor           run the bare-relay floor (test/bench/floor/bare-relay.ts) instead of the gateway, on the same load
  --vs-floor K      K rounds of the gateway and the floor alternated, then gateway CPU / floor CPU (issue 16's steering figure)
${IDLE_CLIENT_USAGE}
  --no-pin          do not pin the gateway to core 0 and this process to core 1
  --keep-dir        keep the scratch directory (site file, gateway log, data)
  --node-opt OPT    pass a node option to the gateway process, e.g. --node-opt --trace-gc (with --keep-dir to read its log)`;

export function parseArgs(args: string[]): IngestFlvOptions {
  const o: IngestFlvOptions = {
    terminals: 500,
    seconds: 30,
    mbps: 1,
    capture: '',
    ramp: false,
    rampSeconds: 20,
    warmup: 5,
    profile: false,
    pin: true,
    keepDir: false,
    nodeOpts: [],
    audio: false,
    audioFrameMs: 20,
    aac: false,
    floor: false,
    vsFloor: 0,
    workers: 1,
    vsWorkers: 0,
    readers: 'flv',
    vsFlv: 0,
    vsVideo: 0,
    busyClient: true,
    udp: false,
    churnSeconds: 0,
    episodes: false,
  };
  let aac: boolean | undefined;
  const r = new BenchArgs(args, USAGE);
  for (let a = r.next(); a !== undefined; a = r.next()) {
    switch (a) {
      case '--terminals':
        o.terminals = r.num(a, 1, 5000, true);
        break;
      case '--workers':
        o.workers = r.num(a, 1, 64, true);
        break;
      case '--vs-workers':
        o.vsWorkers = r.num(a, 1, 20, true);
        break;
      case '--vs-video':
        o.vsVideo = r.num(a, 1, 20, true);
        o.audio = true;
        break;
      case '--ramp-seconds':
        o.rampSeconds = r.num(a, 0, 3600, false);
        o.ramp = true;
        break;
      case '--audio-frame-ms':
        o.audioFrameMs = r.num(a, 10, 200, true);
        o.audio = true;
        break;
      case '--audio':
        o.audio = true;
        break;
      case '--aac':
        aac = true;
        break;
      case '--no-aac':
        aac = false;
        break;
      case '--ramp':
        o.ramp = true;
        break;
      case '--idle-client':
        o.busyClient = false;
        break;
      case '--udp':
        o.udp = true;
        break;
      case '--churn':
        o.churnSeconds = r.num(a, 0.1, 3600, false);
        break;
      case '--episodes':
        o.episodes = true;
        break;
      default:
        if (!floorArg(a, r, o) && !windowArg(a, r, o) && !loadArg(a, r, o)) r.unknown(a);
    }
  }
  o.aac = aac ?? o.audio;
  o.capture = captureFile(o.capture);
  if (o.udp && (o.floor || o.vsFloor > 0)) throw r.error('--udp: the floor reads TCP only');
  return o;
}
