/**
 * A talker's jitter buffer: PCM samples from the client, taken out one packet's worth at a time by the pacer.
 *
 * Bounded: it holds at most `capacity` samples; what a client sends beyond that is dropped on arrival and counted
 * (a client sending faster than real time is cut, not queued). It starts a talk spurt only once `prebuffer` samples
 * are in (so small arrival jitter does not starve the first packets) and, when it runs dry, the rest of the last
 * packet is silence and it waits to fill again: a client that pauses leaves a gap, not a backlog.
 */
export interface JitterStats {
  /** samples taken in */
  accepted: number;
  /** samples dropped because the buffer was full */
  dropped: number;
  /** times it ran dry mid-spurt */
  underruns: number;
}

export class JitterBuffer {
  private readonly ring: Int16Array;
  private readPos = 0;
  private fill = 0;
  private playing = false;
  /** arrival time of the message each run of samples came in, for the delay metric; bounded like the ring */
  private readonly arrivals: Array<{ end: number; at: number }> = [];
  /** samples ever written and read (positions for `arrivals`) */
  private written = 0;
  private read = 0;
  readonly stats: JitterStats = { accepted: 0, dropped: 0, underruns: 0 };

  constructor(
    readonly capacity: number,
    readonly prebuffer: number,
  ) {
    if (!(capacity > 0) || prebuffer > capacity) throw new RangeError(`jitter buffer: prebuffer ${prebuffer} over capacity ${capacity}`);
    this.ring = new Int16Array(capacity);
  }

  get buffered(): number {
    return this.fill;
  }

  /** Adds samples that arrived at `at` (ms); returns how many were dropped for lack of room. */
  write(pcm: Int16Array, at: number): number {
    const room = this.capacity - this.fill;
    const n = Math.min(room, pcm.length);
    let w = (this.readPos + this.fill) % this.capacity;
    for (let i = 0; i < n; i++) {
      this.ring[w] = pcm[i];
      if (++w === this.capacity) w = 0;
    }
    this.fill += n;
    this.written += n;
    if (n > 0) {
      const last = this.arrivals[this.arrivals.length - 1];
      if (last && last.at === at) last.end = this.written;
      else this.arrivals.push({ end: this.written, at });
    }
    this.stats.accepted += n;
    const dropped = pcm.length - n;
    this.stats.dropped += dropped;
    return dropped;
  }

  /**
   * One packet's worth of samples into `out` (its whole length), or undefined when there is nothing to send in
   * this slot (still filling, or dry). `arrivedAt` is when the oldest sample in it arrived. `flush`: the talker is
   * gone, so what is left goes out without waiting for the prebuffer.
   */
  take(out: Int16Array, flush = false): { arrivedAt: number } | undefined {
    const n = out.length;
    if (flush && this.fill > 0) this.playing = true;
    if (!this.playing) {
      if (this.fill < Math.max(this.prebuffer, 1) || this.fill < Math.min(n, this.capacity)) return undefined;
      this.playing = true;
    }
    if (this.fill === 0) {
      this.playing = false;
      this.stats.underruns++;
      return undefined;
    }
    while (this.arrivals.length > 1 && this.arrivals[0].end <= this.read) this.arrivals.shift();
    const arrivedAt = this.arrivals[0]?.at ?? 0;
    const k = Math.min(n, this.fill);
    for (let i = 0; i < k; i++) {
      out[i] = this.ring[this.readPos];
      if (++this.readPos === this.capacity) this.readPos = 0;
    }
    // dry mid-packet: the rest is silence, and the next spurt waits for the prebuffer again
    if (k < n) {
      out.fill(0, k);
      this.playing = false;
      this.stats.underruns++;
    }
    this.fill -= k;
    this.read += k;
    return { arrivedAt };
  }
}
