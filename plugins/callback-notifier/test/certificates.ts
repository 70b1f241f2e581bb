import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { requireTool } from '../../../test/support/tools';

export interface TestPki {
  /** PEM file of the private CA */
  caFile: string;
  /** a server certificate the CA issued for 127.0.0.1 and localhost */
  server: { key: Buffer; cert: Buffer };
  /** a server certificate the CA issued for localhost only (wrong for https://127.0.0.1) */
  localhostOnly: { key: Buffer; cert: Buffer };
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync(requireTool('openssl', 'openssl'), args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
}

/** A private CA and two server certificates it signed, made with Debian's openssl in `dir`, valid for two days. */
export function makeTestPki(dir: string): TestPki {
  fs.mkdirSync(dir, { recursive: true });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=gateway test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const issue = (name: string, san: string): { key: Buffer; cert: Buffer } => {
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    openssl(dir, ['req', '-new', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ]);
    return { key: fs.readFileSync(path.join(dir, `${name}.key`)), cert: fs.readFileSync(path.join(dir, `${name}.pem`)) };
  };
  return {
    caFile: path.join(dir, 'ca.pem'),
    server: issue('server', 'IP:127.0.0.1,DNS:localhost'),
    localhostOnly: issue('localhost-only', 'DNS:localhost'),
  };
}
