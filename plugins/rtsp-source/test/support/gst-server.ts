/** GStreamer's RTSP server (support/gst-rtsp-server.py under Debian's python3-gi) as a camera we did not write. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const PYTHON = '/usr/bin/python3';
const PACKAGES = 'python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly gstreamer1.0-plugins-bad';

/** fails saying what to install when Debian's GStreamer RTSP server (or an element the script uses) is missing */
export function requireGstRtspServer(): void {
  const check =
    "import gi; gi.require_version('Gst','1.0'); gi.require_version('GstRtspServer','1.0'); from gi.repository import Gst, GstRtspServer; Gst.init(None); " +
    "missing=[e for e in ['x264enc','x265enc','rtph264pay','rtph265pay','voaacenc','rtpmp4gpay','alawenc','rtppcmapay','videotestsrc','audiotestsrc'] if Gst.ElementFactory.find(e) is None]; " +
    "print(' '.join(missing))";
  const r = fs.existsSync(PYTHON) ? spawnSync(PYTHON, ['-c', check], { encoding: 'utf8', timeout: 30_000 }) : undefined;
  if (!r || r.status !== 0 || r.stdout.trim() !== '') {
    throw new Error(
      `GStreamer's RTSP server is missing (${r ? r.stdout.trim() || r.stderr.trim().split('\n').pop() : `no ${PYTHON}`}): apt-get install -y ${PACKAGES}; test/support/install-tools.sh does this`,
    );
  }
}

export interface GstServer {
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** starts the server; resolves with its port once it prints READY */
export function startGstServer(args: { video: 'h264' | 'h265'; audio: 'aac' | 'pcma' | 'none'; user?: string; pwd?: string }): Promise<GstServer> {
  requireGstRtspServer();
  // the script sits beside this file's source; the compiled test runs from dist/
  const script = path.resolve(__dirname, '../../../../../plugins/rtsp-source/test/support/gst-rtsp-server.py');
  const argv = [script, '--video', args.video, '--audio', args.audio, ...(args.user ? ['--user', args.user, '--pwd', args.pwd ?? ''] : [])];
  const proc = spawn(PYTHON, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const t = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`GStreamer RTSP server did not start: ${err}`));
    }, 30_000);
    proc.stderr.on('data', (c: Buffer) => {
      if (err.length < 4000) err += c.toString();
    });
    proc.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({
          port: Number(m[1]),
          proc,
          async stop() {
            if (proc.exitCode === null) proc.kill('SIGKILL');
            await exited;
          },
        });
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`GStreamer RTSP server exited ${code}: ${err}`));
    });
  });
}
