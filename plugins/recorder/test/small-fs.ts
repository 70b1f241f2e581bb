/**
 * A real file system small enough to fill in a test: a tmpfs (or, where tmpfs cannot be mounted, an ext2 image on
 * a loop device) mounted over a folder. Mounting needs root, which CI has; without it these tests fail saying so,
 * they never skip, since a disk-full path that is not exercised is the one that takes a gateway down.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface SmallFs {
  readonly dir: string;
  readonly kind: 'tmpfs' | 'loop';
  /** bytes an unprivileged writer can still put there */
  free(): number;
  /**
   * Fills the file system with a ballast file (outside any folder the gateway uses) until at most `leaveBytes`
   * stay free; returns the ballast's size.
   */
  fill(leaveBytes?: number): number;
  /** Removes the ballast: space comes back. */
  unfill(): void;
  unmount(): void;
}

function run(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) return r.error.message;
  return r.status === 0 ? undefined : `${cmd} ${args.join(' ')}: exit ${r.status}: ${(r.stderr || r.stdout).trim()}`;
}

export function mountSmallFs(dir: string, bytes: number): SmallFs {
  fs.mkdirSync(dir, { recursive: true });
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    throw new Error(
      `a full-disk test needs a small file system it can fill, and mounting one needs root: run the tests as root (CI does), uid is ${process.getuid()}`,
    );
  }
  let kind: SmallFs['kind'] = 'tmpfs';
  // GW_TEST_SMALL_FS=loop tries the fallback where tmpfs would work, to keep it working
  const tmpfsErr =
    process.env.GW_TEST_SMALL_FS === 'loop'
      ? 'not tried (GW_TEST_SMALL_FS=loop)'
      : run('mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0755`, 'tmpfs', dir]);
  let image: string | undefined;
  if (tmpfsErr) {
    kind = 'loop';
    image = `${dir}.img`;
    fs.writeFileSync(image, '');
    fs.truncateSync(image, bytes);
    // 4 KiB blocks: SQLite allocates its -shm file by writing one byte per 4 KiB page, so with smaller blocks the
    // rest of each page stays a hole, and filling that hole through mmap on a full disk kills the process (SIGBUS)
    const loopErr = run('mkfs.ext2', ['-q', '-F', '-b', '4096', '-m', '0', image]) ?? run('mount', ['-o', 'loop', image, dir]);
    if (loopErr) {
      fs.rmSync(image, { force: true });
      throw new Error(`cannot mount a small file system at ${dir}: tmpfs: ${tmpfsErr}; loop-mounted ext2: ${loopErr}`);
    }
  }
  const ballast = path.join(dir, 'ballast.bin');
  const free = (): number => {
    const st = fs.statfsSync(dir);
    return st.bavail * st.bsize;
  };
  return {
    dir,
    kind,
    free,
    fill(leaveBytes = 0) {
      const fd = fs.openSync(ballast, 'a');
      const chunk = Buffer.alloc(64 * 1024, 0x5a);
      try {
        for (;;) {
          try {
            fs.writeSync(fd, chunk);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
            // the last chunk may not have fit whole: fill the remainder block by block
            const block = Buffer.alloc(fs.statfsSync(dir).bsize, 0x5a);
            for (;;) {
              try {
                fs.writeSync(fd, block);
              } catch (e) {
                if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
                break;
              }
            }
            break;
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      if (leaveBytes > 0) {
        const size = fs.statSync(ballast).size;
        fs.truncateSync(ballast, Math.max(0, size - leaveBytes));
      }
      return fs.statSync(ballast).size;
    },
    unfill() {
      fs.rmSync(ballast, { force: true });
    },
    unmount() {
      // a lazy unmount as the last resort: a descriptor left open by a failed test must not fail the next run
      if (run('umount', [dir])) run('umount', ['-l', dir]);
      if (image) fs.rmSync(image, { force: true });
    },
  };
}
