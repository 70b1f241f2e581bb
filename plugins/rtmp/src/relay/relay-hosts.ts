/**
 * Which addresses a relay may connect to. A relay URL comes from an API caller, so without a rule the gateway would
 * open TCP connections into its own network for anyone with credentials (the same reason callback-notifier refuses
 * internal callback hosts). Names are resolved here and the connection goes to the address checked, so a name
 * cannot resolve to a public address for the check and an internal one for the connect.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

export interface HostRule {
  /** refuse private, loopback, link-local, CGNAT and other non-public addresses */
  blockInternal: boolean;
  /** with blockInternal, still allow loopback (tests, a local CDN edge) */
  allowLoopback: boolean;
}

const internal = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  internal.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  internal.addSubnet(net, bits, 'ipv6');
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** an IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it carries */
function plain(ip: string): { ip: string; family: 'ipv4' | 'ipv6' } {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (m) return { ip: m[1], family: 'ipv4' };
  return { ip, family: isIP(ip) === 6 ? 'ipv6' : 'ipv4' };
}

/** why an address is refused, or undefined when it is allowed */
export function refusal(ip: string, rule: HostRule): string | undefined {
  if (!rule.blockInternal) return undefined;
  const a = plain(ip);
  if (loopback.check(a.ip, a.family)) return rule.allowLoopback ? undefined : 'a loopback address (relayAllowLoopback is off)';
  if (internal.check(a.ip, a.family)) return 'an internal address (relayBlockInternal)';
  return undefined;
}

/** the address to connect to; throws when the host has none the rule allows */
export async function resolveAllowed(host: string, rule: HostRule): Promise<string> {
  const addrs = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  if (addrs.length === 0) throw new Error(`${host} has no address`);
  // every address is judged: a name with one internal address among public ones is refused as a whole
  for (const ip of addrs) {
    const why = refusal(ip, rule);
    if (why) throw new Error(isIP(host) ? `${host} is ${why}` : `${host} resolves to ${why}`);
  }
  return addrs[0];
}
