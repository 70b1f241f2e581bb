/**
 * The media playlist of one stream's HLS form, as one request's player sees it: every URI carries that request's
 * query (reqId and token). RFC 8216 (version 3 for MPEG-TS, 6 for fMP4 with EXT-X-MAP) and, with low latency,
 * RFC 8216bis's partial segments, preload hint and server control.
 */
import type { HlsSegment, Segmenter } from './segmenter';

export interface PlaylistOptions {
  container: 'fmp4' | 'mpegts';
  lowLatency: boolean;
  /** `?reqId=…&token=…`, already encoded */
  query: string;
}

/** segments whose parts are listed (RFC 8216bis: parts older than about three target durations may go) */
const SEGMENTS_WITH_PARTS = 3;

export function segmentUri(msn: number, container: 'fmp4' | 'mpegts', query: string): string {
  return `seg-${msn}.${container === 'fmp4' ? 'm4s' : 'ts'}${query}`;
}

export function renderPlaylist(s: Segmenter, o: PlaylistOptions): string {
  const q = o.query;
  const ll = o.lowLatency;
  const first = s.listedFrom;
  const listed = s.segments.slice(first);
  const cur = ll && s.current && s.current.parts.length > 0 ? s.current : undefined;
  const all: HlsSegment[] = cur ? [...listed, cur] : listed;
  const msn0 = all.length ? all[0].msn : 0;
  let disc = s.discontinuitiesGone;
  for (let i = 0; i < first; i++) if (s.segments[i].discontinuity) disc++;
  const target = s.targetDuration;
  const partTarget = s.partTarget;
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${o.container === 'fmp4' ? 6 : 3}`, `#EXT-X-TARGETDURATION:${target}`];
  if (ll) {
    // players stay three parts behind the live edge (the RFC's minimum); blocking reloads keep them there
    lines.push(`#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=${fixed(partTarget * 3)}`);
    lines.push(`#EXT-X-PART-INF:PART-TARGET=${fixed(partTarget)}`);
  }
  lines.push(`#EXT-X-MEDIA-SEQUENCE:${msn0}`);
  if (disc > 0) lines.push(`#EXT-X-DISCONTINUITY-SEQUENCE:${disc}`);
  // a segment cut inside a long GOP does not start with a keyframe: only audio-only forms can promise this
  if (s.audioOnly) lines.push('#EXT-X-INDEPENDENT-SEGMENTS');
  let init = -1;
  // the segment being made counts: parts further back than about three target durations must go (hls-parser's
  // strict check counts three segment entries, the one being made included)
  // (a preload hint for the first part of a segment not listed yet opens an entry of its own)
  const withParts = all.length + (ll && !cur ? 1 : 0) - SEGMENTS_WITH_PARTS;
  all.forEach((seg, i) => {
    if (seg.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
    if (o.container === 'fmp4' && seg.init.version !== init) {
      init = seg.init.version;
      lines.push(`#EXT-X-MAP:URI="init-${init}.mp4${q}"`);
    }
    if (seg.programDateTime !== undefined) lines.push(`#EXT-X-PROGRAM-DATE-TIME:${new Date(seg.programDateTime).toISOString()}`);
    if (ll && i >= withParts) {
      for (const p of seg.parts) {
        lines.push(`#EXT-X-PART:DURATION=${fixed(p.duration)},URI="part-${seg.msn}.${p.index}.m4s${q}"${p.independent ? ',INDEPENDENT=YES' : ''}`);
      }
    }
    if (seg.complete) {
      lines.push(`#EXTINF:${fixed(seg.duration)},`, segmentUri(seg.msn, o.container, q));
    }
  });
  if (ll) {
    const next = nextPart(s);
    lines.push(`#EXT-X-PRELOAD-HINT:TYPE=PART,URI="part-${next.msn}.${next.index}.m4s${q}"`);
  }
  return lines.join('\n') + '\n';
}

function fixed(x: number): string {
  return x.toFixed(3);
}

/** the part that comes next: of the segment being made, or the first of the one after the last complete one */
export function nextPart(s: Segmenter): { msn: number; index: number } {
  return s.current ? { msn: s.current.msn, index: s.current.parts.length } : { msn: s.lastMsn + 1, index: 0 };
}
