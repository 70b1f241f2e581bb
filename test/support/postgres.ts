/**
 * A throwaway PostgreSQL server for tests: a fresh cluster in a scratch directory, listening on a free
 * loopback port and a private unix socket directory, removed again by stop(). Uses Debian's postgresql
 * package (initdb and pg_ctl live under /usr/lib/postgresql/<version>/bin, not on PATH). PostgreSQL
 * refuses to run as root, so as root the cluster belongs to the `postgres` user and is run through runuser.
 */
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { scratchDir } from './paths';

const run = promisify(execFile);

export interface PostgresServer {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` (trust authentication; loopback only) */
  connectionString: string;
  host: string;
  port: number;
  /** Connection string for another database on the same server. */
  urlFor(database: string): string;
  /** Stops the server and removes its directory; safe to call twice. */
  stop(): Promise<void>;
}

function findPgBin(name: string): string {
  const base = '/usr/lib/postgresql';
  const dirs: string[] = [];
  if (fs.existsSync(base)) {
    // Newest major version first.
    for (const v of fs.readdirSync(base).sort((x, y) => Number(y) - Number(x))) dirs.push(path.join(base, v, 'bin'));
  }
  for (const d of (process.env.PATH ?? '').split(path.delimiter)) if (d) dirs.push(d);
  for (const d of dirs) {
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  throw new Error(
    `PostgreSQL's '${name}' was not found (looked in /usr/lib/postgresql/*/bin and PATH): install Debian's 'postgresql' package (apt-get install -y postgresql); .ci/run does this`,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

interface RunAs {
  argv(cmd: string, args: string[]): [string, string[]];
  uid?: number;
  gid?: number;
}

async function runAsFor(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return { argv: (cmd, args) => [cmd, args] };
  let ids: { uid: number; gid: number };
  try {
    const [u, g] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    ids = { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
  } catch {
    throw new Error("running as root, but there is no 'postgres' user to run PostgreSQL as: install Debian's 'postgresql' package (it creates the user)");
  }
  return { argv: (cmd, args) => ['runuser', ['-u', 'postgres', '--', cmd, ...args]], ...ids };
}

function tail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '(no log)';
  }
}

export async function startPostgres(label = 'pg'): Promise<PostgresServer> {
  const initdb = findPgBin('initdb');
  const pgCtl = findPgBin('pg_ctl');
  const as = await runAsFor();

  const dir = scratchDir(label);
  const dataDir = path.join(dir, 'data');
  const sockDir = path.join(dir, 'sock');
  const logFile = path.join(dir, 'server.log');
  fs.mkdirSync(sockDir);
  if (as.uid !== undefined) {
    // The postgres user must reach the scratch dir through its root-owned parents and own what is inside.
    fs.chmodSync(dir, 0o755);
    fs.chownSync(dir, as.uid, as.gid!);
    fs.chownSync(sockDir, as.uid, as.gid!);
  }
  const exec = async (cmd: string, args: string[], what: string): Promise<void> => {
    const [c, a] = as.argv(cmd, args);
    try {
      await run(c, a, { cwd: dir, timeout: 60_000, env: { ...process.env, LC_ALL: 'C' } });
    } catch (err) {
      const e = err as Error & { stderr?: string; stdout?: string };
      throw new Error(`${what} failed: ${e.message}\n${e.stderr ?? ''}\nserver log:\n${tail(logFile)}`, { cause: err });
    }
  };
  const removeDir = (): void => fs.rmSync(dir, { recursive: true, force: true });

  try {
    await exec(initdb, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-locale', '--no-sync'], 'initdb');
  } catch (err) {
    removeDir();
    throw err;
  }

  // Another process can take the port between freePort() and the server's bind; retry a few times.
  let port = 0;
  let started = false;
  let lastErr: unknown;
  for (let attempt = 0; attempt < 3 && !started; attempt++) {
    port = await freePort();
    const serverOpts = [
      '-c listen_addresses=127.0.0.1',
      `-p ${port}`,
      `-k ${sockDir}`,
      // Durability is pointless for a throwaway cluster and costs seconds per test.
      '-c fsync=off',
      '-c synchronous_commit=off',
      '-c full_page_writes=off',
      '-c shared_buffers=32MB',
      '-c max_connections=40',
    ].join(' ');
    try {
      await exec(pgCtl, ['-D', dataDir, '-l', logFile, '-o', serverOpts, '-w', '-t', '30', 'start'], 'pg_ctl start');
      started = true;
    } catch (err) {
      lastErr = err;
    }
  }
  if (!started) {
    removeDir();
    throw lastErr;
  }

  let stopped = false;
  // If the test run dies without calling stop(), do not leave a server running in the background.
  const onExit = (): void => {
    const [c, a] = as.argv(pgCtl, ['-D', dataDir, '-m', 'immediate', 'stop']);
    spawnSync(c, a, { cwd: dir, stdio: 'ignore', timeout: 10_000 });
    removeDir();
  };
  process.once('exit', onExit);
  const host = '127.0.0.1';
  const urlFor = (db: string): string => `postgresql://postgres@${host}:${port}/${encodeURIComponent(db)}`;
  return {
    connectionString: urlFor('postgres'),
    host,
    port,
    urlFor,
    async stop() {
      if (stopped) return;
      stopped = true;
      process.removeListener('exit', onExit);
      try {
        await exec(pgCtl, ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop'], 'pg_ctl stop');
      } finally {
        removeDir();
      }
    },
  };
}
