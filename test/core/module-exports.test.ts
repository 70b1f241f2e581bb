import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot, scratchDir } from '../support/paths';

/**
 * TypeScript compiles `export { x } from './y'` (and re-exporting an import) into `exports.x = void 0` followed by
 * `Object.defineProperty(exports, 'x', { get })`. Turning a data property into an accessor puts the exports object
 * in dictionary mode, and from then on every `module_1.NAME` read of that module, by its importers and by its own
 * code (`exports.NAME`), is a hash lookup the optimizing compiler cannot inline: ~10 ns instead of ~1. One helper
 * re-exported by packet.ts costs each of the ~60,000 packets a second at 450 terminals that several times (parser,
 * reassembler, route). A module that defines things therefore does not re-export; a barrel (index.js, or a file of
 * re-exports only) may, and the media path imports from the defining module instead.
 */
const CHILD = String.raw`
const fs = require('node:fs'), path = require('node:path');
const roots = JSON.parse(process.argv[1]);
const skip = new Set(JSON.parse(process.argv[2]));
const isFast = new Function('o', 'return %HasFastProperties(o)');
function walk(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) { if (!['test', 'tools', 'node_modules'].includes(e.name)) walk(p, out); }
    else if (p.endsWith('.js') && !p.endsWith('.test.js') && !skip.has(p)) out.push(p);
  }
  return out;
}
const report = { checked: 0, mixed: [], entryPoints: [] };
for (const file of roots.flatMap((r) => walk(r, []))) {
  let m;
  try { m = require(file); } catch (e) { report.entryPoints.push(file + ': ' + e.message); continue; }
  report.checked++;
  if (isFast(m) || path.basename(file) === 'index.js') continue;
  const own = Object.keys(m).filter((k) => 'value' in Object.getOwnPropertyDescriptor(m, k));
  const reexported = Object.keys(m).filter((k) => !own.includes(k));
  if (own.length > 0) report.mixed.push({ file, own: own.length, reexported });
}
process.stdout.write(JSON.stringify(report));
`;

interface ExportsReport {
  checked: number;
  mixed: { file: string; own: number; reexported: string[] }[];
  /** worker-thread and child-process scripts, which refuse to load elsewhere (nothing imports them) */
  entryPoints: string[];
}

function check(roots: string[], skip: string[] = []): ExportsReport {
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', CHILD, JSON.stringify(roots), JSON.stringify(skip)], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd: repoRoot,
  });
  assert.equal(r.status, 0, `the exports check failed to run: ${r.stderr}`);
  const json = r.stdout.slice(r.stdout.lastIndexOf('{"checked"'));
  return JSON.parse(json);
}

describe('module exports stay in fast mode (no hash lookup for a module_1.NAME read)', () => {
  it("no module that defines its own exports re-exports another module's", () => {
    const dist = path.join(repoRoot, 'dist');
    const report = check(
      ['core', 'plugins', 'plugin-sdk'].map((d) => path.join(dist, d)),
      [path.join(dist, 'core', 'main.js')],
    );
    assert.ok(report.checked > 100, `only ${report.checked} modules found under dist/: is the build there?`);
    for (const e of report.entryPoints) assert.match(e, /runs in a worker thread/, 'a module failed to load');
    assert.deepEqual(
      report.mixed.map((m) => `${path.relative(repoRoot, m.file)} re-exports ${m.reexported.join(', ')}`),
      [],
      'import these from the module that defines them, and drop the re-export',
    );
  });

  it('the check sees a module compiled the way TypeScript compiles a re-export', () => {
    const dir = scratchDir('exports-check');
    fs.writeFileSync(path.join(dir, 'defines.js'), 'exports.helper = () => 1;\n');
    // what tsc emits for `export { helper } from './defines'; export const A = { X: 1 };`
    fs.writeFileSync(
      path.join(dir, 'mixed.js'),
      [
        '"use strict";',
        'Object.defineProperty(exports, "__esModule", { value: true });',
        'exports.A = exports.helper = void 0;',
        'var defines_1 = require("./defines");',
        'Object.defineProperty(exports, "helper", { enumerable: true, get: function () { return defines_1.helper; } });',
        'exports.A = { X: 1 };',
        '',
      ].join('\n'),
    );
    const report = check([dir]);
    assert.equal(report.checked, 2);
    assert.deepEqual(
      report.mixed.map((m) => [path.basename(m.file), m.own, m.reexported]),
      [['mixed.js', 1, ['helper']]],
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the SDK's entry points, which plugins read on the media path, keep fast properties", () => {
    const entries = ['plugin-sdk', 'plugin-sdk/formats', 'plugin-sdk/codecs', 'plugin-sdk/rtsp', 'plugin-sdk/rtp', 'plugin-sdk/worker', 'plugin-sdk/router'];
    const code = `require('reflect-metadata');
      const out = {};
      for (const e of ${JSON.stringify(entries)}) {
        const m = require(require('node:path').join(${JSON.stringify(path.join(repoRoot, 'dist'))}, e));
        out[e] = { fast: %HasFastProperties(m), names: Object.keys(m).length, esModule: m.__esModule === true };
      }
      process.stdout.write(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', code], { encoding: 'utf8', timeout: 60_000, cwd: repoRoot });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, { fast: boolean; names: number; esModule: boolean }>;
    for (const e of entries) {
      assert.ok(out[e].names >= 2, `${e} exports only ${out[e].names} names`);
      assert.ok(out[e].esModule, `${e} lost its __esModule marker (default imports would break)`);
      assert.ok(out[e].fast, `${e}'s exports object is a dictionary: end the barrel with \`module.exports = { __esModule: true, ...module.exports }\``);
    }
  });
});
