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

/** What `countFromFirstWrite` watches: the reads, once a player's first unit came, and how to put things back. */
export interface FirstWriteWatch {
  /** undefined until a unit reached a player whose socket `socketOf` named */
  readonly reads: StateReads | undefined;
  /** puts the class's write back, and the socket's state (call it in afterEach too: a failed test leaves neither) */
  restore(): void;
}

/**
 * Counts reads of a player's socket's Writable state from its first unit (its start) on: `proto.write` is wrapped
 * until `restore`, and the first call for which `socketOf` names a socket puts that socket behind the counting proxy.
 */
export function countFromFirstWrite<P extends { write(...args: never[]): unknown }>(proto: P, socketOf: (player: P) => unknown): FirstWriteWatch {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- put back as it was, and called with its own this
  const write = proto.write;
  let reads: StateReads | undefined;
  proto.write = function (this: P, ...args: never[]): unknown {
    if (reads === undefined) {
      const sock = socketOf(this);
      if (sock !== undefined) reads = countStateReads(sock);
    }
    return write.apply(this, args);
  };
  return {
    get reads() {
      return reads;
    },
    restore: () => {
      proto.write = write;
      reads?.restore();
    },
  };
}
