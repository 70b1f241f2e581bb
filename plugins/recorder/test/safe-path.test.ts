import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { scratchDir } from '../../../test/support/paths';
import { decodeStoredPath, reqIdOfPath, resolveStoredFile } from '../src/safe-path';

describe('record file path resolution', () => {
  let base = '';
  let root = '';
  let outside = '';
  const good = '2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv';

  before(() => {
    // base/store is the store root; base/store-evil and base/outside sit beside it.
    base = scratchDir('recorder-safe-path');
    root = path.join(base, 'store');
    outside = path.join(base, 'outside');
    const simDir = path.join(root, '2024', '05', '13800001111');
    fs.mkdirSync(simDir, { recursive: true });
    fs.mkdirSync(outside);
    fs.mkdirSync(path.join(base, 'store-evil'));
    fs.writeFileSync(path.join(simDir, 'H2ssGFUHHchafxX2x1Bniw.flv'), 'FLV inside');
    fs.writeFileSync(path.join(simDir, 'a$b~c.flv'), 'FLV odd chars');
    fs.writeFileSync(path.join(outside, 'secret.flv'), 'SECRET');
    fs.writeFileSync(path.join(base, 'store-evil', 'x.flv'), 'SECRET');
    fs.writeFileSync(path.join(root, 'records.sqlite'), 'catalog');
    // A file symlink inside the store pointing at /etc/passwd.
    fs.symlinkSync('/etc/passwd', path.join(simDir, 'passwd.flv'));
    // A directory symlink inside the store pointing outside it.
    fs.symlinkSync(outside, path.join(root, '2024', '05', 'evil'));
    // A relative symlink whose target shares the root's name as a prefix (store-evil).
    fs.symlinkSync('../../../store-evil/x.flv', path.join(root, '2024', '05', 'prefix.flv'));
    // A symlink that stays inside the store is fine.
    fs.symlinkSync('13800001111/H2ssGFUHHchafxX2x1Bniw.flv', path.join(root, '2024', '05', 'alias.flv'));
    // A directory whose name looks like a record.
    fs.mkdirSync(path.join(simDir, 'dir.flv'));
  });
  after(() => fs.rmSync(base, { recursive: true, force: true }));

  const resolves = async (p: string): Promise<string | null> => resolveStoredFile(root, p);

  it('resolves a stored file to its absolute path', async () => {
    assert.equal(await resolves(good), fs.realpathSync(path.join(root, good)));
    assert.equal(await resolves('2024/05/13800001111/a$b~c.flv'), fs.realpathSync(path.join(root, '2024/05/13800001111/a$b~c.flv')));
    // Percent-encoded ordinary characters are decoded.
    assert.equal(await resolves('2024/05/13800001111/a%24b%7Ec.flv'), fs.realpathSync(path.join(root, '2024/05/13800001111/a$b~c.flv')));
  });

  it('refuses `..` and `.` segments, even ones that would stay inside', async () => {
    for (const p of [
      '../outside/secret.flv',
      '2024/../../outside/secret.flv',
      '2024/05/../05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
      './' + good,
      '2024/05/./13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
      '..',
      '../store/' + good,
    ]) {
      assert.equal(await resolves(p), null, p);
    }
  });

  it('refuses encoded dots, slashes and backslashes in any case, and double encoding', async () => {
    for (const p of [
      '%2e%2e/outside/secret.flv',
      '%2E%2E/outside/secret.flv',
      '.%2e/outside/secret.flv',
      '%2e./outside/secret.flv',
      '..%2foutside%2fsecret.flv',
      '..%2Foutside%2Fsecret.flv',
      '..%5coutside%5csecret.flv',
      '..%5Coutside%5Csecret.flv',
      '%252e%252e/outside/secret.flv',
      '%252E%252E%252Foutside%252Fsecret.flv',
      '..%255coutside%255csecret.flv',
      '2024%2f05%2f13800001111%2fH2ssGFUHHchafxX2x1Bniw.flv',
      '2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw%2eflv',
      '%c0%ae%c0%ae/outside/secret.flv',
      '%zz/secret.flv',
    ]) {
      assert.equal(await resolves(p), null, p);
    }
  });

  it('refuses absolute paths, backslashes and NUL', async () => {
    for (const p of [
      '/etc/passwd',
      path.join(outside, 'secret.flv'),
      path.join(root, good),
      '//etc/passwd.flv',
      '..\\outside\\secret.flv',
      '2024\\05\\13800001111\\H2ssGFUHHchafxX2x1Bniw.flv',
      good + '\0.txt',
      '2024/05/13800001111/H2ssGFUHHchafxX2x1Bniw%00.flv',
      'C:/Windows/win.ini',
    ]) {
      assert.equal(await resolves(p), null, JSON.stringify(p));
    }
  });

  it('refuses a symlink inside the store that points to /etc/passwd', async () => {
    assert.ok(fs.lstatSync(path.join(root, '2024/05/13800001111/passwd.flv')).isSymbolicLink());
    assert.equal(await resolves('2024/05/13800001111/passwd.flv'), null);
  });

  it('refuses a path through a symlinked directory that leaves the store', async () => {
    assert.equal(fs.readFileSync(path.join(root, '2024/05/evil/secret.flv'), 'utf8'), 'SECRET'); // the trap is real
    assert.equal(await resolves('2024/05/evil/secret.flv'), null);
  });

  it("refuses a symlink into a sibling whose name starts with the root's name", async () => {
    assert.equal(fs.readFileSync(path.join(root, '2024/05/prefix.flv'), 'utf8'), 'SECRET');
    assert.equal(await resolves('2024/05/prefix.flv'), null);
  });

  it('follows a symlink that stays inside the store', async () => {
    assert.equal(await resolves('2024/05/alias.flv'), fs.realpathSync(path.join(root, good)));
  });

  it('works when the store root itself is reached through a symlink', async () => {
    const link = path.join(base, 'store-link');
    fs.symlinkSync(root, link);
    assert.equal(await resolveStoredFile(link, good), fs.realpathSync(path.join(root, good)));
    assert.equal(await resolveStoredFile(link, '2024/05/evil/secret.flv'), null);
  });

  it('refuses other extensions (the catalog database), directories, missing files and empty segments', async () => {
    for (const p of [
      'records.sqlite',
      '2024/05/13800001111/dir.flv',
      '2024/05/13800001111/missing.flv',
      '2024//05/13800001111/H2ssGFUHHchafxX2x1Bniw.flv',
      good + '/',
      '',
      '.flv',
      'x'.repeat(2000) + '.flv',
    ]) {
      assert.equal(await resolves(p), null, p.slice(0, 80));
    }
    assert.equal(await resolveStoredFile(path.join(base, 'no-such-root'), good), null);
  });

  it('decodeStoredPath needs no file system and returns the decoded relative path', () => {
    assert.equal(decodeStoredPath('2024/05/1/a%24b.flv'), '2024/05/1/a$b.flv');
    assert.equal(decodeStoredPath('2024/05/1/a.mp4'), null);
    assert.equal(decodeStoredPath('2024/05/1/a.mp4', { extensions: ['mp4'] }), '2024/05/1/a.mp4');
    assert.equal(decodeStoredPath('%2e%2e/x.flv'), null);
  });

  it('reqIdOfPath reads the request id from the file name', () => {
    assert.equal(reqIdOfPath('2024/05/1/H2ssGFUHHchafxX2x1Bniw.flv'), 'H2ssGFUHHchafxX2x1Bniw');
    assert.equal(reqIdOfPath('2024/05/1/a.b.flv'), 'a.b');
    assert.equal(reqIdOfPath('noext'), null);
  });
});
