import type { Logger } from 'pino';
import { BootError } from './config';
import type { NmsBridge } from './nms-bridge';
import type { FlvServer, FlvServerOptions } from '../plugin-sdk/flv-server';

/** node-media-server keeps global state, so a process holds one FLV server at a time. */
let processWide: NmsBridge | undefined;

export class FlvServerHost {
  private bridge: NmsBridge | undefined;
  private server: FlvServer | undefined;

  constructor(private readonly dataDir: string, private readonly log: Logger) {}

  async start(o: { port: number; host: string; where: string } & FlvServerOptions): Promise<FlvServer> {
    if (this.server) return this.server;
    if (processWide) throw new BootError(`${o.where}: another gateway in this process already runs the FLV server (node-media-server is process-wide)`);
    let bridge: NmsBridge;
    try {
      // loaded on first use: a gateway without an FLV output never loads node-media-server
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { NmsBridge: Bridge } = require('./nms-bridge') as typeof import('./nms-bridge');
      bridge = await Bridge.start({
        host: o.host, port: o.port, dataDir: this.dataDir, logger: this.log.child({ part: 'nms' }),
        maxPlayerBacklogBytes: o.maxPlayerBacklogBytes, maxGopCacheBytes: o.maxGopCacheBytes,
      });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EADDRINUSE') throw new BootError(`${o.where}: port ${o.port} on ${o.host} is already in use`);
      throw new BootError(`${o.where}: FLV server failed to start: ${e.message}`);
    }
    processWide = bridge;
    this.bridge = bridge;
    const port = bridge.port;
    this.server = {
      port,
      setPlayAuthorizer: (fn) => bridge.setPlayAuthorizer(fn),
      onPlayer: (ev, cb) => bridge.onPlayer(ev, cb),
      publish: (app, stream, opts) => bridge.publish(app, stream, opts),
      closePlayers: (app, stream, filter) => bridge.closePlayers(app, stream, filter),
      stats: () => bridge.stats(),
      playerStats: () => bridge.playerStats(),
    };
    return this.server;
  }

  async stop(): Promise<void> {
    const b = this.bridge;
    this.bridge = undefined;
    this.server = undefined;
    if (!b) return;
    try {
      await b.stop();
    } finally {
      if (processWide === b) processWide = undefined;
    }
  }
}
