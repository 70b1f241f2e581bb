/**
 * VLC (Debian's `vlc-bin` + `vlc-plugin-base`) as an independent client or server in tests.
 *
 * VLC refuses to run as root ("VLC is not supposed to be run as root. Sorry."), and CI runs the tests as root: there
 * `cvlc` is started through util-linux's `setpriv` as nobody (uid/gid 65534, no supplementary groups), with HOME in a
 * scratch directory owned by nobody, where everything VLC reads or writes for the test goes. As any other user it
 * runs as that user. Debian's VLC is built with `--disable-live555`: it has no RTSP client (only SAT>IP's and
 * RealServer's, which fail against any other server), but its own RTSP server (`#rtp{sdp=rtsp://…}`) and its own
 * RTP input (`rtp://@host:port`, static payload types: PCMA, PCMU …).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { requireTool } from './tools';

export const VLC_PACKAGES = 'vlc-bin vlc-plugin-base';
const NOBODY = 65534;

const asRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

/** cvlc's path; fails saying what to install when it is missing */
export function requireVlc(): string {
  let cvlc: string;
  try {
    cvlc = requireTool('cvlc', VLC_PACKAGES);
  } catch {
    throw new Error(`VLC is missing: apt-get install -y --no-install-recommends ${VLC_PACKAGES} (test/support/install-tools.sh does this)`);
  }
  // vlc-bin alone has no modules: the RTP output (and RTSP server), RTP input and transcoder are vlc-plugin-base's
  if (!pluginsChecked) {
    const r = spawnSync(
      'sh',
      [
        '-c',
        'ls /usr/lib/*/vlc/plugins/stream_out/libstream_out_rtp_plugin.so /usr/lib/*/vlc/plugins/access/librtp_plugin.so /usr/lib/*/vlc/plugins/stream_out/libstream_out_transcode_plugin.so',
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0)
      throw new Error(
        `VLC's modules are missing (${r.stderr.trim()}): apt-get install -y --no-install-recommends ${VLC_PACKAGES} (test/support/install-tools.sh does this)`,
      );
    pluginsChecked = true;
  }
  return cvlc;
}
let pluginsChecked = false;

/**
 * A scratch directory VLC's user can write (and the test can read and remove): under the system temp folder, owned
 * by nobody when the tests run as root.
 */
export function vlcDir(label: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `vlc-${label}-`));
  fs.chmodSync(dir, 0o755);
  if (asRoot()) fs.chownSync(dir, NOBODY, NOBODY);
  return dir;
}

/** copies a file into a VLC directory, readable by VLC's user */
export function giveToVlc(dir: string, file: string, name = path.basename(file)): string {
  const dst = path.join(dir, name);
  fs.copyFileSync(file, dst);
  fs.chmodSync(dst, 0o644);
  return dst;
}

export interface Vlc {
  proc: ChildProcess;
  /** what VLC wrote to stderr (its log, `-vv` when asked) */
  log(): string;
  /** resolves with the exit code once VLC has exited */
  exited: Promise<number | null>;
  /** SIGTERM (VLC closes its outputs and quits), SIGKILL after 5 s; resolves once it has exited */
  stop(): Promise<void>;
}

/**
 * Starts `cvlc` (dummy interface) with `args`, working in `dir` (its HOME too). Started VLCs are remembered so that
 * `stopAllVlc()` in an after hook ends any a failed test left behind.
 */
export function startVlc(dir: string, args: string[]): Vlc {
  const cvlc = requireVlc();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, '.config'),
    XDG_DATA_HOME: path.join(dir, '.local'),
    XDG_CACHE_HOME: path.join(dir, '.cache'),
    LANG: 'C',
  };
  const argv = ['--no-media-library', '--no-stats', '--no-dbus', ...args];
  const proc = asRoot()
    ? spawn('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', cvlc, ...argv], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] })
    : spawn(cvlc, argv, { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (err.length < 4 << 20) err += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => {
    proc.once('error', (e) => {
      err += `\nspawn failed: ${e.message}`;
      resolve(null);
    });
    proc.once('exit', (code) => resolve(code));
  });
  const vlc: Vlc = {
    proc,
    log: () => err,
    exited,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null && proc.pid !== undefined) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
        }, 5000);
        await exited;
        clearTimeout(t);
      }
      running.delete(vlc);
    },
  };
  running.add(vlc);
  void exited.then(() => running.delete(vlc));
  return vlc;
}

const running = new Set<Vlc>();

/** ends every VLC this process started and has not seen exit */
export async function stopAllVlc(): Promise<void> {
  await Promise.all([...running].map((v) => v.stop()));
}
