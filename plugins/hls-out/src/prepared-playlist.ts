/**
 * A segmenter's playlist made once per change of the segmenter for all its readers. Every reader's playlist is the
 * same text but for the query each URI carries (its reqId and token), so the text is rendered once, by
 * renderPlaylist itself (the one place that knows the format), with a mark where the query goes, and kept as the
 * Buffers between the marks; a request's body is those with its own query between them: no lines, numbers or
 * dates made again per request. At about 7 requests a second per LL-HLS reader, rendering per request made more
 * garbage than the media those readers got.
 */
import { renderPlaylist } from './playlist';
import type { Container, Segmenter } from './segmenter';

/** never in a playlist (tags, numbers, dates, our file names) nor in an encoded query */
const MARK = '\0';

export class PreparedPlaylist {
  /** the last body made and its query: requests that share a query share it (bodies are never written to) */
  private lastQuery: string | undefined;
  private lastBody: Buffer | undefined;
  /** bytes of the text without its queries */
  private readonly textBytes: number;

  private constructor(
    /** the segmenter's version it shows */
    readonly version: number,
    readonly container: Container,
    readonly lowLatency: boolean,
    /** the text between the places a query goes: one more than those places */
    private readonly pieces: readonly Buffer[],
  ) {
    let n = 0;
    for (const p of pieces) n += p.length;
    this.textBytes = n;
  }

  static prepare(s: Segmenter, container: Container, lowLatency: boolean): PreparedPlaylist {
    const text = renderPlaylist(s, { container, lowLatency, query: MARK });
    return new PreparedPlaylist(
      s.version,
      container,
      lowLatency,
      text.split(MARK).map((p) => Buffer.from(p)),
    );
  }

  /** what renderPlaylist would give for this query (`?reqId=…&token=…`, already encoded), byte for byte */
  body(query: string): Buffer {
    if (query === this.lastQuery && this.lastBody) return this.lastBody;
    const pieces = this.pieces;
    const qBytes = Buffer.byteLength(query);
    const out = Buffer.allocUnsafe(this.textBytes + qBytes * (pieces.length - 1));
    let at = pieces[0].copy(out, 0);
    // the query is encoded once, then copied within the body
    let q = -1;
    for (let i = 1; i < pieces.length; i++) {
      if (q < 0) {
        q = at;
        at += out.write(query, at);
      } else {
        out.copyWithin(at, q, q + qBytes);
        at += qBytes;
      }
      at += pieces[i].copy(out, at);
    }
    this.lastQuery = query;
    this.lastBody = out;
    return out;
  }
}

/** The prepared playlist of each segmenter, made again when the segmenter's version moved. */
export class PreparedPlaylists {
  private readonly bySegmenter = new WeakMap<Segmenter, PreparedPlaylist>();

  constructor(private readonly prepared: () => void = () => undefined) {}

  of(s: Segmenter, container: Container, lowLatency: boolean): PreparedPlaylist {
    let p = this.bySegmenter.get(s);
    if (!p || p.version !== s.version || p.container !== container || p.lowLatency !== lowLatency) {
      p = PreparedPlaylist.prepare(s, container, lowLatency);
      this.bySegmenter.set(s, p);
      this.prepared();
    }
    return p;
  }
}
