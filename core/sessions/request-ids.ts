import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Notice } from '../../plugin-sdk/notices';

/** what the directory keeps of a request besides its id and application */
export interface RequestInfo {
  /** `{normSim}_{chanId}` */
  channel: string;
  fmt: number;
  ctrl: boolean;
  keepIntv: number;
  keepDeadline: number;
}

/**
 * Request ids beyond this process: with several workers the primary's directory (unique across workers, each one's
 * worker known, a closed notice kept in case its worker dies), in a fleet the Redis directory (unique across nodes,
 * each application's cap counted over the fleet), or both (core/fleet/request-directory.ts).
 */
export interface RequestDirectory {
  /** 'cap': the application holds its maximum of open requests across all workers (and nodes) */
  reserve(reqId: string, appId: string, limit: number, closedNotice: Notice, info: RequestInfo): Promise<'ok' | 'self' | 'other' | 'cap'>;
  release(reqId: string, appId: string): void;
  /** a keep moved the request's deadline */
  kept?(appId: string, reqId: string, keepDeadline: number): void;
}

/** the reqIds of keep and close: 1..1000 strings of at most 64 characters */
export function checkReqIds(reqIds: unknown): string[] {
  if (!Array.isArray(reqIds) || reqIds.length === 0 || reqIds.length > 1000 || !reqIds.every((x) => typeof x === 'string' && x.length <= 64)) {
    throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqIds`. Give 1..1000 request ids.');
  }
  return reqIds as string[];
}
