import type { Logger } from 'pino';
import type { MediaBus } from '../../../plugin-sdk';
import { FLV_AUDIO_CODECS } from './config';

/**
 * Audio left out of the FLV, logged once per stream and codec (not per unit; the units are counted by
 * audio_skipped_total). A stream's encoders (one per FLV form in use) each report a codec's first skip.
 */
export class AudioSkips {
  private readonly logged = new Map<string, Set<string>>();

  constructor(
    private readonly log: Logger,
    private readonly audioCodecs: readonly string[],
    private readonly bus: MediaBus,
  ) {}

  note(stream: string, codec: string): void {
    let codecs = this.logged.get(stream);
    if (!codecs) {
      codecs = new Set();
      this.logged.set(stream, codecs);
      this.bus.get(stream)?.on('closed', () => this.logged.delete(stream));
    }
    if (codecs.has(codec)) return;
    codecs.add(codec);
    this.log.info({ stream, codec, why: this.why(codec) }, 'audio left out of the FLV; players get video only');
  }

  private why(codec: string): string {
    if (!FLV_AUDIO_CODECS.includes(codec as never)) return 'FLV cannot carry it (no transcoding yet)';
    if (!this.audioCodecs.includes(codec)) return `not in audioCodecs ${JSON.stringify(this.audioCodecs)}`;
    return codec === 'aac' ? 'no AudioSpecificConfig yet' : 'FLV carries G.711 only at 8 kHz';
  }
}
