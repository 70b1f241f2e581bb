/**
 * The unit tier's promise, checked: its tests run with Node and the npm dependencies only. Once installed, every
 * child_process call that would run one of the system programs the full tier installs (ffmpeg, Redis, PostgreSQL,
 * Chromium, VLC, GStreamer, openssl) throws, naming the program and the tier its test belongs in; a connection to a
 * Redis or PostgreSQL server's well-known address throws the same way. Node itself (fork, process.execPath) and
 * loopback sockets to our own servers pass.
 *
 * Only node: builtins are imported here, so a child Node process can load the guard through NODE_OPTIONS.
 */
// the module objects themselves (an import * copy has getters only), since the guard replaces their functions
import childProcess = require('node:child_process');
import net = require('node:net');
import * as path from 'node:path';

/** Program names (an executable's base name) and the system package each belongs to. */
export const SYSTEM_PROGRAMS: ReadonlyMap<string, string> = new Map<string, string>([
  ...['ffmpeg', 'ffprobe', 'ffplay'].map((p): [string, string] => [p, 'ffmpeg']),
  ...['redis-server', 'redis-cli', 'redis-sentinel'].map((p): [string, string] => [p, 'Redis']),
  ...['postgres', 'postmaster', 'initdb', 'pg_ctl', 'pg_ctlcluster', 'psql', 'pg_isready'].map((p): [string, string] => [p, 'PostgreSQL']),
  ...['chromium', 'chromium-browser', 'chrome', 'google-chrome', 'headless_shell'].map((p): [string, string] => [p, 'Chromium']),
  ...['vlc', 'cvlc'].map((p): [string, string] => [p, 'VLC']),
  ...['gst-launch-1.0', 'gst-inspect-1.0', 'python3', 'python'].map((p): [string, string] => [
    p,
    'GStreamer (with the python3-gi that drives its RTSP server)',
  ]),
  ['openssl', 'openssl'],
]);

/** Redis, Redis Sentinel and PostgreSQL default ports: a unit test never reaches a server there. */
const SERVER_PORTS: ReadonlyMap<number, string> = new Map([
  [6379, 'Redis'],
  [26379, 'Redis Sentinel'],
  [5432, 'PostgreSQL'],
]);

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh']);

const WHERE =
  "the unit tier (npm run test:unit) runs with Node and the npm dependencies only; a test that needs it belongs in the full tier (npm test), so take it out of .mocharc.unit.json's spec list";

/** Refusals not yet taken: a test that catches one and carries on still fails the run (see test/unit-setup.ts). */
const refusals: string[] = [];

/** The refusals recorded since the last call, which are then forgotten (unit-setup's hooks take them after each test). */
export function takeRefusals(): string[] {
  return refusals.splice(0);
}

