/**
 * Why a pull failed, and what the open call answers for it (decisions.md): nothing or a refusal within the open
 * timeout -5; a source that connects and drops at once -3; wrong credentials, an RTSP error status, no usable media
 * -3 with a message that names the source (its URL without the password) and the reason.
 */
import { ErrCode, GatewayError } from '../../../plugin-sdk';

export type FailKind =
  /** no TCP connection (refused, unreachable, no such host, connect timeout) */
  | 'unreachable'
  /** connected, then closed before PLAY was answered */
  | 'dropped'
  /** the server wants credentials we do not have, or refused ours */
  | 'auth'
  /** an RTSP error status (404, 454, 500, ...) */
  | 'status'
  /** nothing in the SDP we can depacketise */
  | 'unsupported'
  /** SETUP refused the transport asked for (461, another error status, an answer of the other transport) */
  | 'transport'
  /** auto over UDP: PLAY answered, and no RTP came within the probe time (UDP blocked on the way) */
  | 'no_rtp'
  /** connected, and a request was not answered in time */
  | 'timeout'
  /** TLS handshake or certificate failure */
  | 'tls'
  /** no media for the stall timeout while playing */
  | 'stalled'
  /** we closed it */
  | 'closed';

export class SourceError extends Error {
  constructor(
    readonly kind: FailKind,
    message: string,
  ) {
    super(message);
    this.name = 'SourceError';
  }
}

/** the open call's answer for a pull that could not start */
export function openErrorOf(err: SourceError, redactedUrl: string, openTimeoutSec: number): GatewayError {
  switch (err.kind) {
    case 'unreachable':
    case 'timeout':
      return new GatewayError(ErrCode.TIMEOUT, `RTSP source ${redactedUrl} did not answer within ${openTimeoutSec} s (${err.message}).`);
    case 'auth':
      return new GatewayError(
        ErrCode.EXECUTION_ERROR,
        `RTSP source ${redactedUrl} refused the credentials: ${err.message}. Check rtspSrc.user and rtspSrc.pwd (or the URL's).`,
      );
    default:
      return new GatewayError(ErrCode.EXECUTION_ERROR, `RTSP source ${redactedUrl} could not be played: ${err.message}.`);
  }
}
