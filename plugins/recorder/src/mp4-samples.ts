/**
 * The samples of a record in FLV file order (which is also their order in the MP4's mdat), in typed arrays that grow
 * by doubling: an hour of 25 fps video with audio is some 270 000 samples, a few megabytes here, where objects per
 * sample would be ten times that.
 */

/** A sample entry of the MP4 (stsd): a codec and its configuration. */
export interface SampleDescription {
  codec: 'h264' | 'h265' | 'aac' | 'alaw' | 'ulaw';
  /** avcC / hvcC record, AudioSpecificConfig; empty for G.711 */
  config: Buffer;
  sampleRate: number;
  channels: number;
  width: number;
  height: number;
}

export class SampleTable {
  count = 0;
  /** 0 video, 1 audio */
  track = new Uint8Array(1024);
  /** where the sample's bytes start in the FLV file */
  flvOffset = new Float64Array(1024);
  size = new Uint32Array(1024);
  /** decode time, ms (the FLV tag's timestamp) */
  dts = new Float64Array(1024);
  /** composition offset, ms */
  cts = new Int32Array(1024);
  key = new Uint8Array(1024);
  /** index into the track's descriptions */
  desc = new Uint8Array(1024);

  push(track: number, flvOffset: number, size: number, dts: number, cts: number, key: boolean, desc: number): void {
    if (this.count === this.track.length) this.grow();
    const i = this.count++;
    this.track[i] = track;
    this.flvOffset[i] = flvOffset;
    this.size[i] = size;
    this.dts[i] = dts;
    this.cts[i] = cts;
    this.key[i] = key ? 1 : 0;
    this.desc[i] = desc;
  }

  /** bytes the arrays hold, for the cache's budget */
  get bytes(): number {
    return (
      this.track.byteLength +
      this.flvOffset.byteLength +
      this.size.byteLength +
      this.dts.byteLength +
      this.cts.byteLength +
      this.key.byteLength +
      this.desc.byteLength
    );
  }

  /** Drops the timing columns once the moov is written: streaming needs only where each sample is. */
  dropTiming(): void {
    this.dts = new Float64Array(0);
    this.cts = new Int32Array(0);
    this.key = new Uint8Array(0);
    this.desc = new Uint8Array(0);
  }

  private grow(): void {
    const n = this.track.length * 2;
    const g = <T extends { length: number; set(a: T): void }>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a);
      return b;
    };
    this.track = g(this.track, (k) => new Uint8Array(k));
    this.flvOffset = g(this.flvOffset, (k) => new Float64Array(k));
    this.size = g(this.size, (k) => new Uint32Array(k));
    this.dts = g(this.dts, (k) => new Float64Array(k));
    this.cts = g(this.cts, (k) => new Int32Array(k));
    this.key = g(this.key, (k) => new Uint8Array(k));
    this.desc = g(this.desc, (k) => new Uint8Array(k));
  }
}
