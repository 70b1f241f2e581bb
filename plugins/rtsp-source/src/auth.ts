/**
 * RTSP authentication as cameras do it (RFC 2617 over RTSP): Basic, and Digest with MD5, MD5-sess or SHA-256,
 * with or without qop=auth. Digest is preferred when a server offers both, since Basic sends the password.
 */
import { createHash, randomBytes } from 'node:crypto';

export interface Challenge {
  scheme: 'basic' | 'digest';
  params: Record<string, string>;
}

/**
 * The challenges of WWW-Authenticate header values (a header may repeat; one value may hold several challenges,
 * `Digest realm="x", nonce="y", Basic realm="x"`). Unknown schemes are left out.
 */
export function parseChallenges(values: ReadonlyArray<string>): Challenge[] {
  const out: Challenge[] = [];
  for (const v of values) {
    let cur: Challenge | undefined;
    // tokens: a scheme name, or name=value / name="quoted, value"
    const re = /\s*([A-Za-z0-9_-]+)(?:\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s,]*))?\s*,?/gy;
    let m: RegExpExecArray | null;
    while (re.lastIndex < v.length && (m = re.exec(v)) !== null) {
      if (m[0].length === 0) break;
      const name = m[1];
      if (m[2] === undefined) {
        const s = name.toLowerCase();
        cur = s === 'basic' || s === 'digest' ? { scheme: s, params: {} } : undefined;
        if (cur) out.push(cur);
      } else if (cur) {
        cur.params[name.toLowerCase()] = m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2];
      }
    }
  }
  return out;
}

/** Answers challenges for one session: keeps the nonce count and works out each request's Authorization. */
export class Authenticator {
  private nc = 0;
  private readonly cnonce = randomBytes(8).toString('hex');
  constructor(
    private readonly challenge: Challenge,
    private readonly user: string,
    private readonly pwd: string,
  ) {}

  /** picks the challenge to answer: Digest with an algorithm we know first, else Basic; undefined if none */
  static choose(challenges: ReadonlyArray<Challenge>): Challenge | undefined {
    const digest = challenges.find((c) => c.scheme === 'digest' && !!c.params.nonce && algorithmOf(c) !== undefined);
    return digest ?? challenges.find((c) => c.scheme === 'basic');
  }

  get scheme(): 'basic' | 'digest' {
    return this.challenge.scheme;
  }

  header(method: string, uri: string): string {
    if (this.challenge.scheme === 'basic') return `Basic ${Buffer.from(`${this.user}:${this.pwd}`, 'utf8').toString('base64')}`;
    return digestHeader(this.challenge, this.user, this.pwd, method, uri, ++this.nc, this.cnonce);
  }
}

function algorithmOf(c: Challenge): 'md5' | 'sha256' | undefined {
  const a = (c.params.algorithm ?? 'MD5').toUpperCase();
  if (a === 'MD5' || a === 'MD5-SESS') return 'md5';
  if (a === 'SHA-256' || a === 'SHA-256-SESS') return 'sha256';
  return undefined;
}

/** the Digest Authorization value (RFC 2617 §3.2.2; RFC 7616 for SHA-256) */
export function digestHeader(c: Challenge, user: string, pwd: string, method: string, uri: string, nc: number, cnonce: string): string {
  const alg = algorithmOf(c) ?? 'md5';
  const h = (s: string) => createHash(alg).update(s, 'utf8').digest('hex');
  const realm = c.params.realm ?? '';
  const nonce = c.params.nonce ?? '';
  const sess = /-sess$/i.test(c.params.algorithm ?? '');
  let ha1 = h(`${user}:${realm}:${pwd}`);
  if (sess) ha1 = h(`${ha1}:${nonce}:${cnonce}`);
  const ha2 = h(`${method}:${uri}`);
  // qop may list several ("auth,auth-int"): auth needs no body hash, and is what cameras use
  const qops = (c.params.qop ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const qop = qops.includes('auth') ? 'auth' : undefined;
  const ncHex = nc.toString(16).padStart(8, '0');
  const response = qop ? h(`${ha1}:${nonce}:${ncHex}:${cnonce}:${qop}:${ha2}`) : h(`${ha1}:${nonce}:${ha2}`);
  const q = (s: string) => `"${s.replace(/["\\]/g, '\\$&')}"`;
  const parts = [`username=${q(user)}`, `realm=${q(realm)}`, `nonce=${q(nonce)}`, `uri=${q(uri)}`, `response=${q(response)}`];
  if (c.params.algorithm) parts.push(`algorithm=${c.params.algorithm}`);
  if (c.params.opaque !== undefined) parts.push(`opaque=${q(c.params.opaque)}`);
  if (qop) parts.push(`qop=${qop}`, `nc=${ncHex}`, `cnonce=${q(cnonce)}`);
  return `Digest ${parts.join(', ')}`;
}
