/**
 * The SDP of a DESCRIBE answer (RFC 4566), as far as pulling needs it: each media's payload type, encoding, clock
 * rate, channels, fmtp parameters and control URL. Lines that do not parse are skipped and counted, not fatal.
 */

export type MediaCodec = 'h264' | 'h265' | 'aac' | 'g711a' | 'g711u';

export interface SdpMedia {
  type: string;
  payloadType: number;
  /** encoding name as written, upper case (H264, H265, MPEG4-GENERIC, PCMA, ...) */
  encoding: string;
  /** ours, when we can depacketise it */
  codec: MediaCodec | undefined;
  clockRate: number;
  channels: number;
  fmtp: Record<string, string>;
  /** the absolute URL to SETUP */
  control: string;
}

export interface Sdp {
  media: SdpMedia[];
  /** lines that did not parse */
  badLines: number;
}

/** static payload types of RFC 3551 that cameras send without an rtpmap */
const STATIC: Record<number, { encoding: string; clockRate: number; channels: number }> = {
  0: { encoding: 'PCMU', clockRate: 8000, channels: 1 },
  8: { encoding: 'PCMA', clockRate: 8000, channels: 1 },
};

function codecOf(encoding: string, fmtp: Record<string, string>): MediaCodec | undefined {
  switch (encoding) {
    case 'H264':
      return 'h264';
    case 'H265':
    case 'HEVC':
      return 'h265';
    case 'PCMA':
      return 'g711a';
    case 'PCMU':
      return 'g711u';
    case 'MPEG4-GENERIC': {
      // RFC 3640: only the AAC modes; sizelength tells the AU-header layout, so it must be there
      const mode = (fmtp.mode ?? '').toLowerCase();
      return (mode === 'aac-hbr' || mode === 'aac-lbr') && fmtp.sizelength !== undefined ? 'aac' : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * The control URL of a media (RFC 2326 C.1.1): absolute as written, `*` the base, else relative to the base
 * (Content-Base, else Content-Location, else the DESCRIBE URL). Cameras write `trackID=1` and mean base + "/" +
 * it, even when the base has no trailing slash, which URL resolution would drop: join the way players do.
 */
export function controlUrl(base: string, control: string | undefined): string {
  if (!control || control === '*') return base;
  if (/^rtsps?:\/\//i.test(control)) return control;
  if (control.startsWith('/')) {
    const b = new URL(base);
    return `${b.protocol}//${b.host}${control}`;
  }
  return base.endsWith('/') ? base + control : `${base}/${control}`;
}

export function parseSdp(text: string, base: string): Sdp {
  const media: SdpMedia[] = [];
  let badLines = 0;
  let sessionControl: string | undefined;
  interface Draft {
    type: string;
    pts: number[];
    rtpmap: Map<number, string>;
    fmtp: Map<number, string>;
    control?: string;
  }
  const drafts: Draft[] = [];
  let cur: Draft | undefined;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line) continue;
    if (line.length < 2 || line[1] !== '=') {
      badLines++;
      continue;
    }
    const k = line[0];
    const v = line.slice(2);
    if (k === 'm') {
      const parts = v.split(/\s+/);
      if (parts.length < 4) {
        badLines++;
        cur = undefined;
        continue;
      }
      cur = {
        type: parts[0].toLowerCase(),
        pts: parts
          .slice(3)
          .map(Number)
          .filter((n) => Number.isInteger(n) && n >= 0 && n < 128),
        rtpmap: new Map(),
        fmtp: new Map(),
      };
      drafts.push(cur);
    } else if (k === 'a') {
      const colon = v.indexOf(':');
      const name = colon < 0 ? v : v.slice(0, colon);
      const value = colon < 0 ? '' : v.slice(colon + 1);
      if (name === 'control') {
        if (cur) cur.control = value.trim();
        else sessionControl = value.trim();
      } else if (cur && (name === 'rtpmap' || name === 'fmtp')) {
        const m = /^(\d+)\s+(.*)$/.exec(value);
        if (!m) badLines++;
        else (name === 'rtpmap' ? cur.rtpmap : cur.fmtp).set(Number(m[1]), m[2].trim());
      }
    }
  }
  const sessionBase = controlUrl(base, sessionControl);
  for (const d of drafts) {
    if (d.type !== 'video' && d.type !== 'audio') continue;
    // the first payload type we can use; a camera lists one per media in practice
    let chosen: SdpMedia | undefined;
    for (const pt of d.pts) {
      const map = d.rtpmap.get(pt);
      let encoding: string;
      let clockRate: number;
      let channels: number;
      if (map) {
        const [enc, rate, ch] = map.split('/');
        encoding = (enc ?? '').toUpperCase();
        clockRate = Number(rate);
        channels = ch ? Number(ch) : 1;
      } else if (STATIC[pt]) {
        ({ encoding, clockRate, channels } = STATIC[pt]);
      } else {
        continue;
      }
      if (!(clockRate > 0) || !(channels > 0)) {
        badLines++;
        continue;
      }
      const fmtp = parseFmtp(d.fmtp.get(pt) ?? '');
      const m: SdpMedia = {
        type: d.type,
        payloadType: pt,
        encoding,
        codec: codecOf(encoding, fmtp),
        clockRate,
        channels,
        fmtp,
        control: controlUrl(sessionBase, d.control),
      };
      if (m.codec) {
        chosen = m;
        break;
      }
      chosen ??= m;
    }
    if (chosen) media.push(chosen);
  }
  return { media, badLines };
}

/** `a=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z0IA...,aM4...` -> lower-case keys */
export function parseFmtp(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of s.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim().toLowerCase();
    if (key) out[key] = part.slice(eq + 1).trim();
  }
  return out;
}
