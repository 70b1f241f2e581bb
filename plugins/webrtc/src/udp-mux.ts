/**
 * The process's one UDP port for WebRTC, bound at boot: libjuice binds a muxed port only when the first session
 * gathers, so a port already taken would first show as failed sessions; a listener made here binds it now (boot
 * fails naming the key) and keeps it for the process's sessions, which libjuice's mux registry gives the same socket.
 * The library's own log lines, which it prints to stdout in a format of its own, go to the plugin's logger.
 */
import * as dgram from 'node:dgram';
import * as ndc from 'node-datachannel';
import type { Logger } from 'pino';

let loggerSet = false;

export function listenMuxedUdp(port: number, host: string, log: Logger): { stop(): void } {
  if (!loggerSet) {
    loggerSet = true;
    // one logger for the process: the first plugin instance's (its lines name the library, not a session)
    ndc.initLogger('Warning', (level, message) => {
      const at = level === 'Error' || level === 'Fatal' ? 'error' : 'warn';
      log[at]({ libdatachannel: level }, message);
    });
  }
  let listener: ndc.IceUdpMuxListener;
  try {
    listener = new ndc.IceUdpMuxListener(port, host);
  } catch {
    throw new Error(`config key udpPort: port ${port} on ${host} is already in use (UDP), or cannot be bound`);
  }
  // a STUN request no session's ICE username matches: a scan, or a session already gone
  listener.onUnhandledStunRequest((r) => log.debug({ remote: `${r.host}:${r.port}` }, 'WebRTC: STUN request for no session'));
  return { stop: () => listener.stop() };
}

/** a UDP port free now on `host` (for udpPort 0: libjuice cannot say which port it bound when given 0) */
export async function freeUdpPort(host: string): Promise<number> {
  const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(0, host, resolve);
  });
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
