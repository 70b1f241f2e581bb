import { isIPv4, isIPv6 } from 'node:net';

/**
 * IP addresses as bytes (4 or 16), so ranges are compared numerically rather than by string prefixes, which
 * miss the many spellings of one IPv6 address (`::1`, `0:0::1`, `::ffff:127.0.0.1`, `::ffff:7f00:1`).
 */
export type IpBytes = Uint8Array;

export type AddressClass = 'public' | 'unspecified' | 'loopback' | 'private' | 'link-local' | 'unique-local' | 'shared' | 'multicast' | 'reserved';

export function parseIp(text: string): IpBytes | undefined {
  if (isIPv4(text)) return Uint8Array.from(text.split('.').map(Number));
  if (!isIPv6(text) || text.includes('%')) return undefined;
  let head = text;
  let v4Tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    v4Tail = text
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    head = text.slice(0, lastColon + 1) + '0:0';
  }
  const [left, right] = head.includes('::') ? head.split('::') : [head, undefined];
  const groups = (s: string | undefined): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const l = groups(left);
  const r = groups(right);
  const all = right === undefined ? l : [...l, ...new Array<number>(8 - l.length - r.length).fill(0), ...r];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  if (v4Tail.length === 4) bytes.set(v4Tail, 12);
  return bytes;
}

/**
 * The IPv4 address an IPv6 address carries, when the network would deliver it to that IPv4 host: IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and the NAT64 well-known prefix (64:ff9b::a.b.c.d).
 */
export function embeddedIpv4(bytes: IpBytes): IpBytes | undefined {
  if (bytes.length !== 16) return undefined;
  const zeros = (from: number, to: number) => bytes.subarray(from, to).every((b) => b === 0);
  const mapped = zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff;
  const compat = zeros(0, 12) && !(zeros(12, 15) && bytes[15] <= 1); // leaves :: and ::1 to IPv6
  const nat64 = bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12);
  return mapped || compat || nat64 ? bytes.slice(12) : undefined;
}

interface Range {
  net: IpBytes;
  bits: number;
  cls: AddressClass;
}

const range = (cidr: string, cls: AddressClass): Range => {
  const parsed = parseCidr(cidr);
  if (!parsed) throw new Error(`bad built-in range ${cidr}`);
  return { ...parsed, cls };
};

const RANGES: Range[] = [
  range('0.0.0.0/8', 'unspecified'),
  range('127.0.0.0/8', 'loopback'),
  range('10.0.0.0/8', 'private'),
  range('172.16.0.0/12', 'private'),
  range('192.168.0.0/16', 'private'),
  range('169.254.0.0/16', 'link-local'),
  range('100.64.0.0/10', 'shared'),
  range('192.0.0.0/24', 'reserved'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'private'),
  range('fc00::/7', 'unique-local'),
  range('ff00::/8', 'multicast'),
];

export function classifyIp(bytes: IpBytes): AddressClass {
  const ip = embeddedIpv4(bytes) ?? bytes;
  return RANGES.find((r) => inCidr(ip, r))?.cls ?? 'public';
}

export interface Cidr {
  net: IpBytes;
  bits: number;
}

/** `10.0.0.0/8`, `fd00::/8`, or a bare address (a /32 or /128). */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const addr = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!addr) return undefined;
  const max = addr.length * 8;
  if (slash < 0) return { net: addr, bits: max };
  const bitsText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > max) return undefined;
  return { net: addr, bits: Number(bitsText) };
}

export function inCidr(addr: IpBytes, cidr: Cidr): boolean {
  const ip = addr.length === cidr.net.length ? addr : (embeddedIpv4(addr) ?? addr);
  if (ip.length !== cidr.net.length) return false;
  const whole = cidr.bits >> 3;
  for (let i = 0; i < whole; i++) if (ip[i] !== cidr.net[i]) return false;
  const rest = cidr.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (ip[whole] & mask) === (cidr.net[whole] & mask);
}
