/**
 * The core's own gauges (gw_core_*) over state the bus, the read scheduler and the sessions keep anyway: each is read
 * at scrape time, so the media path pays nothing for them.
 */
import type { Metrics } from '../plugin-sdk/metrics';
import type { ReadSlices } from './net/read-slices';
import type { CoreMediaBus } from './bus/media-bus';
import type { SessionManager } from './sessions/session-manager';

/** streams, the payload bytes they hold and the payload chunks' reuse */
export function busGauges(m: Metrics, bus: CoreMediaBus): void {
  m.gauge('bus_streams', 'streams on the bus (derived ones included)', [], (g) => g.set(bus.size));
  // what the media memory is, next to gw_process_nodejs_external_memory_bytes: payloads the bus holds
  m.gauge('bus_held_bytes', "payload bytes the bus keeps alive, by holder: GOP caches, readers' queues", ['holder'], (g) => {
    let gop = 0;
    let queued = 0;
    for (const s of bus.list()) {
      const h = s.heldBytes();
      gop += h.gop;
      queued += h.queued;
    }
    g.set({ holder: 'gop' }, gop);
    g.set({ holder: 'queue' }, queued);
  });
  const arena = bus.chunks.counts;
  m.gauge(
    'bus_payload_chunks',
    'payload chunks of Publisher.alloc since start, by what became of them: allocated, reused, escaped (left to the collector: a reader could not say when it was done), released (done, let go by the pool after 10 s unused)',
    ['event'],
    (g) => {
      g.set({ event: 'allocated' }, arena.allocated);
      g.set({ event: 'reused' }, arena.reused);
      g.set({ event: 'escaped' }, arena.escaped);
      g.set({ event: 'released' }, arena.released);
    },
  );
  const reuseOffHelp =
    'streams whose payload memory is not reused now, by the reader that keeps it so (its sink has no ' +
    'MediaReader.holdsPayloads): ReaderOptions.reader, the stage, or the plugin that subscribed';
  m.gauge('bus_payload_reuse_off_streams', reuseOffHelp, ['reader'], (g) => {
    g.reset();
    for (const [reader, n] of bus.reuseOffByReader()) g.set({ reader }, n);
  });
  m.gauge(
    'bus_payload_chunk_bytes',
    'bytes of payload chunks: held by streams (carved, or waiting until no reader can read them), free in the pool',
    ['state'],
    (g) => {
      const b = bus.chunks.bytes;
      g.set({ state: 'held' }, b.held);
      g.set({ state: 'free' }, b.free);
    },
  );
}

/** how media socket reads were handled against the loop's slice (gateway.readSliceMs) */
export function readSliceGauges(m: Metrics, slices: ReadSlices): void {
  const sliced = slices.stats;
  m.gauge(
    'read_slice_reads',
    "media socket reads since start (ctx.net.readSliced, gateway.readSliceMs), by how they were handled: at once, set aside past the slice (copied, handled at the turn's end), at once past the slice as every copy slab was taken",
    ['how'],
    (g) => {
      g.set({ how: 'at_once' }, sliced.direct - sliced.full);
      g.set({ how: 'set_aside' }, sliced.deferred);
      g.set({ how: 'slabs_full' }, sliced.full);
    },
  );
  m.gauge(
    'read_slice_events',
    'read slices since start that ended with reads still set aside (overrun: the loop was more than a slice behind), and readers paused for their set-aside bytes',
    ['event'],
    (g) => {
      g.set({ event: 'overrun' }, sliced.overrun);
      g.set({ event: 'paused' }, sliced.paused);
    },
  );
  m.gauge(
    'read_slice_slab_bytes',
    'bytes of the slabs set-aside reads are copied into (in use or spare; spares a burst made are let go 10-20 s after it)',
    [],
    (g) => g.set(slices.slabBytes),
  );
}

/** open requests and channel streams */
export function sessionGauges(m: Metrics, sessions: SessionManager): void {
  m.gauge('requests_open', 'open stream requests', [], (g) => g.set(sessions.requestCount));
  m.gauge('streams_open', 'open channel streams', [], (g) => g.set(sessions.streamCount));
}
