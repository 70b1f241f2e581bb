/**
 * Applications come from the site as plain JSON (GatewayConfig.applications is only checked to be an array), so each
 * entry is checked here by hand to name a mistake as applications[i].key, apart from the decorated class.
 */
import { BootError } from './config';

export interface ApplicationEntry {
  appId: string;
  user: string;
  password: string;
  gov: boolean;
  admin: boolean;
  /** overrides the gateway's maxRequestsPerApp for this appId */
  maxRequests?: number;
}

const ID_RE = /^[A-Za-z0-9._~-]{1,64}$/;

/** Checks the applications list by hand so a bad entry is named as applications[i].key. */
export function parseApplications(list: unknown[], where: string): ApplicationEntry[] {
  const seenUsers = new Set<string>();
  const limits = new Map<string, number>();
  return list.map((raw, i) => {
    const at = `${where}: key applications[${i}]`;
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new BootError(`${at}: must be an object`);
    const a = raw as Record<string, unknown>;
    for (const k of Object.keys(a)) {
      if (!['appId', 'user', 'password', 'gov', 'admin', 'maxRequests'].includes(k)) throw new BootError(`${at}.${k}: unknown key`);
    }
    if (typeof a.appId !== 'string' || !ID_RE.test(a.appId)) throw new BootError(`${at}.appId: must be 1-64 characters of [A-Za-z0-9._~-]`);
    if (typeof a.user !== 'string' || a.user.length === 0 || a.user.includes(':')) throw new BootError(`${at}.user: must be a non-empty string without ':'`);
    if (typeof a.password !== 'string' || a.password.length === 0) throw new BootError(`${at}.password: must be a non-empty string`);
    for (const flag of ['gov', 'admin'] as const) {
      if (a[flag] !== undefined && typeof a[flag] !== 'boolean') throw new BootError(`${at}.${flag}: must be a boolean`);
    }
    if (a.maxRequests !== undefined && (typeof a.maxRequests !== 'number' || !Number.isInteger(a.maxRequests) || a.maxRequests < 1)) {
      throw new BootError(`${at}.maxRequests: must be an integer from 1`);
    }
    if (seenUsers.has(a.user)) throw new BootError(`${at}.user: '${a.user}' is used by another application`);
    seenUsers.add(a.user);
    // two credentials of one appId share one count, so they must agree on its limit
    const other = a.maxRequests === undefined ? undefined : limits.get(a.appId);
    if (other !== undefined && other !== a.maxRequests) throw new BootError(`${at}.maxRequests: application '${a.appId}' is given ${other} by another entry`);
    if (a.maxRequests !== undefined) limits.set(a.appId, a.maxRequests);
    return {
      appId: a.appId,
      user: a.user,
      password: a.password,
      gov: a.gov === true,
      admin: a.admin === true,
      ...(a.maxRequests !== undefined ? { maxRequests: a.maxRequests as number } : {}),
    };
  });
}

/** maxRequests by appId, for the applications that set one */
export function requestLimits(entries: ApplicationEntry[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of entries) if (e.maxRequests !== undefined) out.set(e.appId, e.maxRequests);
  return out;
}
