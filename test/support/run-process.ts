import { spawn } from 'node:child_process';
import * as path from 'node:path';

export interface ProcessOutput {
  /** null when it was killed (past the time given) */
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a tool to its end and gives what it printed; past `timeoutMs` it is killed (SIGKILL) and its code is null.
 * Rejects only when it cannot start (not installed: tests name the Debian package through requireTool first).
 */
export function runProcess(cmd: string, args: string[], timeoutMs: number, env?: NodeJS.ProcessEnv): Promise<ProcessOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** runProcess for a tool that must succeed: its exit code or timeout, with what it printed, rejects */
export async function runProcessOk(cmd: string, args: string[], timeoutMs: number): Promise<ProcessOutput> {
  const p = await runProcess(cmd, args, timeoutMs);
  if (p.code !== 0) throw new Error(`${path.basename(cmd)} ${p.code === null ? `killed after ${timeoutMs} ms` : `exited ${p.code}`}: ${p.stderr}`);
  return p;
}
