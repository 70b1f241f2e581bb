import { IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

/** codecs the gateway can encode intercom audio to when a terminal has not shown its own */
export const DEFAULT_CODECS = ['g711a', 'g711u', 'g726', 'adpcm'] as const;
export type DefaultCodec = (typeof DEFAULT_CODECS)[number];

export class IntercomConfig {
  /**
   * ws(s)://host:port written into taUrl and wsUrl; default: the gateway's apiBase with http→ws, https→wss (the talk
   * sockets are on the API port). Set it when a TLS front publishes the API port elsewhere.
   */
  @IsOptional()
  @IsString()
  publicBase: string | undefined = undefined;

  /** audio per JT/T 1078 packet sent to the terminal, ms (20 ms = 160 samples at 8 kHz, what terminals send) */
  @IsInt()
  @Min(10)
  @Max(100)
  frameMs = 20;

  /** audio gathered before the first packet of a talk spurt leaves (the jitter buffer's depth), ms */
  @IsInt()
  @Min(0)
  @Max(1000)
  jitterMs = 40;

  /** most audio held for one talker, ms: what a client sends beyond it is dropped and counted, never queued */
  @IsInt()
  @Min(100)
  @Max(5000)
  maxBufferMs = 400;

  /** codec sent to a terminal that has sent no audio yet (else its own codec is used) */
  @IsIn([...DEFAULT_CODECS])
  defaultCodec: DefaultCodec = 'g711a';

  /** G.726 bits per sample (2..5: 16..40 kbit/s) for defaultCodec g726 */
  @IsInt()
  @Min(2)
  @Max(5)
  defaultG726Bits = 4;

  /** G.726 codeword packing for defaultCodec g726 */
  @IsIn(['left', 'right'])
  defaultG726Packing: 'left' | 'right' = 'left';

  /** packet layout when neither talkSendProtoVer nor the terminal's own layout says */
  @IsIn(['2013', '2019'])
  fallbackLayout: '2013' | '2019' = '2013';

  /** largest WebSocket message accepted (taUrl and wsUrl); a bigger one closes the socket with 1009 */
  @IsInt()
  @Min(1024)
  @Max(1024 * 1024)
  maxMessageBytes = 64 * 1024;

  /** STOMP heart-beats this server offers and asks for, ms (0: none) */
  @IsInt()
  @Min(0)
  @Max(600_000)
  stompHeartBeatMs = 10_000;

  /** bytes waiting on a talker's socket past which downlink audio frames are dropped (counted) */
  @IsInt()
  @Min(4096)
  downlinkMaxBacklogBytes = 64 * 1024;
}
