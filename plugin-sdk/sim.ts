/** Characters the open call accepts in a simNo (decisions.md, open request validation rule 4). */
export const SIM_PATTERN = /^[0-9A-Za-z._~-]{1,20}$/;

/**
 * A terminal's SIM as the gateway keys it: all-digit values lose their leading zeros, so the 2013 layout's
 * `013800001111` and the 2019 layout's `00000000013800001111` name the same terminal. At least one digit stays.
 */
export function normaliseSim(sim: string): string {
  if (!/^[0-9]+$/.test(sim)) return sim;
  let i = 0;
  while (i < sim.length - 1 && sim.charCodeAt(i) === 48) i++;
  return i === 0 ? sim : sim.slice(i);
}
