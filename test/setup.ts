import 'reflect-metadata';

// Tests must not leave the process with an unhandled rejection hidden behind a passing run.
process.on('unhandledRejection', (err) => {
  console.error('unhandled rejection in test run:', err);
  process.exitCode = 1;
});
