import { spawnSync } from 'node:child_process';

const found = new Map<string, string>();

/**
 * Path of an external tool the tests need (ffprobe, ffmpeg, redis-server, pg_ctl ...).
 * .ci/run installs them; when one is missing the test fails saying which and how to get it, never skips.
 */
export function requireTool(name: string, debianPackage: string): string {
  const cached = found.get(name);
  if (cached) return cached;
  const extraDirs = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];
  const r = spawnSync('sh', ['-c', `command -v ${name} || for d in ${extraDirs.join(' ')}; do [ -x "$d/${name}" ] && echo "$d/${name}" && break; done`], {
    encoding: 'utf8',
  });
  const p = r.stdout.trim().split('\n')[0];
  if (!p) {
    throw new Error(`test tool '${name}' is missing: install Debian's '${debianPackage}' package (apt-get install -y ${debianPackage}); .ci/run does this`);
  }
  found.set(name, p);
  return p;
}
