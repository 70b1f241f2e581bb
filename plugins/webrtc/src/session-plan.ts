/**
 * What one WHEP session will be, decided from the request, the offer and the stream's tracks before any peer
 * connection exists: which offered payload types the answer uses, whether the browser talks, whether audio goes
 * through the PCMA stage; or a refusal (an HTTP status and the reason) when nothing the request plays can be sent.
 */
import { mediaTypOf, type StrmRequest, type TrackInfo, type VideoTrackInfo } from '../../../plugin-sdk';
import { chooseG711, chooseH264, chooseH265, h264Profile, type Offer, type OfferedMedia } from './offer';
import type { PeerPlan } from './peer';

/** what a session sends and receives: the peer's tracks (the browser talks when its audio is received), whether audio needs the PCMA stage */
export type Plan = PeerPlan & { pcma: boolean };

/** what refuses an offer before a peer connection exists */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly metric: string,
  ) {
    super(message);
  }
}

/** what the answer sends (and receives), from the request's media and the stream's codecs as far as known */
export function planSession(request: StrmRequest, offer: Offer, tracks: ReadonlyArray<TrackInfo>): Plan {
  const media = mediaTypOf(request.params.typ, request.params.dataTyp);
  const v = tracks.find((t): t is VideoTrackInfo => t.kind === 'video');
  const a = tracks.find((t) => t.kind === 'audio');
  const plan: Plan = { pcma: false };
  const playsVideo = (x: OfferedMedia) => x.kind === 'video' && (x.direction === 'recvonly' || x.direction === 'sendrecv');
  if (media !== 'a') {
    const section = offer.media.find(playsVideo);
    if (!section) throw new Refusal(400, 'the offer receives no video (a recvonly or sendrecv video section) and this request plays video', 'offer-codec');
    if (v?.codec === 'h265') {
      const c = chooseH265(section);
      if (!c) throw new Refusal(400, 'the stream is H.265 and the offer has no H.265 (this browser does not receive it over WebRTC)', 'offer-codec');
      plan.video = { mid: section.mid, pt: c.pt, codec: 'H265', receive: false };
    } else {
      const profile = v?.sps && v.sps.length >= 4 ? h264Profile(v.sps[1], v.sps[2]) : undefined;
      const c = chooseH264(section, profile);
      if (!c) throw new Refusal(400, 'the offer has no H.264 with packetization-mode=1', 'offer-codec');
      plan.video = { mid: section.mid, pt: c.pt, codec: 'H264', fmtp: c.fmtpLine, receive: false };
    }
  }
  const talk = request.params.typ === 'live' && request.params.dataTyp === 2;
  const section = offer.media.find((x) => x.kind === 'audio' && x.direction !== 'inactive');
  if (media !== 'v' && section) {
    const sends = section.direction === 'sendrecv' || section.direction === 'sendonly';
    const c = chooseG711(section, a?.codec === 'g711u' ? 'PCMU' : 'PCMA');
    if (c) plan.audio = { mid: section.mid, pt: c.pt, codec: c.name, receive: talk && sends };
    else if (talk && sends) throw new Refusal(400, 'the offer has no G.711 (PCMA or PCMU) for talk', 'offer-codec');
  }
  if (!plan.video && !plan.audio) throw new Refusal(400, 'the offer receives nothing this request plays (audio needs PCMA or PCMU)', 'offer-codec');
  // audio other than the negotiated G.711 as it comes (or not known yet) is read through the PCMA stage
  const g711 = a?.kind === 'audio' && a.sampleRate === 8000 && a.channels === 1 ? a.codec : undefined;
  plan.pcma = !!plan.audio && !((g711 === 'g711a' && plan.audio.codec === 'PCMA') || (g711 === 'g711u' && plan.audio.codec === 'PCMU'));
  return plan;
}
