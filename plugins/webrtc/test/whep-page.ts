/**
 * A browser side for the WebRTC tests: Debian's Chromium (headless, playwright-core) playing a WHEP URL with its own
 * RTCPeerConnection, as a dispatcher's page would, and reporting what WebRTC's getStats() and the <video> see.
 * Talk: the same page with Chromium's fake microphone (a WAV file of a tone) sending its audio.
 */
import * as fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from '../../console/test/browser-helpers';
import { freeUdpPort as freeUdpPortOn } from '../src/udp-mux';

// browser globals inside page.evaluate callbacks (the project's lib is ES2022 without DOM)
declare const window: any;
declare const document: any;
declare const RTCPeerConnection: any;
declare const MediaStream: any;
declare const navigator: any;
declare const AudioContext: any;
declare const performance: any;

export interface WhepStats {
  status: number;
  error?: string;
  connection: string;
  framesDecoded: number;
  frameWidth: number;
  frameHeight: number;
  videoCodec: string;
  audioCodec: string;
  audioPackets: number;
  keyFramesDecoded: number;
  /** RTCP sender reports the browser got, by kind (its remote-outbound-rtp stats): what its A/V sync rests on */
  senderReports: { video: number; audio: number };
  /**
   * frames the <video> presented: [rtpTimestamp, wall-clock ms of presentation, of capture as the sender reports
   * map it (-1 when unknown), of the last packet's arrival]
   */
  presented: Array<[number, number, number, number]>;
}

export async function launchWebrtcBrowser(fakeMicWav?: string): Promise<Browser> {
  const extra = ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream'];
  if (fakeMicWav) {
    if (!fs.existsSync(fakeMicWav)) throw new Error(`no fake microphone file at ${fakeMicWav}`);
    extra.push(`--use-file-for-fake-audio-capture=${fakeMicWav}`);
  }
  return launchChromium(extra);
}

/**
 * Opens a page and POSTs an offer to `url`: recvonly video and audio, or with `talk` the microphone's audio sendrecv.
 * Resolves with the HTTP status (201 when answered) once the answer is applied.
 */
export async function whepPlay(
  browser: Browser,
  url: string,
  opts: { talk?: boolean; video?: boolean; codecs?: string[] } = {},
): Promise<{ page: Page; status: number; body: string }> {
  const page = await browser.newPage();
  if (opts.talk) {
    // getUserMedia needs a secure context, which about:blank is not: a document of the gateway's loopback origin is
    // one (and Chromium lets it fetch the loopback gateway, which it refuses a page of unknown address)
    await page.goto(new URL('/', url).href);
    await page.setContent('<!doctype html><html><body></body></html>');
  } else await page.setContent('<!doctype html><html><body></body></html>');
  const r = await page.evaluate(
    async ({ url, talk, video, codecs }: { url: string; talk: boolean; video: boolean; codecs: string[] | null }) => {
      const pc = new RTCPeerConnection();
      window.pc = pc;
      window.presented = [];
      const stream = new MediaStream();
      pc.ontrack = (e: any) => stream.addTrack(e.track);
      if (video) {
        const t = pc.addTransceiver('video', { direction: 'recvonly' });
        if (codecs) {
          const caps = window.RTCRtpReceiver.getCapabilities('video').codecs.filter((c: any) => codecs.includes(c.mimeType));
          t.setCodecPreferences(caps);
        }
      }
      if (talk) {
        const mic = await navigator.mediaDevices.getUserMedia({ audio: true });
        pc.addTransceiver(mic.getAudioTracks()[0], { direction: 'sendrecv' });
      } else pc.addTransceiver('audio', { direction: 'recvonly' });
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: offer.sdp });
      const body = await res.text();
      window.location_ = res.headers.get('Location');
      if (res.status !== 201) return { status: res.status, body };
      await pc.setRemoteDescription({ type: 'answer', sdp: body });
      const v = document.createElement('video');
      v.muted = true;
      v.autoplay = true;
      v.playsInline = true;
      v.srcObject = stream;
      document.body.appendChild(v);
      window.video = v;
      const onFrame = (_now: number, meta: any) => {
        if (meta.rtpTimestamp !== undefined)
          window.presented.push([
            meta.rtpTimestamp,
            performance.timeOrigin + meta.presentationTime,
            meta.captureTime === undefined ? -1 : performance.timeOrigin + meta.captureTime,
            performance.timeOrigin + (meta.receiveTime ?? 0),
          ]);
        v.requestVideoFrameCallback(onFrame);
      };
      v.requestVideoFrameCallback(onFrame);
      void v.play().catch(() => undefined);
      return { status: res.status, body };
    },
    { url, talk: opts.talk === true, video: opts.video !== false, codecs: opts.codecs ?? null },
  );
  return { page, ...r };
}

