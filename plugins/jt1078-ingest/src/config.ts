/** jt1078-ingest's config keys (site file `plugins[].config`, env GW_JT1078_INGEST_<KEY>): listeners, UDP reordering,
 * link and takeover timing, frame bounds, G.726 defaults and per-terminal overrides, the downlink's limits. */
import { IsBoolean, IsIn, IsInt, IsObject, IsOptional, IsString, Max, Min, ValidateBy } from 'class-validator';
import type { G726Packing } from '../../../plugin-sdk';
import type { HisiliconDownlink } from './terminal-downlink';

/** Per-terminal audio overrides, by SIM. */
export interface TerminalAudioOverride {
  g726Packing?: G726Packing;
  g726Bits?: number;
}

/** What is wrong with a `terminalAudio` value, or undefined when it is fine. */
export function terminalAudioProblem(v: unknown): string | undefined {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'must be an object of SIM -> { g726Packing?, g726Bits? }';
  for (const [sim, o] of Object.entries(v as Record<string, unknown>)) {
    if (!/^[0-9]{1,20}$/.test(sim)) return `SIM '${sim}' must be 1 to 20 digits`;
    if (o === null || typeof o !== 'object' || Array.isArray(o)) return `${sim}: must be an object`;
    for (const [k, x] of Object.entries(o as Record<string, unknown>)) {
      if (k === 'g726Packing') {
        if (x !== 'left' && x !== 'right') return `${sim}.g726Packing must be 'left' or 'right'`;
      } else if (k === 'g726Bits') {
        if (x !== 2 && x !== 3 && x !== 4 && x !== 5) return `${sim}.g726Bits must be 2, 3, 4 or 5`;
      } else {
        return `${sim}: unknown key ${k} (known: g726Packing, g726Bits)`;
      }
    }
  }
  return undefined;
}

export class Jt1078IngestConfig {
  @IsInt()
  @Min(0)
  @Max(65535)
  livePort2013 = 7612;
  @IsInt()
  @Min(0)
  @Max(65535)
  livePort2019 = 7613;
  @IsInt()
  @Min(0)
  @Max(65535)
  replayPort2013 = 7614;
  @IsInt()
  @Min(0)
  @Max(65535)
  replayPort2019 = 7615;

  @IsOptional()
  @IsString()
  host: string | undefined = undefined;

  @IsBoolean()
  udp = true;

  /** what open results advertise: terminals push over TCP or UDP */
  @IsIn(['tcp', 'udp'])
  advertise = 'tcp';

  /** UDP reorder buffer: packets held and how long (ms) */
  @IsInt()
  @Min(0)
  @Max(4096)
  reorderPackets = 64;
  @IsInt()
  @Min(0)
  @Max(5000)
  reorderMs = 200;

  /** a link that carries no opened channel is closed after this long (ms) */
  @IsInt()
  @Min(100)
  @Max(600_000)
  unknownGraceMs = 10_000;

  /** after a terminal disconnects, how long a reconnect resumes the same stream (ms); then closeCause 2 */
  @IsInt()
  @Min(0)
  @Max(600_000)
  disconnectGraceMs = 10_000;

  /**
   * The first address (IP, any port, TCP or UDP) that pushes a channel keeps its stream for the stream's life:
   * other addresses are refused even when that terminal is gone or silent (default: any address may take over a
   * stream whose link is gone or silent past disconnectGraceMs)
   */
  @IsBoolean()
  pinFirstAddress = false;

  /** a UDP source silent this long counts as disconnected (ms) */
  @IsInt()
  @Min(100)
  @Max(600_000)
  udpIdleMs = 10_000;

  /** largest reassembled frame (bytes); bigger ones are dropped */
  @IsInt()
  @Min(64 * 1024)
  @Max(64 * 1024 * 1024)
  maxFrameBytes = 4 * 1024 * 1024;

  /**
   * G.726 codeword packing announced on audio tracks; terminals never say. 'left' (ITU-T/AAL2, ffmpeg `g726`) is
   * what the only G.726 from terminals we have (the glaciall captures) decodes as; 'right' is RFC 3551 (`g726le`).
   */
  @IsIn(['left', 'right'])
  g726Packing: G726Packing = 'left';

  /** G.726 bits per sample (2..5 = 16..40 kbit/s) for every terminal; 0: from the payload type, else measured */
  @IsIn([0, 2, 3, 4, 5])
  g726Bits = 0;

  /** overrides of g726Packing / g726Bits per terminal, by SIM: { "13800138000": { "g726Bits": 3 } } */
  @IsObject()
  @ValidateBy({
    name: 'terminalAudio',
    validator: {
      validate: (v: unknown) => terminalAudioProblem(v) === undefined,
      defaultMessage: (a) => terminalAudioProblem(a?.value) ?? 'invalid',
    },
  })
  terminalAudio: Record<string, TerminalAudioOverride> = {};

  /** HiSilicon header on audio sent to terminals: 'auto' when the terminal's own audio has one */
  @IsIn(['auto', 'always', 'never'])
  hisiliconDownlink: HisiliconDownlink = 'auto';

  /** bytes waiting to go down a terminal's link past which audio for it is refused (never queued without bound) */
  @IsInt()
  @Min(1024)
  @Max(16 * 1024 * 1024)
  downlinkMaxPendingBytes = 64 * 1024;
}
