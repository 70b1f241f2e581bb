import assert from 'node:assert/strict';
import { parseCallbackUrl, type ParsedCallback } from '../src/callback-url';

function ok(cb: string): ParsedCallback {
  const r = parseCallbackUrl(cb);
  if (!r.ok) assert.fail(`expected ${cb} to parse, got: ${r.reason}`);
  return r.callback;
}

function reason(cb: unknown): string {
  const r = parseCallbackUrl(cb);
  if (r.ok) assert.fail(`expected ${String(cb)} to be refused`);
  return r.reason;
}

describe('callback-notifier: parseCallbackUrl', () => {
  it('moves percent-decoded credentials into a Basic header and out of the target and the log form', () => {
    const c = ok('https://us%40er:p%3Ass@cb.example.com:8443/base');
    assert.equal(c.authorization, 'Basic ' + Buffer.from('us@er:p:ss').toString('base64'));
    assert.equal(c.target, 'https://cb.example.com:8443/base/strm_notif');
    assert.equal(c.origin, 'https://cb.example.com:8443');
    assert.equal(c.hostname, 'cb.example.com');
    assert.equal(c.redacted, 'https://us%40er:***@cb.example.com:8443/base');
    assert.ok(!c.redacted.includes('p%3Ass') && !c.target.includes('us%40er'));
  });

  it('joins strm_notif to the base path with exactly one slash', () => {
    assert.equal(ok('http://h.example/base/').target, 'http://h.example/base/strm_notif');
    assert.equal(ok('http://h.example/a/b//').target, 'http://h.example/a/b/strm_notif');
    assert.equal(ok('http://h.example').target, 'http://h.example/strm_notif');
    assert.equal(ok('http://h.example/').target, 'http://h.example/strm_notif');
    assert.equal(ok('http://h.example/base/').redacted, 'http://h.example/base');
  });

  it('leaves the header out and the user info out of the log form when the cb has no credentials', () => {
    const c = ok('http://10.1.2.3:9000/notify');
    assert.equal(c.authorization, undefined);
    assert.equal(c.redacted, 'http://10.1.2.3:9000/notify');
  });

  it('handles a user without password and an IPv6 literal host', () => {
    const c = ok('http://alice@[::1]:8080/x');
    assert.equal(c.authorization, 'Basic ' + Buffer.from('alice:').toString('base64'));
    assert.equal(c.hostname, '::1');
    assert.equal(c.origin, 'http://[::1]:8080');
    assert.equal(c.target, 'http://[::1]:8080/x/strm_notif');
  });

  it('refuses other schemes, malformed URLs and parts that have no place in a base address, saying why', () => {
    assert.match(reason('ftp://h.example/x'), /scheme must be http or https, not ftp/);
    assert.match(reason('file:///etc/passwd'), /scheme must be http or https/);
    assert.match(reason('not a url'), /spaces or control characters/);
    assert.match(reason('h.example/cb'), /not a valid absolute URL/);
    assert.match(reason('http://'), /not a valid absolute URL/);
    assert.match(reason(' http://h.example/x'), /spaces or control/);
    assert.match(reason('http://h.example/x?token=1'), /query/);
    assert.match(reason('http://h.example/x#frag'), /fragment/);
    assert.match(reason('http://u:%zz@h.example/'), /percent-encoding/);
    assert.match(reason('http://a%3Ab:pw@h.example/'), /must not contain a colon/);
    assert.match(reason(''), /non-empty string/);
    assert.match(reason(42), /non-empty string/);
    assert.match(reason('http://h.example/' + 'a'.repeat(3000)), /longer than/);
  });
});