export async function whepStats(page: Page): Promise<WhepStats> {
  return page.evaluate(async () => {
    const pc = window.pc;
    const out: any = {
      status: 0,
      connection: pc.connectionState,
      framesDecoded: 0,
      frameWidth: 0,
      frameHeight: 0,
      videoCodec: '',
      audioCodec: '',
      audioPackets: 0,
      keyFramesDecoded: 0,
      senderReports: { video: 0, audio: 0 },
      presented: window.presented.slice(),
    };
    const stats = await pc.getStats();
    const codecs = new Map<string, string>();
    stats.forEach((s: any) => {
      if (s.type === 'codec') codecs.set(s.id, s.mimeType);
    });
    stats.forEach((s: any) => {
      if (s.type === 'remote-outbound-rtp') out.senderReports[s.kind] = s.reportsSent ?? 0;
      if (s.type !== 'inbound-rtp') return;
      if (s.kind === 'video') {
        out.framesDecoded = s.framesDecoded ?? 0;
        out.keyFramesDecoded = s.keyFramesDecoded ?? 0;
        out.frameWidth = s.frameWidth ?? 0;
        out.frameHeight = s.frameHeight ?? 0;
        out.videoCodec = codecs.get(s.codecId) ?? '';
      } else {
        out.audioPackets = s.packetsReceived ?? 0;
        out.audioCodec = codecs.get(s.codecId) ?? '';
      }
    });
    return out as WhepStats;
  });
}

/** the strongest frequency the page hears from the session's audio (a WebAudio analyser on the remote track) */
export async function hearPeak(page: Page, ms: number): Promise<{ peakHz: number; peakDb: number; rms: number }> {
  return page.evaluate(async (ms: number) => {
    const ctx = new AudioContext();
    await ctx.resume();
    const stream = window.video.srcObject;
    // Chromium renders a remote WebRTC track into Web Audio only while a media element plays it too
    const a = document.createElement('audio');
    a.srcObject = stream;
    a.muted = true;
    void a.play().catch(() => undefined);
    const src = ctx.createMediaStreamSource(stream);
    const an = ctx.createAnalyser();
    an.fftSize = 4096;
    src.connect(an);
    await new Promise((r) => setTimeout(r, ms));
    const f = new Float32Array(an.frequencyBinCount);
    an.getFloatFrequencyData(f);
    const t = new Float32Array(an.fftSize);
    an.getFloatTimeDomainData(t);
    let best = 1;
    for (let i = 2; i < f.length; i++) if (f[i] > f[best]) best = i;
    let sq = 0;
    for (const x of t) sq += x * x;
    return { peakHz: (best * ctx.sampleRate) / an.fftSize, peakDb: f[best], rms: Math.sqrt(sq / t.length) };
  }, ms);
}

/** a UDP port free now on loopback (the plugin's udpPort: the test kit frees TCP ports, not this one) */
export const freeUdpPort = (): Promise<number> => freeUdpPortOn('127.0.0.1');
