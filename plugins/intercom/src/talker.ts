/**
 * One talk session: a client talking to (and hearing) one terminal channel, whatever the WebSocket protocol.
 *
 * Uplink: client audio → PCM → jitter buffer → every frameMs one frame, encoded to the terminal's own codec (the
 * audio track it publishes; the site default before it sent any) → the terminal link's sendAudio, in the layout
 * talkSendProtoVer asks for, else the terminal's own. The pacer (one clock for all talkers) calls `tick`.
 * Downlink: the channel's audio read from the bus, decoded to PCM at 8 kHz and handed to the connection in the
 * client's format; dropped (counted) while the client's socket is backed up.
 */
import type { Logger } from 'pino';
import type { AudioTrackInfo, MediaStream, Sessions, StrmRequest, ReaderHandle, TerminalLink, TerminalLinks, PlayerHandle } from '../../../plugin-sdk';
import type { Off } from '../../../plugin-sdk';
import { createDecoder, createEncoder, type AudioDecoder, type AudioEncoder, type EncoderSpec } from '../../../plugin-sdk/codecs';
import { CLIENT_RATE, decodeClient, encodeClient, PcmRateConverter, type ClientFormat } from './client-format';
import type { IntercomConfig } from './config';
import { JitterBuffer } from './jitter';
import type { IntercomMeters } from './meters';

/** WebSocket close codes this plugin uses (decisions.md fixes 4401; the rest are ours, in the 4000s) */
export const CLOSE = {
  normal: 1000,
  unsupportedData: 1003,
  invalidPayload: 1007,
  badToken: 4401,
  badQuery: 4400,
  notIntercom: 4403,
  heartbeat: 4408,
  busy: 4409,
  gone: 4410,
  stompError: 4400,
  internal: 1011,
} as const;

/** What the talker needs from its connection (binary WebSocket or STOMP). */
export interface TalkConnection {
  /** downlink audio in the client's format; undefined when this connection does not take downlink (STOMP unsubscribed) */
  sendAudio?: (data: Buffer) => void;
  /** bytes waiting on the connection's socket */
  backlog(): number;
  /** end the connection with a code and reason (the talker has released everything already) */
  close(code: number, reason: string): void;
}

export interface TalkerHost {
  config: IntercomConfig;
  sessions: Sessions;
  links: TerminalLinks;
  meters: IntercomMeters;
  log: Logger;
  /** once per talker (ended), at the site's requestLogLevel */
  requestLog: (obj: Record<string, unknown>, msg: string) => void;
  now(): number;
  /** the talker ended: free its channel */
  ended(t: Talker): void;
}

/** a frame whose clock slot passed this long ago (timers late, event loop blocked) is skipped, not sent in a burst */
const MAX_LATE_SLOTS = 5;
/** slots a late tick may still catch up on at once */
const MAX_CATCHUP = 3;

export class Talker {
  readonly jitter: JitterBuffer;
  private link: TerminalLink | undefined;
  private offLinkClose: Off | undefined;
  private readonly offAttach: Off;
  private readonly frame: Int16Array;
  private readonly startedAt: number;
  private nextDue: number;
  private encoder: { key: string; enc: AudioEncoder; toRate: PcmRateConverter } | undefined;
  private downSub: ReaderHandle | undefined;
  private player: PlayerHandle | undefined;
  private closed = false;
  /** the client left normally: what it said is still being sent, then the talk ends with this */
  private draining: { code: number; reason: string } | undefined;
  /** frames sent to the terminal, refused by its link */
  readonly stats = { framesSent: 0, framesRefused: 0, downlinkFrames: 0, downlinkDropped: 0 };

  constructor(
    private readonly host: TalkerHost,
    readonly request: StrmRequest,
    readonly fmt: ClientFormat,
    readonly protocol: string,
    readonly remote: string,
    private readonly conn: TalkConnection,
  ) {
    const c = host.config;
    const perMs = CLIENT_RATE / 1000;
    this.frame = new Int16Array(c.frameMs * perMs);
    this.jitter = new JitterBuffer(c.maxBufferMs * perMs, Math.min(c.jitterMs * perMs, c.maxBufferMs * perMs));
    this.startedAt = host.now();
    this.nextDue = this.startedAt;
    const p = request.params;
    this.offAttach = host.links.onAttach((e) => {
      if (e.typ === 'live' && e.normSim === p.normSim && e.chanId === p.chanId && e.link !== this.link) this.useLink(e.link);
    });
    const link = host.links.find(p.normSim, p.chanId, 'live');
    if (link) this.useLink(link);
    this.player = host.sessions.attachPlayer(request.reqId, { protocol, remote });
  }

