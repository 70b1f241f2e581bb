import assert from 'node:assert/strict';
import { classifyIp, parseIp } from '../src/ip-address';
import { DEFAULT_SITE_HOST_POLICY, HostPolicy, pinnedLookup, type ResolvedAddress, type Resolver } from '../src/host-policy';

/** A resolver answering from a table, so "a name that resolves to a private address" needs no DNS server. */
function table(entries: Record<string, string[]>): Resolver {
  return async (name) => {
    const addrs = entries[name];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return addrs.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }) as ResolvedAddress);
  };
}

async function refused(policy: HostPolicy, host: string): Promise<string> {
  const v = await policy.vet(host);
  if (v.ok) assert.fail(`${host} should be refused`);
  return v.reason;
}

async function allowed(policy: HostPolicy, host: string): Promise<ResolvedAddress[]> {
  const v = await policy.vet(host);
  if (!v.ok) assert.fail(`${host} should be allowed, got: ${v.reason}`);
  return v.addresses;
}

describe('callback-notifier: IP classification', () => {
  it('classifies the internal ranges in every IPv6 spelling, IPv4-mapped included', () => {
    const cases: Array<[string, string]> = [
      ['10.1.2.3', 'private'],
      ['172.16.0.1', 'private'],
      ['172.32.0.1', 'public'],
      ['192.168.1.1', 'private'],
      ['169.254.169.254', 'link-local'],
      ['127.0.0.1', 'loopback'],
      ['100.64.0.1', 'shared'],
      ['0.0.0.0', 'unspecified'],
      ['8.8.8.8', 'public'],
      ['::1', 'loopback'],
      ['0:0:0:0:0:0:0:1', 'loopback'],
      ['::', 'unspecified'],
      ['fe80::1', 'link-local'],
      ['fc00::1', 'unique-local'],
      ['fd12:3456::1', 'unique-local'],
      ['ff02::1', 'multicast'],
      ['::ffff:10.0.0.1', 'private'],
      ['::ffff:a00:1', 'private'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['64:ff9b::a9fe:a9fe', 'link-local'],
      ['2001:4860:4860::8888', 'public'],
      ['::ffff:8.8.8.8', 'public'],
    ];
    for (const [ip, cls] of cases) {
      const bytes = parseIp(ip);
      assert.ok(bytes, `${ip} should parse`);
      assert.equal(classifyIp(bytes), cls, ip);
    }
    assert.equal(parseIp('10.0.0.256'), undefined);
    assert.equal(parseIp('fe80::1%eth0'), undefined);
    assert.equal(parseIp('example.com'), undefined);
  });
});

describe('callback-notifier: HostPolicy', () => {
  const strict = new HostPolicy({ blockInternal: true, resolve: table({}) });

  it('refuses 10.x, 192.168.x, 169.254.x, ::1, fc00:: and loopback literals when internal hosts are blocked', async () => {
    for (const host of ['10.0.0.1', '192.168.0.10', '169.254.169.254', '::1', 'fc00::1', '127.0.0.1', '::ffff:127.0.0.1', '::ffff:a00:1']) {
      assert.match(await refused(strict, host), /refused by the callback host policy/, host);
    }
    assert.deepEqual(await allowed(strict, '93.184.216.34'), [{ address: '93.184.216.34', family: 4 }]);
  });

  it('refuses a name that resolves to an internal address, even when only one of its addresses is', async () => {
    const p = new HostPolicy({
      blockInternal: true,
      resolve: table({
        'intranet.example': ['10.0.0.7'],
        'mixed.example': ['93.184.216.34', '192.168.1.1'],
        'fine.example': ['93.184.216.34', '2606:2800:220:1::1'],
      }),
    });
    assert.match(await refused(p, 'intranet.example'), /intranet\.example resolves to a private address \(10\.0\.0\.7\)/);
    assert.match(await refused(p, 'mixed.example'), /192\.168\.1\.1/);
    assert.equal((await allowed(p, 'fine.example')).length, 2);
  });

  it('resolves real names at vet time: localhost is refused by a strict policy, allowed by the default site policy', async () => {
    const strictDns = new HostPolicy({ blockInternal: true });
    assert.match(await refused(strictDns, 'localhost'), /localhost resolves to a loopback address/);
    const def = new HostPolicy(DEFAULT_SITE_HOST_POLICY);
    const addrs = await allowed(def, 'localhost');
    assert.ok(
      addrs.every((a) => a.address === '127.0.0.1' || a.address === '::1'),
      JSON.stringify(addrs),
    );
  });

  it('default site policy: loopback yes (v4 and v6), other internal ranges no, public yes', async () => {
    const def = new HostPolicy(DEFAULT_SITE_HOST_POLICY);
    await allowed(def, '127.0.0.1');
    await allowed(def, '::1');
    for (const host of ['10.0.0.1', '192.168.1.1', '169.254.169.254', 'fc00::1']) await refused(def, host);
    await allowed(def, '8.8.8.8');
  });

  it('allow list: names, subdomain wildcards and CIDRs; a listed CIDR lets an internal range in', async () => {
    const p = new HostPolicy({
      allow: ['api.example.com', '*.apps.example.com', '203.0.113.0/24', '10.1.0.0/16'],
      blockInternal: true,
      resolve: table({
        'api.example.com': ['93.184.216.34'],
        'x.apps.example.com': ['93.184.216.35'],
        'apps.example.com': ['93.184.216.36'],
        'other.example': ['203.0.113.5'],
        'elsewhere.example': ['198.51.100.1'],
        'corp.example': ['10.1.2.3'],
      }),
    });
    await allowed(p, 'api.example.com');
    await allowed(p, 'API.Example.com.');
    await allowed(p, 'x.apps.example.com');
    await allowed(p, 'other.example');
    await allowed(p, 'corp.example');
    await allowed(p, '10.1.200.1');
    assert.match(await refused(p, 'apps.example.com'), /not in the allow list/);
    assert.match(await refused(p, 'elsewhere.example'), /not in the allow list/);
    assert.match(await refused(p, '10.2.0.1'), /not in the allow list/);
  });

  it('a listed name that resolves to a blocked internal address is still refused', async () => {
    const p = new HostPolicy({ allow: ['api.example.com'], blockInternal: true, resolve: table({ 'api.example.com': ['169.254.169.254'] }) });
    assert.match(await refused(p, 'api.example.com'), /link-local/);
  });

  it('a DNS failure is retryable, a policy refusal is not', async () => {
    const v = await strict.vet('nowhere.example');
    assert.ok(!v.ok && v.retryable && /ENOTFOUND/.test(v.reason));
    const r = await strict.vet('10.0.0.1');
    assert.ok(!r.ok && !r.retryable);
  });

  it('names a bad allow entry', () => {
    assert.throws(() => new HostPolicy({ allow: ['10.0.0.0/40'] }), /allow entry '10\.0\.0\.0\/40'/);
    assert.throws(() => new HostPolicy({ allow: ['http://x'] }), /allow entry 'http:\/\/x'/);
  });

  it('pinnedLookup answers with the vetted addresses only, by family, in both callback shapes', async () => {
    const lookup = pinnedLookup([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
    const call = (opts: object) =>
      new Promise<unknown[]>((resolve) => lookup('x.example', opts as never, (err, address, family) => resolve([err?.code ?? null, address, family])));
    assert.deepEqual(await call({ all: true }), [
      null,
      [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1::1', family: 6 },
      ],
      undefined,
    ]);
    assert.deepEqual(await call({ family: 6 }), [null, '2606:2800:220:1::1', 6]);
    assert.deepEqual(await call({ family: 'IPv4' }), [null, '93.184.216.34', 4]);
    const v6only = pinnedLookup([{ address: '::1', family: 6 }]);
    const err = await new Promise((resolve) => v6only('x', { family: 4 }, (e) => resolve(e?.code)));
    assert.equal(err, 'ENOTFOUND');
  });
});
