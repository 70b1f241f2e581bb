/** What the recorder asks of its store's file system: that it exists and can be written, and how much room is left. */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Creates the store root and checks that it can be written to. */
export function prepareStore(storeRoot: string): void {
  fs.mkdirSync(storeRoot, { recursive: true });
  fs.accessSync(storeRoot, fs.constants.W_OK);
}

/** bytes the recovery check writes into the store: proof that files can be created there again */
const PROBE_BYTES = 64 * 1024;

export async function probeWrite(dir: string): Promise<void> {
  const file = path.join(dir, `.write-probe-${process.pid}`);
  try {
    await fs.promises.writeFile(file, Buffer.alloc(PROBE_BYTES));
  } finally {
    await fs.promises.rm(file, { force: true });
  }
}

export async function freeBytes(dir: string): Promise<number> {
  const st = await fs.promises.statfs(dir);
  return st.bavail * st.bsize;
}
