/** A WebRTC client that is not a browser, for tests and the bench: libdatachannel offering to receive, as a WHEP client. */
import * as ndc from 'node-datachannel';
import { waitFor } from '../../../test/e2e/helpers';

export interface Client {
  pc: ndc.PeerConnection;
  offer: string;
  /** RTP and RTCP packets the client's tracks got */
  packets(): number;
  /** held here: a Track nothing in JavaScript refers to is collected, and its packets go nowhere */
  tracks: ndc.Track[];
}

/** a WebRTC client's offer: recvonly video with the given codecs, recvonly PCMA audio */
export async function clientOffer(video: 'h264' | 'h265' | 'vp8' | 'none'): Promise<Client> {
  const pc = new ndc.PeerConnection('client', { iceServers: [] });
  let packets = 0;
  const tracks: ndc.Track[] = [];
  const count = (t: ndc.Track) => {
    tracks.push(t);
    t.onMessage(() => packets++);
  };
  if (video !== 'none') {
    const v = new ndc.Video('0', 'RecvOnly');
    if (video === 'h264') v.addH264Codec(102, 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f');
    else if (video === 'h265') v.addH265Codec(49);
    else v.addVP8Codec(96);
    count(pc.addTrack(v));
  }
  const a = new ndc.Audio('1', 'RecvOnly');
  a.addAudioCodec(8, 'PCMA/8000');
  count(pc.addTrack(a));
  pc.setLocalDescription();
  await waitFor('the client gathered', () => pc.gatheringState() === 'complete', 5000);
  return { pc, offer: pc.localDescription()!.sdp, packets: () => packets, tracks };
}
