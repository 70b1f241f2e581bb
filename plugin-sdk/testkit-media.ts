/**
 * Media for plugin tests without a vehicle: a test clip (testkit-clips.ts) published into a bus stream at real speed
 * or all at once, and the open/ready steps a player's client would take.
 *
 * Nothing here imports the kernel: the functions take a `TestGateway` (see testkit.ts, whose gateways also carry
 * them as methods).
 */
import { performance } from 'node:perf_hooks';
import type { MediaStream, Publisher } from './bus';
import { shiftUnit, videoUnit, type AccessUnit } from './media';
import type { TestGateway } from './testkit';
import type { TestClip } from './testkit-clips';

// --- publishing --------------------------------------------------------------------------------------------------

export interface PublishOptions {
  /** re-times the video to this rate (default the clip's); a clip with audio plays at its own rate only */
  fps?: number;
  /** passes of the clip: true until stopped (realtime only), or a count; default 1. Each pass continues the timeline */
  loop?: boolean | number;
  /** pace units by their timestamps on real timers (default true); false pushes every pass before returning */
  realtime?: boolean;
}

export interface ClipPublisher {
  readonly publisher: Publisher;
  readonly stream: MediaStream;
  /** units pushed so far */
  readonly pushed: number;
  /** settles when the last pass is pushed, `stop()` is called, the stream closes or another publisher replaces this one */
  readonly done: Promise<void>;
  /** stops pushing (the publisher pauses; the stream and its readers stay) */
  stop: () => void;
}

/**
 * Attaches a publisher to an existing bus stream (one an open made: `gw.openStream(...).streamName`, or one a test
 * created), sets the clip's tracks and pushes its units.
 */
export function publishClip(gw: Pick<TestGateway, 'bus'>, streamName: string, clip: TestClip, opts: PublishOptions = {}): ClipPublisher {
  const stream: MediaStream | undefined = gw.bus.get(streamName);
  if (!stream) {
    const open = gw.bus.list().map((s) => s.name);
    throw new Error(`publish: no stream '${streamName}' on the bus (open: ${open.join(', ') || 'none'}); open a request first (gw.openStream)`);
  }
  if (stream.closed) throw new Error(`publish: stream '${streamName}' is closed`);
  const realtime = opts.realtime ?? true;
  const passes = opts.loop === true ? Infinity : opts.loop === false || opts.loop === undefined ? 1 : opts.loop;
  if (!(passes >= 1)) throw new RangeError(`publish: loop ${opts.loop} must be true or a count >= 1`);
  if (passes === Infinity && !realtime) throw new RangeError('publish: an endless loop needs realtime pacing');

  const fps = opts.fps ?? clip.fps;
  if (!(fps > 0)) throw new RangeError(`publish: fps ${opts.fps} must be > 0`);
  let base = clip.units;
  if (fps !== clip.fps) {
    if (clip.audio) throw new TypeError(`publish: fps re-times video only, and this clip has audio; make the clip at ${fps} fps (testClip({ fps: ${fps} }))`);
    let i = 0;
    base = clip.units.map((u) => Object.freeze(videoUnit({ codec: u.codec, dts: (i++ * 1000) / fps, keyframe: u.keyframe, payload: u.payload })));
  }
  const periodMs = (clip.frameCount * 1000) / fps;
  const n = base.length;
  const t0 = base[0]!.dts;

  const publisher = stream.attachPublisher();
  for (const t of clip.tracks) publisher.setTrack(t);
  let index = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let settle!: () => void;
  const done = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const finish = () => {
    if (stopped) return;
    stopped = true;
    if (timer) clearTimeout(timer);
    timer = undefined;
    publisher.pause();
    settle();
  };
  publisher.onClose(finish);
  const unitAtIndex = (i: number): AccessUnit => {
    const pass = Math.floor(i / n);
    const u = base[i % n]!;
    return pass === 0 ? u : shiftUnit(u, pass * periodMs);
  };
  const dueAt = (i: number): number => base[i % n]!.dts - t0 + Math.floor(i / n) * periodMs;
  const pushOne = (): boolean => {
    if (stopped || !publisher.active || stream.closed) {
      finish();
      return false;
    }
    publisher.push(unitAtIndex(index++));
    if (index >= n * passes) {
      finish();
      return false;
    }
    return true;
  };

  if (!realtime) {
    while (pushOne()) {
      /* every pass, now */
    }
  } else {
    const start = performance.now();
    const tick = () => {
      timer = undefined;
      const now = performance.now() - start;
      // a late timer catches up: every unit already due goes now, in order
      while (!stopped && dueAt(index) <= now) if (!pushOne()) return;
      if (!stopped) timer = setTimeout(tick, Math.max(0, dueAt(index) - (performance.now() - start)));
    };
    // from the next turn, so a reader subscribed right after publish() sees the first keyframe arrive
    timer = setTimeout(tick, 0);
  }
  return {
    publisher,
    stream,
    get pushed() {
      return index;
    },
    done,
    stop: finish,
  };
}

