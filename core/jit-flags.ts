/**
 * How far V8's optimising compiler inlines, set at run time (gateway.wideInlining).
 *
 * A frame's way through the gateway is a chain of some twenty small calls across modules: the socket's read, the
 * parser, the reorderer, the reassembler, the stream assembler, the bus stream, its formats, each reader, the player,
 * the socket's write. V8's default budgets (a callee of up to 460 bytes of bytecode, 920 inlined into one function in
 * all) stop TurboFan a few calls deep, so the rest of the chain stays calls, each with its checks and its frame.
 * Twice the size for one callee and three times the total let it flatten more of the chain. Measured with `paired`
 * (test/bench/README.md, 500 terminals x 1 Mbit/s, both gateways on one core through the same window, 6 pairs):
 * 0.978 of the CPU, for a few MB more RSS (more optimised code).
 *
 * Unlike the GC's threads (gc-flags.ts), TurboFan reads these at every compilation, so a process sets them once it
 * has booted, before media makes its code hot; test/core/jit-flags.test.ts checks that they take effect that way.
 */
import * as v8 from 'node:v8';

/** V8's own values are 460 and 920 (node 20, V8 11.3) */
export const WIDE_INLINING_FLAGS = ['--max-inlined-bytecode-size=920', '--max-inlined-bytecode-size-cumulative=2760'];

export function setWideInlining(): void {
  for (const f of WIDE_INLINING_FLAGS) v8.setFlagsFromString(f);
}
