/**
 * The browser's SDP offer (RFC 8866, JSEP RFC 9429), read for what the answer needs: each media section's kind, mid
 * and direction, and its payload types with their codec and fmtp. What is not WebRTC (no ICE credentials, no DTLS
 * fingerprint, no BUNDLE-able mid) is refused with a reason before any peer connection exists.
 *
 * Codec choice (RFC 6184 8.2.2 and Chromium's H264 matching): Chromium accepts an answer's H.264 payload type only
 * when its profile is the one it offered under that type, so the stream's SPS profile picks the type; level
 * asymmetry lets the stream's level differ. Packetization mode 1 only: FU-A is how large key frames travel.
 */
export type Direction = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

export interface OfferedCodec {
  pt: number;
  /** upper case, e.g. 'H264', 'PCMA', 'OPUS' */
  name: string;
  clock: number;
  channels: number;
  /** the fmtp line's parameters, keys lower case */
  fmtp: Map<string, string>;
  /** the fmtp line as written, for an answer that repeats it */
  fmtpLine: string | undefined;
}

export interface OfferedMedia {
  kind: string;
  mid: string;
  /** as the browser says it: recvonly means it only receives (a player), sendrecv/sendonly means it sends too */
  direction: Direction;
  codecs: OfferedCodec[];
}

export interface Offer {
  media: OfferedMedia[];
}

export class OfferError extends Error {}

const DIRECTIONS = new Set<string>(['sendrecv', 'sendonly', 'recvonly', 'inactive']);
const MID = /^[A-Za-z0-9_.~-]{1,32}$/;

export function parseOffer(sdp: string): Offer {
  const lines = sdp.split(/\r?\n/).filter((l) => l.length > 0);
  if (lines[0] !== 'v=0') throw new OfferError('not an SDP offer (it must start with v=0)');
  let sessionIce = false;
  let sessionFingerprint = false;
  const media: Array<OfferedMedia & { ice: boolean; fingerprint: boolean }> = [];
  let cur: (typeof media)[number] | undefined;
  for (const line of lines) {
    if (line.length > 4096) throw new OfferError('an SDP line over 4096 characters');
    if (line.startsWith('m=')) {
      const m = /^m=(\w+) \d+(?:\/\d+)? [A-Z/]+ ?(.*)$/.exec(line);
      if (!m) throw new OfferError(`a malformed media line: ${line.slice(0, 80)}`);
      const pts = m[2].split(' ').filter(Boolean);
      cur = { kind: m[1], mid: '', direction: 'sendrecv', codecs: [], ice: false, fingerprint: false };
      for (const p of pts) {
        const pt = Number(p);
        if (Number.isInteger(pt) && pt >= 0 && pt <= 127) cur.codecs.push({ pt, name: '', clock: 0, channels: 1, fmtp: new Map(), fmtpLine: undefined });
      }
      media.push(cur);
      if (media.length > 16) throw new OfferError('more than 16 media sections');
      continue;
    }
    if (!line.startsWith('a=')) continue;
    const attr = line.slice(2);
    if (attr.startsWith('ice-ufrag:') || attr.startsWith('ice-pwd:')) {
      if (cur) cur.ice = true;
      else sessionIce = true;
    } else if (attr.startsWith('fingerprint:')) {
      if (cur) cur.fingerprint = true;
      else sessionFingerprint = true;
    }
    if (!cur) continue;
    if (attr.startsWith('mid:')) cur.mid = attr.slice(4).trim();
    else if (DIRECTIONS.has(attr)) cur.direction = attr as Direction;
    else if (attr.startsWith('rtpmap:')) {
      const r = /^rtpmap:(\d+) ([\w.-]+)\/(\d+)(?:\/(\d+))?$/.exec(attr);
      const c = r && cur.codecs.find((x) => x.pt === Number(r[1]));
      if (c) {
        c.name = r[2].toUpperCase();
        c.clock = Number(r[3]);
        c.channels = r[4] ? Number(r[4]) : 1;
      }
    } else if (attr.startsWith('fmtp:')) {
      const r = /^fmtp:(\d+) (.*)$/.exec(attr);
      const c = r && cur.codecs.find((x) => x.pt === Number(r[1]));
      if (c) {
        c.fmtpLine = r[2];
        for (const kv of r[2].split(';')) {
          const eq = kv.indexOf('=');
          if (eq > 0) c.fmtp.set(kv.slice(0, eq).trim().toLowerCase(), kv.slice(eq + 1).trim());
        }
      }
    }
  }
  if (media.length === 0) throw new OfferError('the offer has no media section');
  for (const m of media) {
    if (!MID.test(m.mid)) throw new OfferError(`a media section without a usable mid (a=mid), as WebRTC's BUNDLE needs`);
    if (!m.ice && !sessionIce) throw new OfferError('the offer has no ICE credentials (a=ice-ufrag, a=ice-pwd): not a WebRTC offer');
    if (!m.fingerprint && !sessionFingerprint) throw new OfferError('the offer has no DTLS fingerprint (a=fingerprint): not a WebRTC offer');
  }
  return { media: media.map(({ kind, mid, direction, codecs }) => ({ kind, mid, direction, codecs: codecs.filter((c) => c.name !== '' || c.pt < 35) })) };
}

