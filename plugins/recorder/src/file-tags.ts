/**
 * A recording's FLV form (the stream's, shared with every FLV reader of it: formats/flv-form.ts) as the bytes of
 * its file: at a start point (the first unit, or the first after the bus skipped ahead) the configuration when it is
 * not the one last written, else the config tags that changed with the unit; then its media tags. Copied (the form
 * is shared) and moved to the file's time, which starts at 0 at the first media tag.
 */
import type { AccessUnit } from '../../../plugin-sdk';
// per unit: from the defining modules, not the barrel (test/core/module-exports.test.ts says why)
import { FLV_TAG_AUDIO, FLV_TAG_VIDEO } from '../../../plugin-sdk/formats';
import { flvTagTimestamp, retimeFlvTags, type FlvForm } from '../../../plugin-sdk/formats';

export class FileTags {
  /** FLV timestamp (ms, the stream's) of the first media tag written: the file's 0 */
  private base: number | undefined;
  /** at a start point next */
  private starting = true;
  /** the configuration version of the last form written (see FlvForm.version) */
  private version = -1;
  /** the file header's flags, from the first start point's init */
  headerFlags: { video: boolean; audio: boolean } | undefined;
  /** tags of each kind written, sequence headers included: what the file holds */
  wroteVideo = false;
  wroteAudio = false;
  videoUnits = 0;
  audioUnits = 0;
  /** audio units the FLV form leaves out (a codec FLV cannot carry) */
  skippedAudio = 0;

  /** whether anything was written (the file's time is fixed) */
  get started(): boolean {
    return this.base !== undefined;
  }

  /** The bus skipped ahead: the next unit written is a start point. */
  skipped(): void {
    this.starting = true;
  }

  /** The file bytes of a unit's form, or undefined when it writes nothing (left out, or no start point yet). */
  bytesOf(au: AccessUnit, f: FlvForm | undefined): Buffer | undefined {
    if (f === undefined) {
      if (au.kind === 'audio' && au.payload.length > 0) this.skippedAudio++;
      return undefined;
    }
    let config: Buffer | undefined;
    let configBytes = 0;
    const init = f.init;
    if (this.starting) {
      // (the bus starts a reader at a keyframe; a unit that is no start point waits for one)
      if (init === undefined) return undefined;
      if (this.version !== f.version) {
        config = init.config;
        configBytes = config.length;
      }
    } else if (f.config !== undefined) {
      for (const c of f.config) configBytes += c.length;
    }
    const bytes = Buffer.allocUnsafe(configBytes + f.mediaBytes);
    let at = config !== undefined ? config.copy(bytes, 0) : this.starting ? 0 : f.copyConfig(bytes, 0);
    at = f.copyMedia(bytes, at);
    if (this.base === undefined) {
      this.base = flvTagTimestamp(bytes, configBytes);
      const flags = init!.header[4];
      this.headerFlags = { video: (flags & 0x01) !== 0, audio: (flags & 0x04) !== 0 };
    }
    retimeFlvTags(bytes, 0, at, this.base, this.seen);
    this.starting = false;
    this.version = f.version;
    if (au.kind === 'video') this.videoUnits++;
    else this.audioUnits++;
    return bytes;
  }

  private readonly seen = (type: number): void => {
    if (type === FLV_TAG_VIDEO) this.wroteVideo = true;
    else if (type === FLV_TAG_AUDIO) this.wroteAudio = true;
  };
}
