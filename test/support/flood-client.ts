/**
 * A flood of idle TCP connections from a process of its own (forked by a test: 21,000 sockets would not fit under
 * one process's descriptor limit of 20,000, so each flooding process holds only what the gateway admitted).
 *
 * Messages from the parent: { t: 'flood', host, port, count, concurrency } opens `count` connections that never send a
 * byte, `concurrency` connecting at a time; each one the gateway refuses (a reset, or any close) is destroyed here at
 * once, each one it keeps is held open. { t: 'close' } destroys every held one. Messages to the parent: 'progress'
 * every 200 ms and when the flood is done ('flooded') or closed ('closed'), with the counts.
 */
import * as net from 'node:net';

export interface FloodCounts {
  /** connections attempted */
  started: number;
  /** connections whose handshake completed */
  connected: number;
  /** connections closed by the gateway after their handshake was seen here (a reset, or an end) */
  closedByPeer: number;
  /** of those, resets */
  resets: number;
  /**
   * connections reset before their handshake was seen here: the gateway accepted and reset them so fast that the
   * reset came with the handshake's completion (on loopback, in one poll)
   */
  resetEarly: number;
  /** connections that failed otherwise before connecting (ECONNREFUSED, EADDRNOTAVAIL, …), by code */
  failed: Record<string, number>;
  /** held open now */
  open: number;
}

export type FloodCommand = { t: 'flood'; host: string; port: number; count: number; concurrency: number } | { t: 'close' };
export type FloodReport = { t: 'progress' | 'flooded' | 'closed'; counts: FloodCounts };

if (require.main === module && process.send) {
  const counts: FloodCounts = { started: 0, connected: 0, closedByPeer: 0, resets: 0, resetEarly: 0, failed: {}, open: 0 };
  const held = new Set<net.Socket>();
  let closing = false;
  const report = (t: FloodReport['t']) => process.send!({ t, counts: { ...counts, failed: { ...counts.failed } } } satisfies FloodReport);
  const timer = setInterval(() => report('progress'), 200);

  const one = (host: string, port: number): Promise<void> =>
    new Promise((resolve) => {
      counts.started++;
      const s = net.connect({ host, port });
      let connected = false;
      let settled = false;
      const settle = () => {
        if (!settled) {
          settled = true;
          resolve();
        }
      };
      s.once('connect', () => {
        connected = true;
        counts.connected++;
        counts.open++;
        held.add(s);
        settle();
      });
      s.on('error', (err: NodeJS.ErrnoException) => {
        if (connected && err.code === 'ECONNRESET') counts.resets++;
        if (connected) return;
        if (err.code === 'ECONNRESET') counts.resetEarly++;
        else counts.failed[err.code ?? 'unknown'] = (counts.failed[err.code ?? 'unknown'] ?? 0) + 1;
      });
      // the peer's end: closed by the gateway (refused, or given up later); close ours at once
      s.on('end', () => s.destroy());
      s.once('close', () => {
        if (connected && held.delete(s)) {
          counts.open--;
          if (!closing) counts.closedByPeer++;
        }
        settle();
      });
    });

  process.on('message', (m: FloodCommand) => {
    if (m.t === 'flood') {
      void (async () => {
        let next = 0;
        const lane = async () => {
          while (next < m.count) {
            next++;
            await one(m.host, m.port);
          }
        };
        await Promise.all(Array.from({ length: m.concurrency }, lane));
        // resets that follow their handshake arrive a moment later
        setTimeout(() => report('flooded'), 300);
      })();
    } else if (m.t === 'close') {
      closing = true;
      for (const s of held) s.destroy();
      const check = setInterval(() => {
        if (counts.open > 0) return;
        clearInterval(check);
        clearInterval(timer);
        report('closed');
        process.disconnect();
      }, 20);
    }
  });
}
