import * as fs from 'node:fs';
import * as path from 'node:path';

/** The repository root, found from this compiled file's location (dist/test/support → root). */
export const repoRoot: string = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the repository root (package.json) above ' + __dirname);
    dir = up;
  }
  return dir;
})();

/** ../shared/fixtures beside the checkout; tests read fixtures there and never copy them in. */
export const fixturesDir: string = process.env.GW_FIXTURES_DIR ?? path.resolve(repoRoot, '..', 'shared', 'fixtures');

export function fixturePath(rel: string): string {
  const p = path.join(fixturesDir, rel);
  if (!fs.existsSync(p)) {
    throw new Error(`fixture ${rel} not found at ${p}: the shared/ folder must sit beside the checkout (or set GW_FIXTURES_DIR)`);
  }
  return p;
}

const made: string[] = [];

/**
 * A fresh scratch directory under the repo's ignored .test-tmp folder, removed when this process exits (a suite runs
 * a few hundred files: what each left behind would pile up). GW_KEEP_SCRATCH=1 keeps them, to look at after a failure.
 */
export function scratchDir(label: string): string {
  const base = path.join(repoRoot, '.test-tmp');
  fs.mkdirSync(base, { recursive: true });
  const dir = fs.mkdtempSync(path.join(base, label.replace(/[^a-z0-9-]/gi, '_') + '-'));
  if (made.push(dir) === 1 && process.env.GW_KEEP_SCRATCH !== '1') process.on('exit', removeScratch);
  return dir;
}

/** leaves `dir` (made by scratchDir) in place when the process exits: a bench's --keep-dir */
export function keepScratch(dir: string): void {
  const i = made.indexOf(dir);
  if (i >= 0) made.splice(i, 1);
}

function removeScratch(): void {
  for (const dir of made) {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // a child process still writing there as this one exits: what is left stays under .test-tmp
    }
  }
}
