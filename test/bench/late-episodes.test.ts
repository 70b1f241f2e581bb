/**
 * The bench's late-frame episodes (support/late-episodes.ts): a stall every player shared must read as one wide
 * episode, and one slow stream's late frames as narrow ones, since the report tells the two causes apart by this.
 * The clock is a counter the test moves.
 */
import assert from 'node:assert/strict';
import { LateEpisodes, lateEpisodesLine, lateEpisodesShort } from './support/late-episodes';

function clocked(): { late: LateEpisodes; at: (ms: number) => void } {
  let now = 1_000;
  const late = new LateEpisodes(20, () => now);
  late.reset();
  return { late, at: (ms) => (now = 1_000 + ms) };
}

describe('bench late-frame episodes', () => {
  it('groups a stall shared by every player into one wide episode, apart from one stream late on its own', () => {
    const { late, at } = clocked();
    // one player late on its own, twice, far apart
    at(500);
    late.add(25, 7);
    at(3_000);
    late.add(30, 7);
    // every one of 10 players late at once, frames 10 ms apart, for 200 ms
    for (let k = 0; k < 20; k++) {
      at(10_000 + k * 10);
      late.add(40 + k, k % 10);
    }
    // frames under the threshold are not late
    at(15_000);
    late.add(19.9, 3);

    const f = late.figures(10);
    assert.equal(f.frames, 22);
    assert.equal(f.episodes, 3, 'two lone frames 2.5 s apart and one burst');
    assert.equal(f.wide, 1);
    assert.equal(f.framesInWide, 20);
    assert.deepEqual(f.worst, { startMs: 10_000, durationMs: 190, worstMs: 59, frames: 20, players: 10 });
    const line = lateEpisodesLine(f)!;
    assert.match(line, /22 in 3 episode\(s\)/);
    assert.match(line, /the worst at 10\.0 s, 190 ms long, up to 59 ms, reaching 10 of 10 players/);
    assert.match(line, /91 % of them in 1 episode\(s\)/);
    assert.equal(lateEpisodesShort(f), '3 late episode(s), worst 59 ms over 10 players');
  });

  it('splits bursts at a gap over 100 ms, and a window with no late frame says so', () => {
    const { late, at } = clocked();
    at(100);
    late.add(21, 0);
    at(200);
    late.add(21, 1); // 100 ms after: the same episode
    at(301);
    late.add(21, 2); // 101 ms after: a new one
    const f = late.figures(3);
    assert.equal(f.episodes, 2);
    assert.equal(f.wide, 0, 'neither reached 90 % of 3 players');

    late.reset();
    const all: number[] = [];
    const sink = late.sink({ add: (ms) => all.push(ms) }, 2);
    sink(5);
    sink(19);
    assert.deepEqual(all, [5, 19], 'the sink passes every figure on');
    const none = late.figures(3);
    assert.equal(none.frames, 0);
    assert.equal(lateEpisodesLine(none), undefined);
    assert.equal(lateEpisodesShort(none), 'no late frames');
  });
});
