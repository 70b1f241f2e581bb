import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createKeyv, type Keyv } from '../../../test/support/core-parts';
import { scratchDir } from '../../../test/support/paths';
import { TimedTokenStore, type TimedToken } from '../src/token-store';

const NOW = new Date('2025-06-01T12:00:00Z');
const later = (h: number) => new Date(NOW.getTime() + h * 3600_000);

describe('gov-timed-token: TimedTokenStore', () => {
  const open: Keyv[] = [];
  let file: string;
  const kv = () => {
    const k = createKeyv({ kind: 'sqlite', file }, 'gov-timed-token');
    open.push(k);
    return k;
  };
  beforeEach(() => {
    file = path.join(scratchDir('gov-token'), 'state.sqlite');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((k) => k.disconnect()));
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  });

  const OLD: TimedToken = { token: 'old-Token-1', expiredAt: later(1) };
  const NEW: TimedToken = { token: 'new-Token-2', expiredAt: later(24) };

  it('answers missing, invalid or ok for one token, the old-and-new pair of a rotation, and expired tokens', async () => {
    const s = await TimedTokenStore.open(kv(), [OLD, NEW]);
    assert.equal(s.check(undefined, NOW), 'missing');
    assert.equal(s.check('', NOW), 'missing');
    assert.equal(s.check(' , ', NOW), 'missing');
    assert.equal(s.check('wrong', NOW), 'invalid');
    assert.equal(s.check('old-Token-', NOW), 'invalid', 'a prefix is not a match');
    assert.equal(s.check('old-token-1', NOW), 'invalid', 'tokens are case-sensitive');
    assert.equal(s.check('old-Token-1', NOW), 'ok');
    assert.equal(s.check('new-Token-2', NOW), 'ok');
    assert.equal(s.check('new-Token-2,old-Token-1', NOW), 'ok');
    assert.equal(s.check('new-Token-2, wrong', NOW), 'ok', 'one good token of the pair is enough');
    assert.equal(s.check('wrong,old-Token-1', NOW), 'ok');
    assert.equal(s.check('wrong1,wrong2', NOW), 'invalid');
    assert.equal(s.check('new-Token-2,old-Token-1,x', NOW), 'invalid', 'at most two tokens');
    // OLD expires an hour after NOW: from then on only NEW passes.
    assert.equal(s.check('old-Token-1', later(1)), 'invalid');
    assert.equal(s.check('old-Token-1', later(2)), 'invalid');
    assert.equal(s.check('old-Token-1,new-Token-2', later(2)), 'ok');
    assert.equal(s.check('new-Token-2', later(24)), 'invalid');
  });

  it('setTokens replaces the whole set, and the set survives a restart', async () => {
    const s = await TimedTokenStore.open(kv(), [OLD]);
    await s.setTokens([NEW]);
    assert.equal(s.check('old-Token-1', NOW), 'invalid');
    assert.equal(s.check('new-Token-2', NOW), 'ok');
    await open[0].disconnect();

    // A restart with the same config keeps what the admin set.
    const again = await TimedTokenStore.open(kv(), [OLD]);
    assert.equal(again.check('new-Token-2', NOW), 'ok');
    assert.equal(again.check('old-Token-1', NOW), 'invalid');
    assert.deepEqual(
      again.list().map((t) => t.expiredAt.toISOString()),
      [NEW.expiredAt.toISOString()],
    );

    // A restart without config tokens keeps it too.
    const noConfig = await TimedTokenStore.open(kv(), []);
    assert.equal(noConfig.check('new-Token-2', NOW), 'ok');
  });

  it('a changed config replaces what was set before', async () => {
    const s = await TimedTokenStore.open(kv(), [OLD]);
    await s.setTokens([NEW]);
    const third: TimedToken = { token: 'third-3', expiredAt: later(48) };
    const reconfigured = await TimedTokenStore.open(kv(), [third]);
    assert.equal(reconfigured.check('third-3', NOW), 'ok');
    assert.equal(reconfigured.check('new-Token-2', NOW), 'invalid');
  });

  it('persists digests, never the tokens themselves', async () => {
    const s = await TimedTokenStore.open(kv(), [OLD]);
    await s.setTokens([NEW]);
    await Promise.all(open.splice(0).map((k) => k.disconnect()));
    const bytes = fs.readFileSync(file).toString('latin1') + (fs.existsSync(file + '-wal') ? fs.readFileSync(file + '-wal').toString('latin1') : '');
    assert.ok(bytes.includes('expiredAt'), 'the record is in the file');
    assert.ok(!bytes.includes('new-Token-2') && !bytes.includes('old-Token-1'));
  });

  it('starts empty without config (every token invalid) and refuses malformed tokens', async () => {
    const s = await TimedTokenStore.open(createKeyv({ kind: 'memory' }, 'g'));
    assert.equal(s.check('anything', NOW), 'invalid');
    await assert.rejects(s.setTokens([{ token: '', expiredAt: NOW }]), /token 0: token must be a non-empty string/);
    await assert.rejects(s.setTokens([{ token: 'x', expiredAt: new Date('nope') }]), /token 0: expiredAt must be a valid Date/);
  });

  it('refuses to start on an unreadable stored record rather than guessing', async () => {
    const k = createKeyv({ kind: 'memory' }, 'g');
    await k.set('tokens', { something: 'else' });
    await assert.rejects(TimedTokenStore.open(k), /unreadable record under 'tokens'/);
  });
});
