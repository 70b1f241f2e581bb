import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { scratchDir } from './paths';
import { requireTool } from './tools';

export interface RedisServer {
  /** redis://127.0.0.1:<port> */
  url: string;
  port: number;
  /** stops the server (SIGTERM, SIGKILL after 5 s) and removes its scratch directory */
  stop(): Promise<void>;
}

export interface StartRedisOptions {
  /** a fixed port, e.g. to restart a server where clients expect it; default a free one */
  port?: number;
  /** how long to wait for PING to answer (default 10 s) */
  readyTimeoutMs?: number;
}

/**
 * A throwaway redis-server on loopback: no persistence, its own scratch dir. Resolves once it answers PING.
 * Fails with a clear message when redis-server is not installed or does not come up.
 */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const bin = requireTool('redis-server', 'redis-server');
  // A free port found by binding 0 can be taken by someone else before redis binds it; try a few.
  for (let tries = 0; ; tries++) {
    const port = opts.port ?? (await freePort());
    try {
      return await launch(bin, port, opts.readyTimeoutMs ?? 10_000);
    } catch (err) {
      if (opts.port !== undefined || tries >= 2 || !/Address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

async function launch(bin: string, port: number, readyTimeoutMs: number): Promise<RedisServer> {
  const dir = scratchDir('redis');
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async () => {
    await kill(child, exited);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + readyTimeoutMs;
  let spawnError: Error | undefined;
  child.once('error', (err) => (spawnError = err));
  for (;;) {
    if (spawnError) {
      await stop();
      throw new Error(`cannot start redis-server (${bin}): ${spawnError.message}`);
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`redis-server exited (${child.exitCode ?? child.signalCode}) before answering PING on port ${port}:\n${output}`);
    }
    if (await pingOnce(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on port ${port} within ${readyTimeoutMs} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `redis://127.0.0.1:${port}`, port, stop };
}

async function kill(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** whether a Redis on loopback `port` answers PING now (1 s at most) */
export function pingOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

/** a TCP port free on loopback a moment ago (someone may take it before it is bound: retry on EADDRINUSE) */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
