import * as fs from 'node:fs';
import * as tls from 'node:tls';

const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt'];
const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * The CA certificates a callback's HTTPS server is checked against: Node's bundled roots, the system's store (so an
 * enterprise CA the operator installed on the machine counts), NODE_EXTRA_CA_CERTS, and the site's own files.
 * An agent's `ca` replaces Node's default store, NODE_EXTRA_CA_CERTS included, which is why that file is read here.
 */
export function trustedCertificates(extraCaFiles: readonly string[] = [], env: NodeJS.ProcessEnv = process.env): string[] {
  const roots = [...tls.rootCertificates];
  for (const file of SYSTEM_BUNDLES) {
    const pem = readOptional(file);
    if (pem !== undefined) {
      roots.push(pem);
      break;
    }
  }
  const fromEnv = env.NODE_EXTRA_CA_CERTS ? readOptional(env.NODE_EXTRA_CA_CERTS) : undefined;
  if (fromEnv !== undefined) roots.push(...certificatesIn(fromEnv));
  for (const file of extraCaFiles) roots.push(...readCaFile(file));
  return roots;
}

/** The certificates of a PEM file; throws, naming the file, when it cannot be read or holds none. */
export function readCaFile(file: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  const certs = certificatesIn(text);
  if (certs.length === 0) throw new Error(`${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return certs;
}

function certificatesIn(text: string): string[] {
  return text.match(PEM_CERT) ?? [];
}

function readOptional(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Errors of a server certificate that was checked and refused. Retrying cannot change them within a notice's retry
 * budget, so such a notice fails at once with a reason that says what to fix.
 */
const CERTIFICATE_REFUSALS = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'INVALID_CA',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

export function isCertificateRefusal(code: string | undefined): boolean {
  return code !== undefined && CERTIFICATE_REFUSALS.has(code);
}
