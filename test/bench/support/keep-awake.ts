/**
 * The load generator kept runnable: a setImmediate loop, so its event loop polls without ever sleeping.
 *
 * Why: the players run on this machine, in this process. A player's socket that receives while the process sleeps in
 * epoll_wait has the kernel wake it from inside the gateway's writev, across cores: an inter-processor interrupt,
 * ~13 us of the gateway's core each on this (virtual) machine, and 3,215 of them a second at 350 terminals. How many
 * writes find it asleep depends on the server's own speed (a write that lands after the generator's burst does), so
 * the cost fell on the gateway and hardly on the floor, and players on other hosts cost no such wake-up at all.
 * Spinning, the process reads 100 % of its core: whether it keeps up shows in its event-loop delay instead.
 */
export function keepAwake(): () => void {
  let running = true;
  let next: NodeJS.Immediate | undefined;
  const spin = (): void => {
    if (running) next = setImmediate(spin);
  };
  next = setImmediate(spin);
  return () => {
    running = false;
    if (next) clearImmediate(next);
  };
}

/** --idle-client's lines for a bench's usage */
export const IDLE_CLIENT_USAGE = `  --idle-client     the load generator sleeps between events. By default it spins: with players on this machine a
                    sleeping one made many of the gateway's writes wake it across cores (~13 us of core 0 each), a
                    cost players on other hosts never cause (see test/bench/support/keep-awake.ts)`;
