// WebRTC from the page (webrtc plugin): a WHEP session (RFC 9725) for a play URL of scheme webrtc. A player offers to
// receive video and audio; a talker (intercom, live dataTyp 2) also sends the microphone on the audio track, through
// the browser's own echo canceller, noise suppression and jitter buffer, and hears the terminal on the same track.
// The play URL carries its own authorisation (reqId and token); DELETE of the answer's Location ends the session.
'use strict';

export class WhepSession {
  constructor() {
    this.pc = null;
    this.resource = null;
    this.mic = null;
  }

  get active() {
    return !!this.pc;
  }

  /**
   * Connects and resolves with the remote MediaStream (its tracks arrive as the answer is applied).
   * talk: the microphone is asked for and sent. onEnd: the connection failed or closed.
   */
  async start(url, { talk = false, video = true, onEnd = () => {} } = {}) {
    this.stop();
    const pc = new RTCPeerConnection();
    this.pc = pc;
    const stream = new MediaStream();
    pc.ontrack = (e) => stream.addTrack(e.track);
    if (video) pc.addTransceiver('video', { direction: 'recvonly' });
    if (talk) {
      this.mic = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
      });
      pc.addTransceiver(this.mic.getAudioTracks()[0], { direction: 'sendrecv' });
    } else pc.addTransceiver('audio', { direction: 'recvonly' });
    pc.onconnectionstatechange = () => {
      if (this.pc === pc && (pc.connectionState === 'failed' || pc.connectionState === 'closed')) {
        this.stop();
        onEnd(`WebRTC ${pc.connectionState}`);
      }
    };
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: offer.sdp });
    const body = await res.text();
    if (res.status !== 201) {
      this.stop();
      throw new Error(`WebRTC refused (${res.status}): ${body.trim()}`);
    }
    const loc = res.headers.get('Location');
    this.resource = loc ? new URL(loc, url).href : null;
    await pc.setRemoteDescription({ type: 'answer', sdp: body });
    return stream;
  }

  /** inbound video and audio figures from getStats(), for the stats line */
  async stats() {
    if (!this.pc) return null;
    const out = { frames: 0, width: 0, height: 0, audioPackets: 0 };
    (await this.pc.getStats()).forEach((s) => {
      if (s.type !== 'inbound-rtp') return;
      if (s.kind === 'video') Object.assign(out, { frames: s.framesDecoded || 0, width: s.frameWidth || 0, height: s.frameHeight || 0 });
      else out.audioPackets = s.packetsReceived || 0;
    });
    return out;
  }

  stop() {
    if (this.resource) {
      fetch(this.resource, { method: 'DELETE' }).catch(() => {});
      this.resource = null;
    }
    if (this.mic) {
      for (const t of this.mic.getTracks()) t.stop();
      this.mic = null;
    }
    if (this.pc) {
      const pc = this.pc;
      this.pc = null;
      pc.close();
    }
  }
}
