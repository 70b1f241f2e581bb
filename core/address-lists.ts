/**
 * The address lists (metricsAllow, perAddressExempt) are parsed once at boot and matched on every connection or
 * scrape, by the API, the connection guard and the cluster's primary alike, so parsing and matching live apart from
 * the config class that only holds the raw strings.
 */
import * as net from 'node:net';
import { BootError } from './config';

/**
 * An address list (metricsAllow, perAddressExempt) as a BlockList (used as an allow list). A bare address is a host;
 * IPv4 entries also match the IPv4-mapped IPv6 form a dual-stack listener reports.
 */
export function parseAllowList(list: string[], where: string, key = 'metricsAllow'): net.BlockList {
  const bl = new net.BlockList();
  list.forEach((raw, i) => {
    const at = `${where}: key ${key}[${i}]`;
    const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(typeof raw === 'string' ? raw.trim() : '');
    const family = m ? net.isIP(m[1]) : 0;
    if (!m || family === 0) throw new BootError(`${at}: '${String(raw)}' is not an IP address or CIDR (e.g. 10.0.0.0/8, ::1/128)`);
    const max = family === 4 ? 32 : 128;
    const prefix = m[2] === undefined ? max : Number(m[2]);
    if (prefix > max) throw new BootError(`${at}: prefix /${prefix} is longer than ${max}`);
    bl.addSubnet(m[1], prefix, family === 4 ? 'ipv4' : 'ipv6');
  });
  return bl;
}

export function allowListed(bl: net.BlockList, remote: string): boolean {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote);
  if (v4) return bl.check(v4[1], 'ipv4');
  const family = net.isIP(remote);
  return family !== 0 && bl.check(remote, family === 4 ? 'ipv4' : 'ipv6');
}
