/**
 * Which worker a terminal's connection belongs to, from its first bytes (run by the primary of a multi-worker
 * gateway, see plugin-sdk/cluster.ts). The key is the channel's: the SIM and logical channel of the first packet
 * whose header validates.
 *
 * The layout is not known yet (every port takes both): a header is trusted when the packet after it also validates
 * in the same layout (the chained check the parser does), or when only one layout validates at all. Junk before the
 * first magic is skipped. A terminal that sends a lone, ambiguous first packet is decided after MAX_WAIT bytes by
 * the layout that validated, 2013 first (the older, commoner terminals). A datagram (complete: one packet, nothing
 * follows) is decided by the layout whose packet length fills it exactly.
 */
import { channelKey, type ConnectionRouter, type RouteDecision } from '../../../plugin-sdk/router';
import { MAGIC, probeHeader, PROBE_NEED_MORE, SimDecoder, type Jt1078Layout } from './packet';

const MAX_WAIT = 2048;

/**
 * The last key made, and what it was made from. A worker routes every datagram of its UDP peers again (and the
 * primary every datagram of peers without one), and a terminal sends a frame as a burst of datagrams that are read
 * one after another: so the SIM's string is reused while its bytes repeat (the decoder's own check), and the key
 * while that string (the same object) and the channel do. Routing stays a function of the bytes alone.
 */
const sims = new SimDecoder();
let lastSim = '';
let lastChan = -1;
let lastKey = '';

function keyAt(buf: Buffer, off: number, layout: Jt1078Layout): string {
  const simLen = layout === '2019' ? 10 : 6;
  const sim = sims.decode(buf, off + 8, simLen);
  const chan = buf[off + 8 + simLen];
  if (sim !== lastSim || chan !== lastChan) {
    lastSim = sim;
    lastChan = chan;
    lastKey = channelKey(sim, chan);
  }
  return lastKey;
}

/** 'yes' the header and the next one validate, 'maybe' the header does and the next is not here yet, 'no' */
function chained(buf: Buffer, off: number, layout: Jt1078Layout): 'yes' | 'maybe' | 'no' {
  const len = probeHeader(buf, off, buf.length, layout);
  if (len < 0) return len === PROBE_NEED_MORE ? 'maybe' : 'no';
  const next = off + len;
  if (next >= buf.length) return 'maybe';
  const n = probeHeader(buf, next, buf.length, layout);
  return n >= 0 || n === PROBE_NEED_MORE ? 'yes' : 'no';
}

/** a datagram holds exactly one packet: the layout whose packet length fills it is the one */
function exactFill(d: Buffer): RouteDecision | undefined {
  const off = d.indexOf(MAGIC);
  if (off < 0) return undefined;
  for (const layout of ['2013', '2019'] as const) {
    if (probeHeader(d, off, d.length, layout) === d.length - off) return { key: keyAt(d, off, layout) };
  }
  return undefined;
}

export const routeTerminal: ConnectionRouter = (head: Buffer, complete: boolean): RouteDecision => {
  if (complete) {
    const exact = exactFill(head);
    if (exact) return exact;
  }
  let off = head.indexOf(MAGIC);
  while (off >= 0) {
    const a = chained(head, off, '2013');
    const b = chained(head, off, '2019');
    if (a === 'yes' && b !== 'yes') return { key: keyAt(head, off, '2013') };
    if (b === 'yes' && a !== 'yes') return { key: keyAt(head, off, '2019') };
    if (a === 'no' && b === 'no') {
      off = head.indexOf(MAGIC, off + 1);
      continue;
    }
    // both chain (same SIM bytes either way), or one still waits for its next packet
    const sure = a === 'yes' && b === 'yes';
    const wait = !complete && head.length < MAX_WAIT;
    if (!sure && wait) return 'more';
    const layout: Jt1078Layout = a !== 'no' ? '2013' : '2019';
    if (probeHeader(head, off, head.length, layout) === PROBE_NEED_MORE) {
      if (wait) return 'more';
      if (complete) {
        off = head.indexOf(MAGIC, off + 1);
        continue;
      }
    }
    return { key: keyAt(head, off, layout) };
  }
  // no header yet: a terminal's first bytes may be split before its magic
  return !complete && head.length < MAX_WAIT ? 'more' : 'any';
};

/** what the primary loads (plugin-sdk/plugin.ts `routers`): this module alone, without the plugin */
export const router: ConnectionRouter = routeTerminal;
