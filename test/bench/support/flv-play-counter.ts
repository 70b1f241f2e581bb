/**
 * A player that only counts: reads an HTTP-FLV response (chunked or not) straight off a socket and reports bytes,
 * tags and each complete tag's type and timestamp, without copying or decoding media. Cheap enough to run
 * hundreds of them beside a load generator in one process.
 */

/**
 * Receives each complete FLV tag: type (8 audio, 9 video, 18 script), timestamp in ms, body size, and the body's
 * first two bytes big-endian (-1 for a shorter body): what tells a sequence header from a frame, e.g. 0xaf00 AAC
 * config and 0xaf01 an AAC frame, 0x1700 AVC config and 0x1701 a key frame.
 */
export type TagSink = (type: number, timestamp: number, size: number, head: number) => void;

const enum Http {
  Head,
  ChunkSize,
  ChunkData,
  ChunkCrlf,
  Body,
}
const enum Flv {
  FileHeader,
  TagHeader,
  TagBody,
}

const MAX_HEAD = 16 * 1024;
const MAX_CHUNK_LINE = 64;

export class FlvPlayCounter {
  /** bytes read from the socket, HTTP framing included */
  bytes = 0;
  /** FLV bytes (file header, tags and their trailers) */
  flvBytes = 0;
  tags = 0;
  videoTags = 0;
  audioTags = 0;
  status = 0;
  /** set when the response cannot be read; the caller closes the socket */
  error: string | undefined;

  private http = Http.Head;
  private headText = '';
  private chunked = false;
  private chunkLine = '';
  private chunkLeft = 0;
  private crlfLeft = 0;

  private flv = Flv.FileHeader;
  /** bytes still needed by the current FLV state (file header, 11-byte tag header, or body plus 4-byte trailer) */
  private need = 13;
  private readonly hdr = Buffer.alloc(11);
  private hdrFill = 0;
  private tagType = 0;
  private tagTs = 0;
  private tagSize = 0;
  private head = 0;
  private headFill = 0;

  constructor(private readonly onTag?: TagSink) {}

  /** Feeds bytes 0 to `end` of `chunk` as they arrive (nothing of it is kept); after an error further input is ignored. */
  push(chunk: Buffer, end = chunk.length): void {
    this.bytes += end;
    let off = 0;
    while (off < end && this.error === undefined) {
      switch (this.http) {
        case Http.Head: {
          // headers are small and arrive once: a string is fine here
          const take = Math.min(end - off, MAX_HEAD);
          const text = this.headText + chunk.toString('latin1', off, off + take);
          const at = text.indexOf('\r\n\r\n');
          if (at < 0) {
            if (text.length > MAX_HEAD) return this.fail('HTTP response head larger than 16 KiB');
            this.headText = text;
            off += take;
            break;
          }
          off += at + 4 - this.headText.length;
          this.parseHead(text.slice(0, at));
          this.headText = '';
          break;
        }
        case Http.ChunkSize: {
          const c = chunk[off++];
          if (c === 0x0a) {
            const size = parseInt(this.chunkLine.split(';')[0].trim(), 16);
            this.chunkLine = '';
            if (!Number.isFinite(size) || size < 0) return this.fail('bad chunk size line');
            if (size === 0) return this.fail('response ended (last chunk)');
            this.chunkLeft = size;
            this.http = Http.ChunkData;
          } else if (c !== 0x0d) {
            this.chunkLine += String.fromCharCode(c);
            if (this.chunkLine.length > MAX_CHUNK_LINE) return this.fail('chunk size line too long');
          }
          break;
        }
        case Http.ChunkData: {
          const n = Math.min(this.chunkLeft, end - off);
          this.feedFlv(chunk, off, off + n);
          off += n;
          this.chunkLeft -= n;
          if (this.chunkLeft === 0) {
            this.http = Http.ChunkCrlf;
            this.crlfLeft = 2;
          }
          break;
        }
        case Http.ChunkCrlf: {
          off++;
          if (--this.crlfLeft === 0) this.http = Http.ChunkSize;
          break;
        }
        case Http.Body:
          this.feedFlv(chunk, off, end);
          off = end;
          break;
      }
    }
  }

  private parseHead(head: string): void {
    const lines = head.split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
    if (!m) return this.fail(`not an HTTP response: '${(lines[0] ?? '').slice(0, 80)}'`);
    this.status = Number(m[1]);
    if (this.status !== 200) return this.fail(`HTTP ${this.status}`);
    this.chunked = lines.some((l) => /^transfer-encoding:\s*chunked\s*$/i.test(l));
    this.http = this.chunked ? Http.ChunkSize : Http.Body;
  }

  private feedFlv(buf: Buffer, off: number, end: number): void {
    this.flvBytes += end - off;
    while (off < end && this.error === undefined) {
      if (this.flv === Flv.TagHeader) {
        const n = Math.min(11 - this.hdrFill, end - off);
        buf.copy(this.hdr, this.hdrFill, off, off + n);
        this.hdrFill += n;
        off += n;
        if (this.hdrFill < 11) return;
        this.hdrFill = 0;
        const h = this.hdr;
        this.tagType = h[0] & 0x1f;
        this.tagSize = h.readUIntBE(1, 3);
        this.tagTs = (h.readUIntBE(4, 3) | (h[7] << 24)) >>> 0;
        if (this.tagType !== 8 && this.tagType !== 9 && this.tagType !== 18) return this.fail(`FLV tag type ${this.tagType} (lost sync)`);
        this.flv = Flv.TagBody;
        this.need = this.tagSize + 4;
        this.head = 0;
        this.headFill = 0;
        continue;
      }
      const n = Math.min(this.need, end - off);
      if (this.flv === Flv.TagBody && this.headFill < 2) {
        const take = Math.min(2 - this.headFill, n, this.tagSize - this.headFill);
        for (let i = 0; i < take; i++) this.head = (this.head << 8) | buf[off + i];
        this.headFill += Math.max(0, take);
      }
      if (this.flv === Flv.FileHeader && this.need === 13 && n > 0 && buf[off] !== 0x46) return this.fail('FLV signature missing');
      off += n;
      this.need -= n;
      if (this.need > 0) return;
      if (this.flv === Flv.TagBody) {
        this.tags++;
        if (this.tagType === 9) this.videoTags++;
        else if (this.tagType === 8) this.audioTags++;
        this.onTag?.(this.tagType, this.tagTs, this.tagSize, this.headFill === 2 ? this.head : -1);
      }
      this.flv = Flv.TagHeader;
    }
  }

  private fail(why: string): void {
    this.error = why;
  }
}
