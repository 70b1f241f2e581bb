/**
 * SETUP's transport (RFC 2326 12.39): the first of the client's offers this server can serve. Unicast RTP only, never
 * RECORD. TCP interleaved on channels no other track or session of the connection uses (a client that names none
 * gets 2n and 2n+1 for track n), or UDP to the client's ports from the connection's address. UDP is not offered to
 * an IPv6 client when the server's UDP port is IPv4. A session keeps the lower transport its first SETUP chose.
 */
import type { TransportSpec } from '../../../plugin-sdk/rtsp';
import type { TrackTransport } from './session';

/** What the choice depends on besides the offers. */
export interface TransportContext {
  /** the track set up (its index in the presentation) */
  track: number;
  /** the client's address, where UDP packets go */
  ip: string;
  /** whether this server can send UDP to that address */
  udpOk: boolean;
  /** the session the SETUP adds a track to, if any */
  session: { lower: 'tcp' | 'udp'; setup: ReadonlyMap<number, TrackTransport> } | undefined;
  /** the connection's sessions, whose interleaved channels are taken */
  onConnection: Iterable<{ setup: ReadonlyMap<number, TrackTransport> }>;
}

/** The transport to answer, or undefined: nothing offered can be served (461). */
export function chooseTransport(offered: readonly TransportSpec[], x: TransportContext): TrackTransport | undefined {
  const s = x.session;
  const pick = offered.find((o) => !o.multicast && !o.record && (o.lower === 'tcp' || (o.clientPort !== undefined && x.udpOk)) && (!s || s.lower === o.lower));
  if (!pick) return undefined;
  if (pick.lower === 'udp') {
    const [rtp, rtcp] = pick.clientPort!;
    return { lower: 'udp', host: x.ip, rtp, rtcp };
  }
  const [rtp, rtcp] = pick.interleaved ?? [x.track * 2, x.track * 2 + 1];
  for (const other of x.onConnection) {
    for (const [k, v] of other.setup) {
      const same = other === s && k === x.track;
      if (v.lower === 'tcp' && !same && (v.rtp === rtp || v.rtcp === rtp || v.rtp === rtcp || v.rtcp === rtcp)) return undefined;
    }
  }
  return { lower: 'tcp', rtp, rtcp };
}

/** The Transport header of SETUP's answer. */
export function transportHeader(tt: TrackTransport, serverRtp: number, serverRtcp: number): string {
  return tt.lower === 'tcp'
    ? `RTP/AVP/TCP;unicast;interleaved=${tt.rtp}-${tt.rtcp}`
    : `RTP/AVP;unicast;client_port=${tt.rtp}-${tt.rtcp};server_port=${serverRtp}-${serverRtcp}`;
}
