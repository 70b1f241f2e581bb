import 'reflect-metadata';

// Payload memory that goes back to the bus's pool is overwritten with a poison pattern (core/bus/chunk-pool.ts): a
// sink that says it holds no payload while it still reads one sees garbage, and the test reading it fails. Gateways
// the tests start in child processes inherit it.
process.env.GW_POISON_PAYLOADS ??= '1';

// Tests must not leave the process with an unhandled rejection hidden behind a passing run.
process.on('unhandledRejection', (err) => {
  console.error('unhandled rejection in test run:', err);
  process.exitCode = 1;
});
