/**
 * Routing connections to workers.
 *
 * With `workers` > 1 (the gateway's default on a multi-core machine) the primary process owns every listening port and
 * hands each accepted connection to one worker process. A stream costs one worker only if its terminal connection
 * and its players meet there, so a listener whose connections belong to a stream names a router: a function the
 * primary runs on the first bytes of a connection (or on each UDP datagram) to learn the stream it belongs to.
 * Connections with the same key always land in the same worker. Listeners without a router get any worker.
 *
 * A router is a small module a plugin declares on its definition (`routers: { name: './src/route' }`, exporting
 * `router`) and names by `route` in listen options: the primary loads that module alone, without the plugin. `route: 'stream-path'` is the
 * built-in router for HTTP, WebSocket and RTSP listeners whose URLs carry a session stream name
 * (`/live/{stream}.flv`, `/hls/{stream}/…`, `rtsp://…/live/{stream}`).
 */

/** what a router says about the bytes seen so far */
export type RouteDecision =
  /** the connection belongs to this key (for session streams: `channelKey(normSim, chanId)`) */
  | { key: string }
  /** not enough bytes yet: call again with more (the primary gives up after 4 KiB or its first-bytes timeout) */
  | 'more'
  /** belongs to no stream in particular: any worker */
  | 'any';

/**
 * Runs in the primary, on a connection's first bytes or a whole datagram. Must be pure and quick. `complete`: no more
 * bytes will come (a datagram, or the 4 KiB cap reached): answer with a key or 'any', not 'more'.
 */
export type ConnectionRouter = (head: Buffer, complete: boolean) => RouteDecision;

/** the routing key of a terminal channel: live and replay of one channel share a worker */
export function channelKey(normSim: string, chanId: number): string {
  return `${normSim}_${chanId}`;
}

/** the routing key of a session stream name `{sim}_{chan}_{1|0}`, or undefined for other names */
export function streamKey(streamName: string): string | undefined {
  const m = /^([^_/]+)_(\d{1,3})_[01]$/.exec(streamName);
  return m ? `${m[1]}_${Number(m[2])}` : undefined;
}
