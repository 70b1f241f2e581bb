import * as os from 'node:os';
import { IsArray, IsIn, IsInt, IsObject, IsOptional, IsString, Max, Min, MinLength } from 'class-validator';
import { BootError } from './config';

/** The kernel's own keys (site file "gateway"); env overrides are GW_<KEY>, e.g. GW_HTTP_PORT, GW_DATA_DIR. */
export class GatewayConfig {
  @IsInt() @Min(0) @Max(65535)
  httpPort = 7080;

  @IsString() @MinLength(1)
  listenHost = '0.0.0.0';

  /** written into play URLs and push addresses */
  @IsString() @MinLength(1)
  publicHost = '127.0.0.1';

  /** public base of the API for URLs given to clients (record file urls); default http://{publicHost}:{httpPort} */
  @IsOptional() @IsString()
  apiBase: string | undefined = undefined;

  @IsString() @MinLength(1)
  dataDir = './data';

  @IsString() @MinLength(1)
  instId = os.hostname();

  @IsIn(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
  logLevel = 'info';

  @IsInt() @Min(1024) @Max(16 * 1024 * 1024)
  bodyLimit = 64 * 1024;

  @IsInt() @Min(15) @Max(600)
  keepIntvDefault = 20;

  @IsInt() @Min(1) @Max(3600)
  openTimeoutSec = 60;

  @IsInt() @Min(1) @Max(86400)
  consumptionTimeoutSec = 120;

  /** a stream's GOP cache is dropped past this many bytes until the next keyframe */
  @IsInt() @Min(64 * 1024)
  maxGopBytes = 8 * 1024 * 1024;

  /** one subscriber's queue past this skips ahead to the next keyframe */
  @IsInt() @Min(64 * 1024)
  maxQueueBytes = 2 * 1024 * 1024;

  /** ceiling for a stream's queued media (GOP cache plus all subscriber queues) */
  @IsInt() @Min(256 * 1024)
  maxStreamBytes = 32 * 1024 * 1024;

  /** a reader (player, recorder, stage) that takes nothing this long while media waits for it is ended */
  @IsInt() @Min(1) @Max(3600)
  readerDropAfterSec = 30;

  /** [{appId, user, password, gov?, admin?}] */
  @IsArray()
  applications: unknown[] = [];

  /** small-state store: {"kind":"sqlite"} (file in dataDir), {"kind":"redis","url":"redis://..."} or {"kind":"memory"} */
  @IsObject()
  store: Record<string, unknown> = { kind: 'sqlite' };
}

export interface ApplicationEntry {
  appId: string;
  user: string;
  password: string;
  gov: boolean;
  admin: boolean;
}

const ID_RE = /^[A-Za-z0-9._~-]{1,64}$/;

/** Checks the applications list by hand so a bad entry is named as applications[i].key. */
export function parseApplications(list: unknown[], where: string): ApplicationEntry[] {
  const seenUsers = new Set<string>();
  return list.map((raw, i) => {
    const at = `${where}: key applications[${i}]`;
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new BootError(`${at}: must be an object`);
    const a = raw as Record<string, unknown>;
    for (const k of Object.keys(a)) {
      if (!['appId', 'user', 'password', 'gov', 'admin'].includes(k)) throw new BootError(`${at}.${k}: unknown key`);
    }
    if (typeof a.appId !== 'string' || !ID_RE.test(a.appId)) throw new BootError(`${at}.appId: must be 1-64 characters of [A-Za-z0-9._~-]`);
    if (typeof a.user !== 'string' || a.user.length === 0 || a.user.includes(':')) throw new BootError(`${at}.user: must be a non-empty string without ':'`);
    if (typeof a.password !== 'string' || a.password.length === 0) throw new BootError(`${at}.password: must be a non-empty string`);
    for (const flag of ['gov', 'admin'] as const) {
      if (a[flag] !== undefined && typeof a[flag] !== 'boolean') throw new BootError(`${at}.${flag}: must be a boolean`);
    }
    if (seenUsers.has(a.user)) throw new BootError(`${at}.user: '${a.user}' is used by another application`);
    seenUsers.add(a.user);
    return { appId: a.appId, user: a.user, password: a.password, gov: a.gov === true, admin: a.admin === true };
  });
}