/** H.264 profiles as Chromium tells them apart (profile_idc and constraint flags of profile-level-id) */
export type H264Profile = 'constrained-baseline' | 'baseline' | 'main' | 'constrained-high' | 'high' | 'high-444' | 'other';

export function h264Profile(profileIdc: number, constraints: number): H264Profile {
  if (profileIdc === 66) return constraints & 0x40 ? 'constrained-baseline' : 'baseline';
  if (profileIdc === 77) return constraints & 0x80 ? 'constrained-baseline' : 'main';
  if (profileIdc === 88) return constraints & 0xc0 ? 'constrained-baseline' : 'other';
  if (profileIdc === 100) return (constraints & 0x0c) === 0x0c ? 'constrained-high' : 'high';
  if (profileIdc === 244) return 'high-444';
  return 'other';
}

function offeredProfile(c: OfferedCodec): H264Profile {
  const id = c.fmtp.get('profile-level-id') ?? '42000a';
  if (!/^[0-9a-fA-F]{6}$/.test(id)) return 'other';
  return h264Profile(parseInt(id.slice(0, 2), 16), parseInt(id.slice(2, 4), 16));
}

/** profiles whose decoders also take a stream of the key's profile, best first */
const PLAYS_ALSO: Record<H264Profile, H264Profile[]> = {
  'constrained-baseline': ['baseline', 'main', 'constrained-high', 'high'],
  baseline: ['constrained-baseline', 'main', 'high'],
  main: ['high', 'constrained-high'],
  'constrained-high': ['high'],
  high: [],
  'high-444': [],
  other: [],
};

/**
 * The offered H.264 payload type (packetization mode 1) for a stream of `profile` (from its SPS; undefined before the
 * stream has one, taken as constrained baseline, which every H.264 decoder plays): the same profile, else one whose
 * decoder plays it, else any (Chromium's software decoder reads the stream's own SPS whatever was negotiated).
 */
export function chooseH264(m: OfferedMedia, profile: H264Profile | undefined): OfferedCodec | undefined {
  const mode1 = m.codecs.filter((c) => c.name === 'H264' && c.clock === 90000 && c.fmtp.get('packetization-mode') === '1');
  const want = profile ?? 'constrained-baseline';
  for (const p of [want, ...PLAYS_ALSO[want]]) {
    const c = mode1.find((x) => offeredProfile(x) === p);
    if (c) return c;
  }
  return mode1[0];
}

export function chooseH265(m: OfferedMedia): OfferedCodec | undefined {
  return m.codecs.find((c) => c.name === 'H265' && c.clock === 90000);
}

/** PCMA or PCMU at 8 kHz mono, `prefer` first */
export function chooseG711(m: OfferedMedia, prefer: 'PCMA' | 'PCMU'): OfferedCodec | undefined {
  const g711 = m.codecs.filter(
    (c) => (c.name === 'PCMA' || c.name === 'PCMU' || (c.name === '' && (c.pt === 8 || c.pt === 0))) && (c.clock === 8000 || c.clock === 0),
  );
  const named = g711.map((c) => ({ ...c, name: c.name || (c.pt === 8 ? 'PCMA' : 'PCMU'), clock: 8000 }));
  return named.find((c) => c.name === prefer) ?? named[0];
}
