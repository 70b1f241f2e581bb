import { createHash, timingSafeEqual } from 'node:crypto';
import type { KeyValueStore } from '../../../plugin-sdk';

export interface TimedToken {
  token: string;
  /** the token is accepted while now < expiredAt */
  expiredAt: Date;
}

export type TimedTokenCheck = 'ok' | 'missing' | 'invalid';

/**
 * What is persisted. Tokens are kept as SHA-256 digests, never in clear: the check compares digests anyway, and a
 * copied state file then holds nothing that can be replayed as a timedToken.
 */
interface StoredTokenSet {
  v: 1;
  /** digest of the config tokens the set was last seeded from ('' when config had none) */
  configDigest: string;
  tokens: Array<{ digest: string; expiredAt: string }>;
}

interface ValidToken {
  digest: Buffer;
  expiresMs: number;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * The currently valid timed tokens for `gov` credentials: one, or old and new during a rotation. Kept in memory for
 * a synchronous check, and in a keyv store so an admin's setTokens survives a restart.
 */
export class TimedTokenStore {
  private tokens: ValidToken[] = [];

  private constructor(
    private readonly store: KeyValueStore,
    private readonly key: string,
  ) {}

  /**
   * Loads the persisted set. Config tokens seed it when they differ from the tokens it was last seeded from: so the
   * latest action wins, whether an admin's setTokens (kept across restarts while config stays the same) or an edit
   * of the config (which replaces what an admin set before). Config without tokens leaves the persisted set alone.
   */
  static async open(store: KeyValueStore, configTokens: readonly TimedToken[] = [], key = 'tokens'): Promise<TimedTokenStore> {
    const self = new TimedTokenStore(store, key);
    const configDigest = configTokens.length > 0 ? digestOfSet(configTokens) : '';
    const stored = await store.get<StoredTokenSet>(key);
    if (stored !== undefined && !isStoredTokenSet(stored)) {
      throw new Error(`the timed token store holds an unreadable record under '${key}'; set the tokens again (admin call or config)`);
    }
    if (stored && (configDigest === '' || stored.configDigest === configDigest)) {
      self.tokens = stored.tokens.map((t) => ({ digest: Buffer.from(t.digest, 'hex'), expiresMs: Date.parse(t.expiredAt) }));
    } else if (configDigest !== '') {
      await self.save(configTokens, configDigest);
    }
    return self;
  }

  /**
   * The config tokens, held in memory only: what the plugin checks with while its store cannot be opened (a full
   * disk), so gov opens go on working. setTokens fails until the real store is back.
   */
  static unsaved(configTokens: readonly TimedToken[], why: string): TimedTokenStore {
    const failing: KeyValueStore = {
      get: () => Promise.reject(new Error(why)),
      set: () => Promise.reject(new Error(why)),
      delete: () => Promise.reject(new Error(why)),
    };
    const self = new TimedTokenStore(failing, 'tokens');
    self.tokens = configTokens.map((t) => ({ digest: sha256(t.token), expiresMs: t.expiredAt.getTime() }));
    return self;
  }

  /** Replaces the whole set (persisted first: if the store fails, the set in use stays as it was). */
  async setTokens(tokens: readonly TimedToken[]): Promise<void> {
    const current = await this.store.get<StoredTokenSet>(this.key);
    await this.save(tokens, isStoredTokenSet(current) ? current.configDigest : '');
  }

  /**
   * The request's `timedToken`: up to two comma-separated tokens (new and old during a rotation). 'ok' when either
   * equals a token that has not expired at `now`.
   */
  check(timedTokenField: string | undefined | null, now: Date): TimedTokenCheck {
    if (timedTokenField === undefined || timedTokenField === null) return 'missing';
    if (typeof timedTokenField !== 'string') return 'invalid';
    const sent = timedTokenField
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    if (sent.length === 0) return 'missing';
    if (sent.length > 2) return 'invalid';
    const nowMs = now.getTime();
    let ok = false;
    // Every pair is compared, matched or not, on fixed-length digests: the time taken says nothing about how much
    // of a token was right, nor which token matched.
    for (const candidate of sent) {
      const d = sha256(candidate);
      for (const t of this.tokens) {
        if (timingSafeEqual(d, t.digest) && nowMs < t.expiresMs) ok = true;
      }
    }
    return ok ? 'ok' : 'invalid';
  }

  /** the set in use as digests, for the other workers (no token in clear crosses) */
  digests(): Array<{ digest: string; expiresMs: number }> {
    return this.tokens.map((t) => ({ digest: t.digest.toString('hex'), expiresMs: t.expiresMs }));
  }

  /** takes the set another worker saved (the store already holds it); malformed entries are ignored */
  adopt(set: unknown): number {
    if (!Array.isArray(set)) return 0;
    const ok = (set as unknown[]).filter((t): t is { digest: string; expiresMs: number } => {
      const e = t as { digest?: unknown; expiresMs?: unknown } | null | undefined;
      return typeof e?.digest === 'string' && /^[0-9a-f]{64}$/.test(e.digest) && Number.isFinite(e.expiresMs);
    });
    this.tokens = ok.map((t) => ({ digest: Buffer.from(t.digest, 'hex'), expiresMs: t.expiresMs }));
    return ok.length;
  }

  /** The set in use, without the secrets: a short fingerprint (first 8 hex digits of the digest) and the expiry. */
  list(): Array<{ fingerprint: string; expiredAt: Date }> {
    return this.tokens.map((t) => ({ fingerprint: t.digest.toString('hex').slice(0, 8), expiredAt: new Date(t.expiresMs) }));
  }

  private async save(tokens: readonly TimedToken[], configDigest: string): Promise<void> {
    tokens.forEach((t, i) => {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the tokens come from the site's JSON or a JavaScript caller: this is their check
      if (typeof t?.token !== 'string' || t.token.length === 0) throw new Error(`timed token ${i}: token must be a non-empty string`);
      if (!(t.expiredAt instanceof Date) || Number.isNaN(t.expiredAt.getTime())) throw new Error(`timed token ${i}: expiredAt must be a valid Date`);
    });
    const record: StoredTokenSet = {
      v: 1,
      configDigest,
      tokens: tokens.map((t) => ({ digest: sha256(t.token).toString('hex'), expiredAt: t.expiredAt.toISOString() })),
    };
    await this.store.set(this.key, record);
    this.tokens = record.tokens.map((t) => ({ digest: Buffer.from(t.digest, 'hex'), expiresMs: Date.parse(t.expiredAt) }));
  }
}

function digestOfSet(tokens: readonly TimedToken[]): string {
  const canonical = tokens
    .map((t) => `${sha256(t.token).toString('hex')}@${t.expiredAt.toISOString()}`)
    .sort()
    .join('\n');
  return sha256(canonical).toString('hex');
}

function isStoredTokenSet(x: unknown): x is StoredTokenSet {
  // read back from the store: any shape until checked
  const r = x as { v?: unknown; configDigest?: unknown; tokens?: unknown } | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    r.v === 1 &&
    typeof r.configDigest === 'string' &&
    Array.isArray(r.tokens) &&
    (r.tokens as unknown[]).every((t) => {
      const e = t as { digest?: unknown; expiredAt?: unknown } | null | undefined;
      return typeof e?.digest === 'string' && /^[0-9a-f]{64}$/.test(e.digest) && typeof e.expiredAt === 'string' && !Number.isNaN(Date.parse(e.expiredAt));
    })
  );
}
