import * as fs from 'node:fs';
import * as path from 'node:path';

/** The folder of the gateway's package.json (site names resolve under its sites/); the working directory when none is found. */
export const repoRoot: string = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) return process.cwd();
    dir = up;
  }
  return dir;
})();
