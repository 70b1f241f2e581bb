import type { Logger } from 'pino';
import type { RequestLog } from '../plugin-sdk/plugin';

export const REQUEST_LOG_LEVELS = ['info', 'debug', 'trace', 'silent'] as const;
export type RequestLogLevel = (typeof REQUEST_LOG_LEVELS)[number];

/**
 * Lines written once per request or player (opened, closed, player started/stopped): an application that opens and
 * closes in a loop wrote 142 MB a minute through them at info. The operator picks their level (requestLogLevel);
 * the line keeps its words whatever the level, so a grep for 'request closed' works at debug too.
 */
export function requestLogFor(log: Logger, level: RequestLogLevel): RequestLog {
  if (level === 'silent') return () => undefined;
  return (obj, msg) => log[level](obj, msg);
}