function programIn(word: string): string | undefined {
  const base = path.basename(word.replace(/^['"]+|['"]+$/g, ''));
  return SYSTEM_PROGRAMS.has(base) ? base : undefined;
}

/**
 * The system program a command would run, or undefined: the file itself, an argument that names one (runuser, env
 * and timeout pass it on), and with a shell every word of its command line.
 */
export function systemProgramIn(file: string, args: readonly string[] = [], shell = false): string | undefined {
  const words = [file, ...args];
  if (shell || SHELLS.has(path.basename(file))) words.push(...words.join(' ').split(/[\s;&|()`$<>=]+/));
  for (const w of words) {
    const p = programIn(w);
    if (p) return p;
  }
  return undefined;
}

function refuse(what: string, detail: string): never {
  const message = `unit tier: a test tried to ${what}: ${detail}; ${WHERE}`;
  refusals.push(message);
  process.stderr.write(message + '\n');
  throw new Error(message);
}

function checkCommand(file: unknown, args: unknown, shell: unknown): void {
  if (typeof file !== 'string') return;
  const list = Array.isArray(args) ? args.map(String) : [];
  const program = systemProgramIn(file, list, shell === true || (typeof shell === 'string' && shell !== ''));
  if (program) refuse(`run ${program}, from the ${SYSTEM_PROGRAMS.get(program)} system package`, `"${[file, ...list].join(' ').slice(0, 200)}"`);
}

/** spawnSync's and execFileSync's (file, args?, options?): the args may be left out. */
function commandOf(rest: unknown[]): { args: unknown; shell: unknown } {
  const [first, second] = rest;
  const options = (Array.isArray(first) ? second : first) as { shell?: unknown } | null | undefined;
  return { args: Array.isArray(first) ? first : [], shell: options?.shell };
}

function connectTarget(args: unknown[]): { port?: number; path?: string } {
  let a: unknown = args[0];
  // net.connect() hands Socket#connect its normalized [options, callback] pair
  if (Array.isArray(a)) a = a[0];
  if (typeof a === 'object' && a !== null) {
    const o = a as { port?: unknown; path?: unknown };
    if (typeof o.path === 'string') return { path: o.path };
    return o.port === undefined ? {} : { port: Number(o.port) };
  }
  if (typeof a === 'number' || (typeof a === 'string' && /^\d+$/.test(a))) return { port: Number(a) };
  return typeof a === 'string' ? { path: a } : {};
}

let installed = false;

/**
 * Installs the guard in this process (idempotent), and puts `preload` (a file that installs it) in NODE_OPTIONS, so
 * the Node processes a test starts are guarded too.
 */
export function installUnitTierGuard(preload?: string): void {
  if (!installed) {
    installed = true;
    // the asynchronous forms (spawn, exec, execFile, fork, and promisify of them) all end in ChildProcess#spawn,
    // with the final file and argv (argv[0] first, and a shell's command line after its -c)
    const proto = childProcess.ChildProcess.prototype as unknown as { spawn(o: { file?: string; args?: string[] }): unknown };
    // eslint-disable-next-line @typescript-eslint/unbound-method -- the original, called back with its own `this` below
    const cpSpawn = proto.spawn;
    proto.spawn = function guardedSpawn(this: unknown, options) {
      checkCommand(options.file, options.args?.slice(1) ?? [], false);
      return cpSpawn.call(this, options);
    };
    // the synchronous forms do not make a ChildProcess, and call the builtin's own copies, so each is wrapped
    const cp = childProcess as unknown as Record<'spawnSync' | 'execFileSync' | 'execSync', (...a: unknown[]) => unknown>;
    const { spawnSync, execFileSync, execSync } = cp;
    cp.spawnSync = (file: unknown, ...rest: unknown[]) => {
      const c = commandOf(rest);
      checkCommand(file, c.args, c.shell);
      return spawnSync(file, ...rest);
    };
    cp.execFileSync = (file: unknown, ...rest: unknown[]) => {
      const c = commandOf(rest);
      checkCommand(file, c.args, c.shell);
      return execFileSync(file, ...rest);
    };
    cp.execSync = (command: unknown, ...rest: unknown[]) => {
      checkCommand(command, [], true);
      return execSync(command, ...rest);
    };

    // eslint-disable-next-line @typescript-eslint/unbound-method -- the original, called back with its own `this` below
    const connect = net.Socket.prototype.connect as (...a: unknown[]) => net.Socket;
    net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: unknown[]) {
      const t = connectTarget(args);
      const server = t.port !== undefined ? SERVER_PORTS.get(t.port) : t.path !== undefined && /\.s\.PGSQL\.\d+$/.test(t.path) ? 'PostgreSQL' : undefined;
      if (server) refuse(`reach a ${server} server`, t.path ?? `port ${t.port}`);
      return connect.apply(this, args);
    } as typeof net.Socket.prototype.connect;
  }
  if (preload) {
    const opts = process.env.NODE_OPTIONS ?? '';
    if (!opts.includes(preload)) process.env.NODE_OPTIONS = `${opts} --require ${JSON.stringify(preload)}`.trim();
  }
}
