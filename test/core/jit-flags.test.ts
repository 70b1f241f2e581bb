/**
 * gateway.wideInlining sets V8's inlining budgets while the process runs (v8.setFlagsFromString), which only helps if
 * TurboFan reads them at each compilation rather than once at start. So: a child process compiles a caller of a
 * callee of ~600 bytes of bytecode (past V8's own 460, inside the gateway's 920), once as V8 starts and once after
 * setWideInlining(); V8's inlining trace must say the callee was inlined only in the second.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../support/paths';

const FLAGS = path.join(repoRoot, 'dist', 'core', 'jit-flags.js');

const CHILD = `
if (process.argv[1] === 'wide') require(${JSON.stringify(FLAGS)}).setWideInlining();
let body = 'let s = x;';
for (let i = 0; i < 60; i++) body += 's = (s * ' + (i + 3) + ' + ' + i + ') | 0;';
const callee = new Function('x', body + 'return s;');
function caller(n) {
  let t = 0;
  for (let i = 0; i < n; i++) t = (t + callee(i)) | 0;
  return t;
}
%PrepareFunctionForOptimization(caller);
caller(10);
caller(10);
%OptimizeFunctionOnNextCall(caller);
caller(10);
`;

function inlinedIntoCaller(mode: 'own' | 'wide'): boolean {
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--trace-turbo-inlining', '-e', CHILD, mode], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return /^Inlining .* into .*caller>/m.test(r.stdout);
}

describe('jit-flags: the inlining budgets set at run time', function () {
  this.timeout(60_000);

  it("take effect: a callee past V8's own budget is inlined only after setWideInlining", () => {
    assert.equal(inlinedIntoCaller('own'), false, "V8's own budget inlined it: the test's callee is too small to tell");
    assert.equal(inlinedIntoCaller('wide'), true);
  });
});
