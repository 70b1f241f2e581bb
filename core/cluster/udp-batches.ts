/** a batch is sent at once past this many bytes, so one message stays small */
const UDP_BATCH_BYTES = 64 * 1024;

interface UdpBatch {
  msgs: Uint8Array[];
  bytes: number;
  addresses: string[];
  ports: number[];
}

/**
 * A routed UDP listener's datagrams, gathered per worker (`T`: the primary's slot) for the rest of the event-loop
 * turn and sent as one message. Every datagram of a UDP terminal passes through the primary; one IPC message each
 * saturated the core at 250 terminals with 2 workers, which then read 35 % of what came (bench README, "UDP
 * terminals"). libuv reads up to 32 datagrams per readable event, so a turn holds many.
 */
export class UdpBatches<T> {
  private readonly pending = new Map<T, UdpBatch>();
  private scheduled = false;

  constructor(private readonly send: (to: T, m: { data: Uint8Array; sizes: Uint32Array; addresses: string[]; ports: Uint16Array }) => void) {}

  add(to: T, msg: Uint8Array, address: string, port: number): void {
    let b = this.pending.get(to);
    if (!b) {
      b = { msgs: [], bytes: 0, addresses: [], ports: [] };
      this.pending.set(to, b);
    }
    b.msgs.push(msg);
    b.bytes += msg.length;
    b.addresses.push(address);
    b.ports.push(port);
    if (b.bytes >= UDP_BATCH_BYTES) {
      this.pending.delete(to);
      this.flushOne(to, b);
    } else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    for (const [to, b] of this.pending) this.flushOne(to, b);
    this.pending.clear();
  }

  private flushOne(to: T, b: UdpBatch): void {
    this.send(to, {
      data: Buffer.concat(b.msgs, b.bytes),
      sizes: Uint32Array.from(b.msgs, (m) => m.length),
      addresses: b.addresses,
      ports: Uint16Array.from(b.ports),
    });
  }
}
