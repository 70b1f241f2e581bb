/**
 * The intercom-talks service (provided by intercom): a talk that arrives by another transport than intercom's own
 * WebSockets (webrtc's WHEP session with the browser's microphone) goes through the same talk path: one talker per
 * channel, the jitter buffer, encoding to the terminal's codec and layout, pacing, and the talk's log lines.
 */
import type { StrmRequest } from '../sessions';
import { defineService } from '../services';

/** what the talk's own connection does for intercom */
export interface TalkConnection {
  /** the terminal's audio back, in the client's format; leave it out when the transport carries it otherwise */
  sendAudio?: (data: Buffer) => void;
  /** bytes waiting on the connection */
  backlog(): number;
  /** end the connection: intercom has released everything already */
  close(code: number, reason: string): void;
}

export interface TalkSession {
  /** client audio in the talk's format; a reason when the message is malformed (the caller ends the talk) */
  audio(data: Buffer): string | undefined;
  /** the client left normally: what it said still goes, then the talk ends */
  finish(reason: string): void;
  /** ends the talk now */
  close(reason: string): void;
  readonly isClosed: boolean;
}

/** why a talk was refused: an HTTP status (401, 403, 409) and a reason for the client */
export interface TalkRefusal {
  status: number;
  reason: string;
}

export interface IntercomTalks {
  /**
   * Starts a talk for a live dataTyp 2 request whose play the caller has authorised: refused when the request is
   * no intercom request (403) or another client talks on the channel (409).
   */
  start(request: StrmRequest, o: { fmt: 'g711a' | 'g711u' | 'pcm16'; protocol: string; remote: string }, conn: TalkConnection): TalkSession | TalkRefusal;
}

export const INTERCOM_TALKS = defineService<IntercomTalks>('intercom-talks', { providedBy: 'intercom' });
