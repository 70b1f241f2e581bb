/**
 * Counts reads of a socket's Writable state, for tests that a unit's path reads none of it (plugin-sdk
 * WritableAccount says why that matters): the state is put behind a counting proxy until `restore`.
 */
export interface StateReads {
  /** reads since the proxy went in */
  readonly count: number;
  restore(): void;
}

export function countStateReads(socket: unknown): StateReads {
  const s = socket as { _writableState: object };
  const state = s._writableState;
  let count = 0;
  s._writableState = new Proxy(state, {
    get(t, k) {
      count++;
      return Reflect.get(t, k) as unknown;
    },
  });
  return {
    get count() {
      return count;
    },
    restore: () => {
      s._writableState = state;
    },
  };
}
