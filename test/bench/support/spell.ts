/**
 * The machine's spell. This VM's speed drifts by up to 2x between hours (test/bench/README.md, issue 48), and the
 * gateway's cost drifts more than a bare relay's, so every figure needs the floor's cost beside it to mean anything.
 */
import { f1, f2 } from './gateway-harness';

/** The machine's spell, told by what the floor costs: its CPU scaled to 500 terminals (it grows in proportion). */
export interface Spell {
  name: 'slow' | 'middling' | 'fast' | 'unjudged';
  /** the floor's CPU at the load, scaled to 500 terminals */
  floorPer500: number;
  /** issue 48's bound on gateway / floor in this spell */
  ratioTarget: number;
}

/** issue 48: slow past 40 % of a core at 500 terminals (its 2026-11-28 evening: 44-45 %), fast at 30 % or less */
export const SPELL = { slowAbove: 40, fastAtMost: 30, slowRatio: 1.6, fastRatio: 1.45, minTerminals: 250 };

export function spellOf(floorCpuPct: number, terminals: number, audio = false): Spell {
  const floorPer500 = (floorCpuPct * 500) / terminals;
  // under a few hundred terminals the floor's fixed costs (timers, the API, its idle loop) are a large share, and
  // scaling them up reads a fast machine as slow; audio adds packets the thresholds were not set on
  const name =
    terminals < SPELL.minTerminals || audio ? 'unjudged' : floorPer500 > SPELL.slowAbove ? 'slow' : floorPer500 <= SPELL.fastAtMost ? 'fast' : 'middling';
  return { name, floorPer500, ratioTarget: name === 'fast' ? SPELL.fastRatio : SPELL.slowRatio };
}

export function spellLine(s: Spell, terminals: number): string {
  if (s.name === 'unjudged')
    return `spell: not judged (it is, on the video-only floor at ${SPELL.minTerminals} terminals or more; the floor took ${f1((s.floorPer500 * terminals) / 500)} % of a core at ${terminals})`;
  return (
    `spell: ${s.name.toUpperCase()}, the floor took ${f1((s.floorPer500 * terminals) / 500)} % of a core at ${terminals} terminals ` +
    `(${f1(s.floorPer500)} % at 500; slow above ${SPELL.slowAbove}, fast at ${SPELL.fastAtMost} or less)`
  );
}

/** issue 48's bound for the spell, judged on every round (alternated runs) or pair (paired runs) of a comparison */
export function boundVerdict(s: Spell, ratios: readonly number[], each: 'round' | 'pair'): string {
  if (s.name === 'unjudged') return 'issue 48: not judged at this load';
  return `issue 48 in a ${s.name} spell: ${f2(s.ratioTarget)} or less in every ${each}, ${ratios.every((r) => r <= s.ratioTarget) ? 'ok' : 'MISSED'}`;
}
