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

/** A fresh scratch directory under the repo's ignored .test-tmp folder. */
export function scratchDir(label: string): string {
  const base = path.join(repoRoot, '.test-tmp');
  fs.mkdirSync(base, { recursive: true });
  return fs.mkdtempSync(path.join(base, label.replace(/[^a-z0-9-]/gi, '_') + '-'));
}
