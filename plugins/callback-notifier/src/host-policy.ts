import { lookup } from 'node:dns/promises';
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { classifyIp, inCidr, parseCidr, parseIp, type Cidr } from './ip-address';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface HostPolicyOptions {
  /**
   * Callback hosts that may be called: host names (`api.example.com`, or `*.example.com` for its subdomains), IP
   * addresses or CIDRs (`203.0.113.0/24`). Empty or absent: any host. An address inside a listed CIDR is allowed
   * even when `blockInternal` would refuse it, so an intranet application can be let in explicitly.
   */
  allow?: readonly string[];
  /**
   * Refuse hosts that are, or resolve to, loopback, link-local, private (RFC 1918, fec0::/10), unique-local,
   * shared (100.64/10), unspecified, multicast or reserved addresses, IPv4-mapped IPv6 forms included. This is
   * the guard against an application aiming callbacks at the gateway's own network (cloud metadata, admin ports).
   */
  blockInternal?: boolean;
  /** with blockInternal, still allow loopback (an application on the gateway's own machine) */
  allowLoopback?: boolean;
  /** name resolution, replaceable in tests; default: the system resolver (dns.lookup, all addresses) */
  resolve?: Resolver;
}

/**
 * The default site runs everything on one machine: the demo application's callback is on loopback, so loopback is
 * allowed, while the rest of the internal ranges (cloud metadata at 169.254.169.254 above all) stay refused.
 * A site whose applications live on its LAN lists their CIDRs in `allow`.
 */
export const DEFAULT_SITE_HOST_POLICY: Readonly<HostPolicyOptions> = Object.freeze({
  allow: Object.freeze([]) as readonly string[],
  blockInternal: true,
  allowLoopback: true,
});

export type HostVerdict = { ok: true; addresses: ResolvedAddress[] } | { ok: false; reason: string; retryable: boolean };

const HOST_NAME = /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/i;

const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

export class HostPolicy {
  private readonly names: string[] = [];
  private readonly suffixes: string[] = [];
  private readonly cidrs: Cidr[] = [];
  private readonly blockInternal: boolean;
  private readonly allowLoopback: boolean;
  private readonly resolve: Resolver;

  /** Throws naming the entry when an allow entry is neither a host name, an address nor a CIDR (a config error). */
  constructor(opts: HostPolicyOptions = DEFAULT_SITE_HOST_POLICY) {
    for (const raw of opts.allow ?? []) {
      const entry = raw.trim().toLowerCase().replace(/\.$/, '');
      const cidr = parseCidr(entry.replace(/^\[(.*)\]/, '$1'));
      if (cidr) this.cidrs.push(cidr);
      else if (entry.includes('/') || entry.includes(':') || !HOST_NAME.test(entry)) {
        throw new Error(`callback host allow entry '${raw}' is not a host name, IP address or CIDR`);
      } else if (entry.startsWith('*.')) this.suffixes.push(entry.slice(1));
      else this.names.push(entry);
    }
    this.blockInternal = opts.blockInternal ?? false;
    this.allowLoopback = opts.allowLoopback ?? false;
    this.resolve = opts.resolve ?? systemResolver;
  }

  /**
   * Resolves `hostname` (done at delivery time, so a name that has since moved to an internal address is refused)
   * and says whether every address it has may be called. The addresses returned are the ones to connect to:
   * see pinnedLookup.
   */
  async vet(hostname: string): Promise<HostVerdict> {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    const literal = parseIp(name);
    let addresses: ResolvedAddress[];
    if (literal) {
      addresses = [{ address: name, family: literal.length === 4 ? 4 : 6 }];
    } else {
      try {
        addresses = await this.resolve(name);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'error';
        return { ok: false, reason: `DNS lookup of ${name} failed (${code})`, retryable: true };
      }
      if (addresses.length === 0) return { ok: false, reason: `DNS lookup of ${name} found no address`, retryable: true };
    }
    const nameAllowed = !literal && this.nameAllowed(name);
    const anyHost = this.names.length + this.suffixes.length + this.cidrs.length === 0;
    for (const { address } of addresses) {
      const bytes = parseIp(address);
      if (!bytes) return { ok: false, reason: `${name} resolves to an unparseable address ${address}`, retryable: false };
      const listed = this.cidrs.some((c) => inCidr(bytes, c));
      if (!anyHost && !nameAllowed && !listed) {
        return { ok: false, reason: `callback host ${name} is not in the allow list`, retryable: false };
      }
      const cls = classifyIp(bytes);
      const internalOk = cls === 'public' || listed || (cls === 'loopback' && this.allowLoopback);
      if (this.blockInternal && !internalOk) {
        const what = literal ? `${name} is a ${cls} address` : `${name} resolves to a ${cls} address (${address})`;
        return { ok: false, reason: `${what}, refused by the callback host policy`, retryable: false };
      }
    }
    return { ok: true, addresses };
  }

  private nameAllowed(name: string): boolean {
    return this.names.includes(name) || this.suffixes.some((s) => name.endsWith(s));
  }
}

/**
 * A lookup for the HTTP client that answers with the addresses the policy vetted, so the connection goes exactly
 * where the policy looked (no second resolution that a rebinding DNS server could answer differently).
 */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  // options: Node's dns.lookup contract also allows a family number, or nothing, in their place
  return ((
    hostname: string,
    options: LookupOptions | number | null | undefined,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    const wanted = typeof options === 'object' && options ? options.family : undefined;
    const fam = wanted === 'IPv4' ? 4 : wanted === 'IPv6' ? 6 : wanted;
    const usable = addresses.filter((a) => !fam || a.family === fam);
    if (usable.length === 0) {
      const err: NodeJS.ErrnoException = new Error(`no vetted IPv${fam} address for ${hostname}`);
      err.code = 'ENOTFOUND';
      process.nextTick(callback, err, '', 0);
    } else if (typeof options === 'object' && options?.all) {
      process.nextTick(
        callback,
        null,
        usable.map((a) => ({ address: a.address, family: a.family })),
      );
    } else {
      process.nextTick(callback, null, usable[0].address, usable[0].family);
    }
  }) as LookupFunction;
}
