// One <video> element and whichever player library a URL needs: mpegts.js for FLV (live over WebSocket or HTTP),
// the browser itself for record files (their MP4 form), hls.js for HLS (Safari plays HLS natively), the browser's
// WebRTC for a WHEP play URL (webrtc.js). The libraries are globals from /console/lib/.
'use strict';
import { WhepSession } from './webrtc.js';

export class Player {
  /** @param {HTMLVideoElement} video @param {(msg: string) => void} onError */
  constructor(video, onError) {
    this.video = video;
    this.onError = onError;
    this.flv = null;
    this.hls = null;
    this.whep = new WhepSession();
    /** what plays: { kind, url, reqId? } */
    this.current = null;
  }

  stop() {
    if (this.flv) {
      try {
        this.flv.pause();
        this.flv.unload();
        this.flv.detachMediaElement();
        this.flv.destroy();
      } catch {
        /* a player that failed to start has less to undo */
      }
      this.flv = null;
    }
    if (this.hls) {
      this.hls.destroy();
      this.hls = null;
    }
    this.whep.stop();
    this.video.srcObject = null;
    this.video.onerror = null;
    this.video.removeAttribute('src');
    this.video.load();
    this.current = null;
  }

  /**
   * FLV through mpegts.js. live: a play URL (ws:// or http://); otherwise a file (a record), fetched with `headers`
   * (the API's credentials) and seekable. hasAudio false leaves the audio out.
   */
  playFlv(url, { live, headers, reqId, hasAudio } = { live: true }) {
    this.stop();
    const mpegts = window.mpegts;
    if (!mpegts || !mpegts.getFeatureList().mseLivePlayback) {
      this.onError('This browser cannot play FLV (no MediaSource) or mpegts.js is not installed on the gateway.');
      return;
    }
    // hasAudio false: the stream's audio is left out (a record's G.711); undefined: as the stream says
    const p = mpegts.createPlayer(
      { type: 'flv', isLive: live, url, ...(hasAudio === false ? { hasAudio: false } : {}) },
      {
        enableWorker: false,
        // live: play what arrives at once; a file: buffer ahead as usual
        enableStashBuffer: !live,
        liveBufferLatencyChasing: live,
        headers: headers || undefined,
      },
    );
    p.on(mpegts.Events.ERROR, (type, detail) => this.onError(`player: ${type} ${detail}`));
    p.attachMediaElement(this.video);
    p.load();
    this.flv = p;
    this.current = { kind: live ? 'flv-live' : 'flv-file', url, reqId };
    this.#play();
  }

  /**
   * A file the browser plays itself (a record's MP4, through its signed link): native controls and seeking.
   * onError(at) may answer { url, at } to carry on from `at` seconds with another URL (a renewed link).
   */
  playFile(url, { reqId, onError } = {}) {
    this.stop();
    const v = this.video;
    const current = { kind: 'file', url, reqId };
    v.onerror = async () => {
      if (this.current !== current) return;
      const next = onError ? await onError(v.currentTime) : false;
      if (this.current !== current) return;
      if (!next) {
        this.onError(`player: ${v.error ? v.error.message || `media error ${v.error.code}` : 'error'}`);
        return;
      }
      current.url = next.url;
      v.src = next.url;
      v.currentTime = next.at;
      this.#play();
    };
    v.src = url;
    this.current = current;
    this.#play();
  }

  /** HLS: hls.js where MediaSource exists, the browser's own player otherwise (Safari on iOS) */
  playHls(url, { reqId } = {}) {
    this.stop();
    const Hls = window.Hls;
    if (Hls && Hls.isSupported()) {
      // no worker: the CSP allows none from blob: URLs that are not needed here
      const h = new Hls({ enableWorker: false, lowLatencyMode: true });
      h.on(Hls.Events.ERROR, (_e, data) => {
        if (data.fatal) this.onError(`HLS: ${data.type} ${data.details}`);
      });
      h.loadSource(url);
      h.attachMedia(this.video);
      this.hls = h;
    } else if (this.video.canPlayType('application/vnd.apple.mpegurl')) {
      this.video.src = url;
    } else {
      this.onError('This browser cannot play HLS.');
      return;
    }
    this.current = { kind: 'hls', url, reqId };
    this.#play();
  }

  /** a WHEP play URL (fmt 0, scheme webrtc); talk: also send the microphone (intercom), hear the terminal back */
  async playWebrtc(url, { reqId, talk = false, video = true } = {}) {
    this.stop();
    this.current = { kind: 'webrtc', url, reqId };
    try {
      const stream = await this.whep.start(url, { talk, video, onEnd: (why) => this.onError(why) });
      if (this.current?.url !== url) return;
      // a talker hears the terminal: the element is unmuted for it (the page's click allowed sound)
      this.video.muted = !talk;
      this.video.srcObject = stream;
      this.#play();
    } catch (err) {
      this.current = null;
      this.onError(err.message || String(err));
    }
  }

  #play() {
    const r = this.video.play();
    // autoplay of a muted element is allowed; a refusal leaves the controls to the user
    if (r && r.catch) r.catch(() => undefined);
  }

  /** what the element shows now: the page's "it plays" figures */
  stats() {
    const v = this.video;
    const q = v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : { totalVideoFrames: 0, droppedVideoFrames: 0 };
    return {
      playing: !!this.current,
      width: v.videoWidth,
      height: v.videoHeight,
      time: v.currentTime,
      frames: q.totalVideoFrames,
      dropped: q.droppedVideoFrames,
      // Chromium's count of compressed audio bytes its decoder took: audio is being decoded
      audioBytes: typeof v.webkitAudioDecodedByteCount === 'number' ? v.webkitAudioDecodedByteCount : undefined,
      buffered: v.buffered.length ? v.buffered.end(v.buffered.length - 1) - v.currentTime : 0,
    };
  }
}