  get streamName(): string {
    return this.request.streamName;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** the layout packets go down in: talkSendProtoVer, else the terminal's own, else config */
  get layout(): '2013' | '2019' {
    const v = this.request.params.talkSendProtoVer;
    if (v === 1) return '2019';
    if (v === 0) return '2013';
    return this.link?.layout ?? this.host.config.fallbackLayout;
  }

  private useLink(link: TerminalLink): void {
    this.offLinkClose?.();
    this.link = link;
    this.host.log.debug({ reqId: this.request.reqId, link: link.id, layout: link.layout }, 'talk: terminal link found');
    this.offLinkClose = link.onClose((reason) => {
      if (this.link === link) this.close(CLOSE.gone, `terminal left: ${reason}`);
    });
  }

  /** A client message's audio. Returns why it is malformed (the caller closes), else undefined. */
  audio(data: Buffer): string | undefined {
    if (this.closed || this.draining) return undefined;
    const pcm = decodeClient(this.fmt, data);
    if (typeof pcm === 'string') return pcm;
    if (pcm.length === 0) return undefined;
    if (!this.link) {
      // nobody to send to yet: kept nowhere, so a terminal that comes late does not get stale speech
      this.host.meters.dropped.noTerminal.inc(pcm.length);
      return undefined;
    }
    const dropped = this.jitter.write(pcm, this.host.now());
    if (dropped > 0) this.host.meters.dropped.overflow.inc(dropped);
    return undefined;
  }

  /** The pacer's clock: send the frames whose slots are due. */
  tick(now: number): void {
    if (this.closed) return;
    const frameMs = this.host.config.frameMs;
    if (now - this.nextDue > MAX_LATE_SLOTS * frameMs) this.nextDue = now; // late timers: the missed slots are a gap
    for (let n = 0; now >= this.nextDue && n < MAX_CATCHUP; n++) {
      this.slot(this.nextDue, now);
      this.nextDue += frameMs;
    }
    if (this.draining && (this.jitter.buffered === 0 || !this.link)) this.close(this.draining.code, this.draining.reason);
  }

  /**
   * The client closed its side (or said DISCONNECT): what it sent is still in the buffer, at most maxBufferMs, and
   * goes out in real time before the talk ends (the channel stays taken meanwhile), so the end of its last words is
   * not cut. Nothing more is read from it.
   */
  finish(code: number, reason: string): void {
    if (this.closed || this.draining) return;
    if (this.jitter.buffered === 0 || !this.link) {
      this.close(code, reason);
      return;
    }
    this.draining = { code, reason };
    this.stopDownlink();
  }

  private slot(due: number, now: number): void {
    const link = this.link;
    if (!link) return;
    const got = this.jitter.take(this.frame, this.draining !== undefined);
    if (!got) return;
    const enc = this.encoderFor();
    const pcm = enc.toRate.process(this.frame);
    const payload = enc.enc.encode(pcm);
    let ok: boolean;
    try {
      ok = link.sendAudio(this.request.params.normSim, this.request.params.chanId, {
        codec: enc.enc.codec,
        payload,
        timestamp: Math.max(0, Math.round(due - this.startedAt)),
        layout: this.layout,
      });
    } catch (err) {
      // a frame the link cannot pack (a SIM not in digits, say): ours to log, not the process's to crash on
      this.host.log.error({ reqId: this.request.reqId, err: (err as Error).message }, 'talk: frame could not be packed');
      this.close(CLOSE.gone, 'the terminal cannot be sent audio');
      return;
    }
    if (ok) {
      this.stats.framesSent++;
      this.host.meters.uplinkFrames.inc();
      this.host.meters.delay.observe(Math.max(0, now - got.arrivedAt) / 1000);
    } else {
      this.stats.framesRefused++;
      this.host.meters.uplinkRefused.inc();
    }
  }

  /** The terminal's own codec (its published audio track) when it can be encoded, else the site default. */
  private encoderFor(): { enc: AudioEncoder; toRate: PcmRateConverter } {
    const c = this.host.config;
    const track = this.audioTrack();
    let spec: EncoderSpec | undefined;
    if (track && createEncoder(track)) spec = { codec: track.codec, sampleRate: track.sampleRate, bitsPerSample: track.bitsPerSample, packing: track.packing };
    spec ??= {
      codec: c.defaultCodec,
      sampleRate: 8000,
      bitsPerSample: c.defaultCodec === 'g726' ? c.defaultG726Bits : undefined,
      packing: c.defaultG726Packing,
    };
    const key = `${spec.codec}/${spec.sampleRate}/${spec.bitsPerSample}/${spec.packing}`;
    if (this.encoder?.key !== key) {
      const enc = createEncoder(spec)!;
      this.encoder = { key, enc, toRate: new PcmRateConverter(CLIENT_RATE, enc.sampleRate) };
      this.host.log.info(
        { reqId: this.request.reqId, codec: spec.codec, sampleRate: enc.sampleRate, bits: spec.bitsPerSample, own: track?.codec },
        'talk: encoding for the terminal',
      );
    }
    return this.encoder;
  }

  private audioTrack(): AudioTrackInfo | undefined {
    const media = this.host.sessions.getStreamByName(this.request.streamName)?.media;
    return media?.tracks.find((t): t is AudioTrackInfo => t.kind === 'audio');
  }

  /** Starts the downlink: the channel's audio to the client (once; again after `stopDownlink`). */
  startDownlink(): void {
    if (this.closed || this.downSub || !this.conn.sendAudio) return;
    const media: MediaStream | undefined = this.host.sessions.getStreamByName(this.request.streamName)?.media;
    if (!media) return;
    let dec: AudioDecoder | undefined;
    let toClient: PcmRateConverter | undefined;
    let warned = '';
    const maxBacklog = this.host.config.downlinkMaxBacklogBytes;
    this.downSub = media.subscribe(
      {
        tracks: (list) => {
          const t = list.find((x): x is AudioTrackInfo => x.kind === 'audio');
          dec = t ? createDecoder(t) : undefined;
          toClient = dec ? new PcmRateConverter(dec.sampleRate, CLIENT_RATE) : undefined;
          if (t && !dec && warned !== t.codec) {
            warned = t.codec;
            this.host.log.warn({ reqId: this.request.reqId, codec: t.codec }, "talk: the terminal's audio cannot be decoded here; no downlink");
          }
        },
        write: (unit) => {
          const send = this.conn.sendAudio;
          if (unit.kind !== 'audio' || !dec || !toClient || !send || this.closed) return;
          if (this.conn.backlog() > maxBacklog) {
            this.stats.downlinkDropped++;
            this.host.meters.downlinkDropped.inc();
            return;
          }
          let out: Buffer;
          try {
            out = encodeClient(this.fmt, toClient.process(dec.decode(unit.payload)));
          } catch (err) {
            // a frame the decoder cannot take (cut short, say): skipped, the downlink goes on
            this.stats.downlinkDropped++;
            this.host.meters.downlinkDropped.inc();
            this.host.log.debug({ reqId: this.request.reqId, err: (err as Error).message }, 'talk: a terminal audio frame could not be decoded');
            return;
          }
          send(out);
          this.stats.downlinkFrames++;
          this.host.meters.downlinkFrames.inc();
          this.player?.sent(out.length);
        },
      },
      { media: 'a', fromKeyframe: false },
    );
  }

  stopDownlink(): void {
    this.downSub?.close();
    this.downSub = undefined;
  }

  /** Ends the talk: releases the link, the bus reader and the player, then closes the connection. Idempotent. */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.offAttach();
    this.offLinkClose?.();
    this.stopDownlink();
    this.player?.close();
    this.host.ended(this);
    this.host.requestLog(
      {
        reqId: this.request.reqId,
        stream: this.request.streamName,
        protocol: this.protocol,
        code,
        reason,
        framesSent: this.stats.framesSent,
        framesRefused: this.stats.framesRefused,
        droppedSamples: this.jitter.stats.dropped,
        underruns: this.jitter.stats.underruns,
        downlinkFrames: this.stats.downlinkFrames,
        downlinkDropped: this.stats.downlinkDropped,
      },
      'talk ended',
    );
    this.conn.close(code, reason);
  }
}
