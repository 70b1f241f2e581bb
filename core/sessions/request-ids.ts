import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Notice } from '../../plugin-sdk/notices';
import type { OpenParams } from '../../plugin-sdk/sessions';
import { mediaTypOf } from './open-validation';

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

type Answer<K extends 'keep' | 'closed'> = { reqId: string } & Record<K, boolean>;

/**
 * keep or close over holders (workers, nodes): one call per holder with its ids, the answers put back in the caller's
 * order. An id without a holder, or whose holder failed (it died meanwhile: it holds them no more), answers false,
 * like an unknown one.
 */
export async function answerByHolder<H, K extends 'keep' | 'closed'>(
  ids: string[],
  key: K,
  holderOf: (i: number) => H | undefined,
  call: (holder: H, ids: string[]) => Promise<Array<Answer<K>>>,
  failed: (holder: H, err: Error) => void = () => undefined,
): Promise<Array<Answer<K>>> {
  const byHolder = new Map<H, string[]>();
  ids.forEach((id, i) => {
    const h = holderOf(i);
    if (h !== undefined) (byHolder.get(h) ?? byHolder.set(h, []).get(h)!).push(id);
  });
  const answered = new Map<string, Answer<K>>();
  await Promise.all(
    [...byHolder].map(async ([h, sub]) => {
      try {
        for (const it of await call(h, sub)) if (it[key]) answered.set(it.reqId, it);
      } catch (err) {
        failed(h, err as Error);
      }
    }),
  );
  return ids.map((id) => answered.get(id) ?? ({ reqId: id, [key]: false } as Answer<K>));
}

/**
 * what an open puts in the directory beside its id: the closed notice it is owed should its worker die, and what a
 * fleet view shows of it
 */
export function reservationOf(
  instId: string,
  appId: string,
  params: OpenParams,
  ctrl: boolean,
  keepDeadline: number,
): { closedNotice: Notice; info: RequestInfo } {
  const closedNotice: Notice = {
    payload: {
      instId,
      act: 'closed',
      reqId: params.reqId,
      typ: params.typ,
      simNo: params.simNo,
      chan: params.chanId,
      mediaTyp: mediaTypOf(params.typ, params.dataTyp),
    },
    appId,
    cb: params.cb,
    last: true,
  };
  const info = {
    channel: `${params.normSim}_${params.chanId}`,
    fmt: params.fmt,
    ctrl,
    keepIntv: params.keepIntv,
    keepDeadline,
  };
  return { closedNotice, info };
}
