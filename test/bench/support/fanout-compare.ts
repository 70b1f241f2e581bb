/**
 * fanout against the floor: K rounds of the gateway and the bare relay on the same load, alternated (this machine's
 * speed drifts), then gateway CPU / floor CPU. Past one core's worth of players the cost is one socket write per
 * player per frame in both, most of it the kernel's TCP, so the ratio says what the gateway adds to what any relay
 * pays, and the floor's CPU says what the machine allows: the 60 % target holds wherever the floor takes under
 * 60 / ratio % of a core.
 */
import type { FanoutOptions, FanoutResult } from '../fanout';
import { alternate, othersNote, total } from './alternate';
import { f1, f2 } from './gateway-harness';

/** `targetPct`: fanout's CPU target, a share of one core */
export async function vsFloor(o: FanoutOptions, targetPct: number, runWith: (o: FanoutOptions) => Promise<FanoutResult>): Promise<FanoutResult> {
  const rounds = await alternate(o.vsFloor, {
    gateway: () => runWith({ ...o, vsFloor: 0, floor: false }),
    floor: () => runWith({ ...o, vsFloor: 0, floor: true }),
  });
  console.log(`\nfanout vs the floor, ${o.players} players, ${rounds.length} round(s) alternated:`);
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: gateway ${f1(r.gateway.cpuPct)} % (lag p50 ${f1(r.gateway.lagMs.p50)} / p99 ${f1(r.gateway.lagMs.p99)} ms, ` +
        `${r.gateway.completePlayers} of ${r.gateway.players} players every frame), floor ${f1(r.floor.cpuPct)} % (lag p50 ${f1(r.floor.lagMs.p50)} / ` +
        `p99 ${f1(r.floor.lagMs.p99)} ms, ${r.floor.completePlayers} every frame) -> gateway / floor ${f2(r.gateway.cpuPct / r.floor.cpuPct)}` +
        othersNote(r.gateway, r.floor),
    );
  }
  const gateway = total(rounds, (r) => r.gateway.cpuPct) / rounds.length;
  const floor = total(rounds, (r) => r.floor.cpuPct) / rounds.length;
  const ratio = gateway / floor;
  console.log(
    `  gateway CPU / floor CPU: ${f2(ratio)}; gateway ${f1(gateway)} % of a core on average (target under ${targetPct} %: ` +
      `${gateway < targetPct ? 'ok' : 'MISSED'}), met on a machine where the floor takes under ${f1(targetPct / ratio)} % (here ${f1(floor)} %)`,
  );
  return rounds[rounds.length - 1].gateway;
}