// --- the client's side: open, status -----------------------------------------------------------------------------

export interface OpenStreamOptions {
  simNo: string;
  chanId: number;
  /** default 'live' */
  typ?: 'live' | 'replay';
  /** default 0 (the site's fmt 0 output) */
  fmt?: number;
  /** 0 audio and video (default), 1 video, 2 talk, 3 listen, ... as in the open API */
  dataTyp?: number;
  scheme?: string;
  keepIntv?: number;
  /** user.token, default 'test-token' */
  token?: string;
  /** "user:password", default the demo application's */
  auth?: string;
  /** more open fields (record, exclusive, reqId, cb, ...) */
  extra?: Record<string, unknown>;
}

export interface OpenedStream {
  reqId: string;
  playUrl: string;
  /** the bus stream the request reads: publish into it, or subscribe to it */
  streamName: string;
  ready: boolean;
  /** URLs of outputs without a fmt, by output name */
  urls?: Record<string, string>;
  /** the open result as the API returned it */
  result: Record<string, unknown>;
}

/** POST /strm/open as the demo application (or `auth`); throws with the API's errCode and message on refusal. */
export async function openStream(gw: Pick<TestGateway, 'api'>, opts: OpenStreamOptions): Promise<OpenedStream> {
  const auth = opts.auth ?? 'demo:demo';
  const body: Record<string, unknown> = {
    user: { token: opts.token ?? 'test-token' },
    typ: opts.typ ?? 'live',
    simNo: opts.simNo,
    chanId: opts.chanId,
    ...(opts.fmt !== undefined ? { fmt: opts.fmt } : {}),
    ...(opts.dataTyp !== undefined ? { dataTyp: opts.dataTyp } : {}),
    ...(opts.scheme !== undefined ? { scheme: opts.scheme } : {}),
    ...(opts.keepIntv !== undefined ? { keepIntv: opts.keepIntv } : {}),
    ...opts.extra,
  };
  const r = await gw.api('POST', '/strm/open', body, auth);
  const json = r.json as Envelope | undefined;
  const result = json?.data?.[0] as Record<string, unknown> | undefined;
  if (r.status !== 200 || json?.errCode !== 0 || !result) {
    throw new Error(`open ${opts.simNo}/${opts.chanId} refused: HTTP ${r.status}, errCode ${json?.errCode}: ${json?.message ?? JSON.stringify(json)}`);
  }
  const reqId = String(result.reqId);
  // the stream's name comes from status rather than being rebuilt here: names are the gateway's to choose
  const [st] = await status(gw, reqId, auth);
  if (!st) throw new Error(`open ${opts.simNo}/${opts.chanId}: request ${reqId} is not in /strm/status right after its open`);
  return {
    reqId,
    playUrl: String(result.playUrl),
    streamName: String(st.stream),
    ready: result.ready === true,
    ...(result.urls ? { urls: result.urls as Record<string, string> } : {}),
    result,
  };
}

/** The API's answer envelope, as far as these helpers read it. */
type Envelope = { errCode?: number; message?: string; data?: unknown[] };

/** A request in GET /strm/status. */
export type RequestStatus = Record<string, unknown> & { reqId: string; stream: string; ready: boolean };

async function status(gw: Pick<TestGateway, 'api'>, reqId: string, auth: string): Promise<RequestStatus[]> {
  const r = await gw.api('GET', `/strm/status?reqId=${encodeURIComponent(reqId)}`, undefined, auth);
  const json = r.json as Envelope | undefined;
  if (r.status !== 200 || json?.errCode !== 0) throw new Error(`/strm/status for ${reqId}: HTTP ${r.status}: ${JSON.stringify(json)}`);
  return json.data as RequestStatus[];
}

/** Polls GET /strm/status until the request is ready; its status entry then. Fails if it closes or time runs out. */
export async function waitReady(gw: Pick<TestGateway, 'api'>, reqId: string, timeoutMs = 10_000, auth = 'demo:demo'): Promise<RequestStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [st] = await status(gw, reqId, auth);
    if (!st) throw new Error(`waitReady: request ${reqId} is not open (closed, or another application's)`);
    if (st.ready === true) return st;
    if (Date.now() >= deadline) {
      throw new Error(
        `waitReady: request ${reqId} was not ready within ${timeoutMs} ms (stream ${st.stream}, codecs ${JSON.stringify(st.codecs)}, bytesIn ${String(st.bytesIn)}): is anything publishing into it?`,
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
