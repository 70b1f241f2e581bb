import { createHash, timingSafeEqual } from 'node:crypto';
import type { Application } from '../plugin-sdk/http';
import type { ApplicationEntry } from './gateway-applications';

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

export type AuthResult = { ok: true; app: Application } | { ok: false; reason: 'missing' | 'malformed' | 'unknown-user' | 'bad-password' };

/** Site applications and Basic credential checks. Digests make the comparison constant-time whatever the lengths. */
export class ApplicationRegistry {
  private readonly byUser = new Map<string, { app: Application; pwd: Buffer }>();
  /** compared against when the user is unknown, so both failures take the same time */
  private readonly dummy = digest('\u0000no-such-user');

  constructor(entries: ApplicationEntry[]) {
    for (const e of entries) {
      this.byUser.set(e.user, { app: { appId: e.appId, user: e.user, gov: e.gov, admin: e.admin }, pwd: digest(e.password) });
    }
  }

  /** the application of an id (calls between fleet nodes name the application, not its credentials) */
  byAppId(appId: string): Application | undefined {
    for (const e of this.byUser.values()) if (e.app.appId === appId) return e.app;
    return undefined;
  }

  /** every application's id */
  appIds(): string[] {
    return [...new Set([...this.byUser.values()].map((e) => e.app.appId))];
  }

  get size(): number {
    return this.byUser.size;
  }

  usesDemoCredentials(): boolean {
    const d = this.byUser.get('demo');
    return !!d && timingSafeEqual(d.pwd, digest('demo'));
  }

  authenticate(header: string | undefined): AuthResult {
    if (!header) return { ok: false, reason: 'missing' };
    const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
    if (!m) return { ok: false, reason: 'malformed' };
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return { ok: false, reason: 'malformed' };
    const user = decoded.slice(0, colon);
    const given = digest(decoded.slice(colon + 1));
    const entry = this.byUser.get(user);
    const match = timingSafeEqual(entry ? entry.pwd : this.dummy, given);
    if (!entry) return { ok: false, reason: 'unknown-user' };
    if (!match) return { ok: false, reason: 'bad-password' };
    return { ok: true, app: entry.app };
  }
}
