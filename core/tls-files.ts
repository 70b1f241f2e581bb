import * as fs from 'node:fs';
import * as tls from 'node:tls';
import { BootError } from './config';

/** A site's certificate and key, read once at boot. */
export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/**
 * tlsCertFile / tlsKeyFile: both or neither. Read and tried (tls.createSecureContext) at boot, so a missing file,
 * a PEM that is not one, or a key that does not match its certificate stops boot naming the key, instead of every
 * player failing its handshake later. Paths are relative to the working directory, like dataDir.
 */
export function loadTlsFiles(certFile: string | undefined, keyFile: string | undefined, where: string): TlsFiles | undefined {
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile) {
    throw new BootError(`${where}: key ${certFile ? 'tlsKeyFile' : 'tlsCertFile'}: give both tlsCertFile and tlsKeyFile to serve TLS, or neither`);
  }
  const read = (key: string, file: string): Buffer => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new BootError(`${where}: key ${key}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  };
  const files = { cert: read('tlsCertFile', certFile), key: read('tlsKeyFile', keyFile) };
  try {
    tls.createSecureContext(files);
  } catch (err) {
    // OpenSSL's words ("key values mismatch", "no start line") are what an operator searches for
    throw new BootError(`${where}: keys tlsCertFile/tlsKeyFile: ${certFile} and ${keyFile} are not a usable certificate and key (${(err as Error).message})`);
  }
  return files;
}
