#!/usr/bin/env node
import 'reflect-metadata';
import { Kernel } from './kernel';
import { BootError } from './config';

const STOP_LIMIT_MS = 10_000;

async function main(): Promise<void> {
  const siteArg = process.argv[2] ?? process.env.GW_SITE;
  const kernel = new Kernel({ site: siteArg });
  try {
    await kernel.start();
  } catch (err) {
    const msg = err instanceof BootError ? err.message : `unexpected error: ${(err as Error)?.message ?? String(err)}`;
    process.stderr.write(`boot failed: ${msg}\n`);
    if (!(err instanceof BootError) && process.env.GW_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    process.exit(1);
  }

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    kernel.log.info({ signal }, 'stopping');
    const timer = setTimeout(() => {
      process.stderr.write(`shutdown did not finish within ${STOP_LIMIT_MS / 1000} s; exiting\n`);
      process.exit(1);
    }, STOP_LIMIT_MS);
    timer.unref();
    kernel.stop().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`shutdown failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // One bad packet or plugin bug must not take every vehicle's stream down with it: log and carry on.
  process.on('uncaughtException', (err) => kernel.log.fatal({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => kernel.log.error({ err }, 'unhandled promise rejection'));
}

void main();
