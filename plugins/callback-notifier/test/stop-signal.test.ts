import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { StopSignal } from '../src/stop-signal';
import { collector } from '../../../test/support/gc';

/**
 * How many of `count` races' own promises are still reachable after they settled and were dropped: a race against a
 * long-lived stop signal must leave nothing on it (the dispatcher races once per delivery attempt).
 */
async function racesStillHeld(race: (work: Promise<number>) => Promise<unknown>, count: number): Promise<number> {
  const gc = collector();
  // in a function of its own, so that no frame of this one still holds the last race
  const run = async (): Promise<Array<WeakRef<object>>> => {
    const refs: Array<WeakRef<object>> = [];
    for (let i = 0; i < count; i++) {
      const p = race(Promise.resolve(i));
      refs.push(new WeakRef(p));
      await p;
    }
    return refs;
  };
  const refs = await run();
  await tick();
  gc();
  await tick();
  gc();
  return refs.filter((r) => r.deref() !== undefined).length;
}

describe('StopSignal: stop, or the work, whichever comes first', () => {
  it("gives the work's value or its error, and leaves no waiter behind", async () => {
    const s = new StopSignal();
    assert.equal(await s.race(Promise.resolve(7)), 7);
    await assert.rejects(s.race(Promise.reject(new Error('resolver down'))), /resolver down/);
    assert.equal(s.waiting, 0);
  });

  it('answers "stopped" to races still waiting when it fires, and at once after', async () => {
    const s = new StopSignal();
    let finish!: (v: number) => void;
    const slow = s.race(
      new Promise<number>((r) => {
        finish = r;
      }),
    );
    assert.equal(s.waiting, 1);
    s.fire();
    assert.equal(await slow, 'stopped');
    assert.equal(s.waiting, 0);
    finish(1); // settling late changes nothing
    assert.equal(await s.race(new Promise<number>(() => undefined)), 'stopped');
    assert.equal(s.stopped, true);
    s.fire(); // twice is harmless
  });

  it('a settled race is collectable; with Promise.race against one long-lived promise it is not (the leak it replaces)', async () => {
    const s = new StopSignal();
    assert.equal(await racesStillHeld((w) => s.race(w), 200), 0);
    // the check itself sees the leak: every race stays chained on the promise that never settles
    const stopping = new Promise<'stopped'>(() => undefined);
    const held = await racesStillHeld((w) => Promise.race([w, stopping]), 200);
    assert.equal(held, 200);
  });
});
