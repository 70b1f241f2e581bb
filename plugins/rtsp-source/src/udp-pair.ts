/** The UDP side of a session that takes RTP over UDP: one socket pair per track. */
import * as dgram from 'node:dgram';
import { SourceError } from './errors';

/**
 * An RTP socket on an even port and its RTCP socket on the next (RFC 3550 §11). `onMessage` gets every datagram;
 * the caller decides whose to take.
 */
export async function bindRtpPair(
  type: 'udp4' | 'udp6',
  onMessage: (rtcp: boolean, msg: Buffer, from: dgram.RemoteInfo) => void,
): Promise<{ port: number; sockets: dgram.Socket[] }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const a = dgram.createSocket(type);
    const port = await bindSocket(a, 0).catch(() => -1);
    if (port < 0 || port % 2 !== 0 || port >= 65535) {
      a.close();
      continue;
    }
    const b = dgram.createSocket(type);
    if ((await bindSocket(b, port + 1).catch(() => -1)) < 0) {
      a.close();
      b.close();
      continue;
    }
    for (const [sock, rtcp] of [
      [a, false],
      [b, true],
    ] as const) {
      sock.on('error', () => undefined);
      sock.on('message', (msg, rinfo) => onMessage(rtcp, msg, rinfo));
    }
    return { port, sockets: [a, b] };
  }
  throw new SourceError('unsupported', 'no free UDP port pair for RTP');
}

function bindSocket(s: dgram.Socket, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.bind(port, () => {
      s.off('error', reject);
      resolve(s.address().port);
    });
  });
}
