import assert from 'node:assert/strict';
import { parseExpiredAt, parseTimedTokenBody } from '../src/timed-token-body';

function badField(body: unknown): string {
  const r = parseTimedTokenBody(body);
  if (r.ok) assert.fail(`expected ${JSON.stringify(body)} to be refused`);
  assert.equal(r.message.startsWith(`Invalid parameter \`${r.field}\``), true, r.message);
  return r.field;
}

describe('gov-timed-token: parseTimedTokenBody', () => {
  it('accepts one token or an old-and-new pair, with Z or a numeric offset', () => {
    const r = parseTimedTokenBody({
      tokens: [
        { token: 'abc.DEF-123', expiredAt: '2030-01-31T23:59:59Z' },
        { token: 'next~token', expiredAt: '2030-02-01T08:00:00+08:00' },
      ],
    });
    assert.ok(r.ok);
    assert.deepEqual(
      r.tokens.map((t) => [t.token, t.expiredAt.toISOString()]),
      [
        ['abc.DEF-123', '2030-01-31T23:59:59.000Z'],
        ['next~token', '2030-02-01T00:00:00.000Z'],
      ],
    );
  });

  it('names the first bad field', () => {
    assert.equal(badField(null), 'tokens');
    assert.equal(badField([]), 'tokens');
    assert.equal(badField({}), 'tokens');
    assert.equal(badField({ tokens: 'x' }), 'tokens');
    assert.equal(badField({ tokens: [] }), 'tokens');
    const ok = { token: 't1', expiredAt: '2030-01-01T00:00:00Z' };
    assert.equal(badField({ tokens: [ok, { ...ok, token: 't2' }, { ...ok, token: 't3' }] }), 'tokens');
    assert.equal(badField({ tokens: [ok, 'x'] }), 'tokens[1]');
    assert.equal(badField({ tokens: [{ expiredAt: ok.expiredAt }] }), 'tokens[0].token');
    assert.equal(badField({ tokens: [{ ...ok, token: '' }] }), 'tokens[0].token');
    assert.equal(badField({ tokens: [{ ...ok, token: 'a,b' }] }), 'tokens[0].token');
    assert.equal(badField({ tokens: [{ ...ok, token: 'a b' }] }), 'tokens[0].token');
    assert.equal(badField({ tokens: [{ ...ok, token: 'x'.repeat(257) }] }), 'tokens[0].token');
    assert.equal(badField({ tokens: [ok, ok] }), 'tokens[1].token');
    assert.equal(badField({ tokens: [ok, { token: 't2' }] }), 'tokens[1].expiredAt');
    assert.equal(badField({ tokens: [{ ...ok, expiredAt: '2030-01-01 00:00:00' }] }), 'tokens[0].expiredAt');
    assert.equal(badField({ tokens: [{ ...ok, expiredAt: 1893456000000 }] }), 'tokens[0].expiredAt');
  });

  it('parses only real instants', () => {
    assert.equal(parseExpiredAt('2030-02-30T00:00:00Z'), undefined);
    assert.equal(parseExpiredAt('2030-13-01T00:00:00Z'), undefined);
    assert.equal(parseExpiredAt('2030-01-01T24:00:00Z'), undefined);
    assert.equal(parseExpiredAt('2030-01-01T00:60:00Z'), undefined);
    assert.equal(parseExpiredAt('2030-01-01T00:00:00'), undefined);
    assert.equal(parseExpiredAt('2030-01-01T00:00:00.5Z'), undefined);
    assert.equal(parseExpiredAt('2028-02-29T00:00:00Z')?.toISOString(), '2028-02-29T00:00:00.000Z');
    assert.equal(parseExpiredAt('2030-01-01T00:00:00-0530')?.toISOString(), '2030-01-01T05:30:00.000Z');
  });
});
