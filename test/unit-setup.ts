/**
 * The unit tier's setup (.mocharc.unit.json requires it after test/setup): no system programs, no Redis or
 * PostgreSQL server (see support/unit-tier-guard.ts). Child Node processes load this file through NODE_OPTIONS.
 */
import { installUnitTierGuard, takeRefusals } from './support/unit-tier-guard';

installUnitTierGuard(__filename);

/** Refusals a passing test (or a hook before it) caught and carried on past. */
const hidden: string[] = [];

/** Mocha root hooks: the guard throws where the spawn is, and these fail the run if a test swallowed that throw. */
export const mochaHooks = {
  afterEach(this: Mocha.Context): void {
    const taken = takeRefusals();
    // a failed test has reported its refusal already
    if (this.currentTest?.state === 'failed') return;
    for (const r of taken) hidden.push(`${this.currentTest?.fullTitle() ?? '(a hook)'}: ${r}`);
  },
  afterAll(): void {
    hidden.push(...takeRefusals().map((r) => `(a hook): ${r}`));
    if (hidden.length) throw new Error(`the unit tier refused what these tests tried:\n${hidden.join('\n')}`);
  },
};
