import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Notice } from '../../plugin-sdk/notices';

/**
 * With several workers, request ids live in one directory (the primary's): unique across workers, each one's worker
 * known (keep and close find it), and a closed notice kept for each in case its worker dies.
 */
export interface RequestDirectory {
  /** 'cap': the application holds its maximum of open requests across all workers */
  reserve(reqId: string, appId: string, limit: number, closedNotice: Notice): Promise<'ok' | 'self' | 'other' | 'cap'>;
  release(reqId: string): void;
}

/** the reqIds of keep and close: 1..1000 strings of at most 64 characters */
export function checkReqIds(reqIds: unknown): string[] {
  if (!Array.isArray(reqIds) || reqIds.length === 0 || reqIds.length > 1000 || !reqIds.every((x) => typeof x === 'string' && x.length <= 64)) {
    throw new GatewayError(ErrCode.INVALID_PARAM, 'Invalid parameter `reqIds`. Give 1..1000 request ids.');
  }
  return reqIds as string[];
}
