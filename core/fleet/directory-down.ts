import { ErrCode, GatewayError } from '../../plugin-sdk/errors';
import type { Directory } from '../directory/directory';

/** what an open answers while the fleet's directory cannot be reached (decisions.md: -2, saying so) */
export function directoryDown(dir: Pick<Directory, 'describe'>): GatewayError {
  return new GatewayError(
    ErrCode.INTERNAL_ERROR,
    `The fleet directory (${dir.describe}) cannot be reached: opens are refused until it is back; live streams and players go on.`,
  );
}
