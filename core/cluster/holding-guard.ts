/**
 * The connection guard the primary applies to the connections it holds while it reads their first bytes. It is built
 * once, at the primary's start, from the site's caps; the hand-over (hand-over.ts) only asks its listeners' gates.
 */
import * as net from 'node:net';
import type { Logger } from 'pino';
import { ConnectionGuard, type RefusalReason } from '../connection-guard';
import type { FdProbe } from '../fd-probe';
import type { ListenerLimits } from '../listener-limits';

/** the site's caps on what the primary itself holds (PrimaryOptions.connections) */
export interface HoldingCaps {
  maxConnectionsPerListener: number;
  fdReserve: number;
  listenerLimits: ReadonlyMap<string, ListenerLimits>;
  probe?: FdProbe;
}

/** gateway.fdReserve's default, for a primary started without the site's (tests) */
const FD_RESERVE_DEFAULT = 256;

/**
 * The caps a single process applies to its own connections (core/connection-guard.ts), on the connections the primary
 * holds while it reads their first bytes: per listener, and the descriptor reserve (the per-address caps are counted
 * across workers, in each listener's AddressCaps). What it refuses goes to `refused`, which tells a worker.
 */
export function holdingGuard(
  c: HoldingCaps | undefined,
  log: Logger,
  refused: (listener: string, reason: RefusalReason, remote: string) => void,
): ConnectionGuard {
  // listenerLimits' per-address caps are the workers' (and AddressCaps'): the primary's gates have none
  const overrides = new Map<string, ListenerLimits>();
  for (const [name, lim] of c?.listenerLimits ?? []) overrides.set(name, { maxConnections: lim.maxConnections });
  return new ConnectionGuard({
    maxHttpConnectionsPerAddress: 0,
    maxTcpConnectionsPerAddress: 0,
    perAddressExempt: new net.BlockList(),
    overrides,
    maxConnectionsPerListener: c?.maxConnectionsPerListener ?? 0,
    fdReserve: c?.fdReserve ?? FD_RESERVE_DEFAULT,
    probe: c?.probe,
    log: log.child({ part: 'net' }),
    logRefusals: false,
    onRefused: refused,
  });
}
