/**
 * Whether every terminal of a run stayed connected, and when one did not, what took it: the gateway closing it
 * (its socket saw the far end close), the kernel's accept queue overflowing (the listen counters of
 * /proc/net/netstat moved while the terminals connected), or the gateway never counting a link that this side
 * holds open. A round of issue 48 lost 63 of 500 terminals and said nothing; a run now names it, and its target
 * line fails.
 */
import * as fs from 'node:fs';
import type { Socket } from 'node:net';

/** the TcpExt counters a full accept queue moves: SYNs or handshakes dropped because the queue held its backlog */
const LISTEN_COUNTERS = ['ListenOverflows', 'ListenDrops'] as const;

export type ListenCounters = Record<(typeof LISTEN_COUNTERS)[number], number>;

/** the machine's listen counters (all sockets, all processes); undefined off Linux */
export function listenCounters(read = () => fs.readFileSync('/proc/net/netstat', 'utf8')): ListenCounters | undefined {
  let text: string;
  try {
    text = read();
  } catch {
    return undefined;
  }
  const lines = text.split('\n').filter((l) => l.startsWith('TcpExt:'));
  if (lines.length < 2) return undefined;
  const names = lines[0].trim().split(/\s+/);
  const values = lines[1].trim().split(/\s+/);
  const out = {} as ListenCounters;
  for (const k of LISTEN_COUNTERS) {
    const at = names.indexOf(k);
    if (at < 0) return undefined;
    out[k] = Number(values[at]);
  }
  return out;
}

export interface CensusFigures {
  terminals: number;
  /** terminals whose link the gateway counts (its links gauge); undefined when it has none (the floor) */
  counted: number | undefined;
  /** terminal sockets the far end closed, with when (s after the opens began) */
  closedByGateway: number;
  firstClosedS: number | undefined;
  /** accept-queue drops on the machine while the terminals connected */
  listenDrops: number | undefined;
}

export class LinkCensus {
  private readonly closedAt: number[] = [];
  private readonly before = listenCounters();
  private after: ListenCounters | undefined;

  constructor(private readonly openedAt: number) {}

  /** a terminal's socket: the bench closes none before its figures are taken, so a close is the gateway's */
  watch(sock: Socket): void {
    sock.once('close', () => this.closedAt.push((performance.now() - this.openedAt) / 1000));
  }

  /** the opens are done: the listen counters' second reading */
  opened(): void {
    this.after = listenCounters();
  }

  figures(terminals: number, counted: number | undefined): CensusFigures {
    const drops =
      this.before && this.after ? this.after.ListenOverflows - this.before.ListenOverflows + (this.after.ListenDrops - this.before.ListenDrops) : undefined;
    return {
      terminals,
      counted,
      closedByGateway: this.closedAt.length,
      firstClosedS: this.closedAt.length > 0 ? Math.min(...this.closedAt) : undefined,
      listenDrops: drops,
    };
  }
}

/** every terminal connected and counted */
export function allConnected(c: CensusFigures): boolean {
  return c.closedByGateway === 0 && (c.counted === undefined || c.counted === c.terminals);
}

/**
 * The line a run prints when terminals are missing, by cause; `logLines` are the gateway log's warnings and errors
 * (the bench's gateway logs at warn), the first of which usually names the cause.
 */
export function censusWarning(c: CensusFigures, logLines: readonly string[]): string | undefined {
  if (allConnected(c)) return undefined;
  const missing = c.counted === undefined ? c.closedByGateway : c.terminals - c.counted;
  const causes: string[] = [];
  if (c.closedByGateway > 0) causes.push(`${c.closedByGateway} closed by the gateway (the first ${c.firstClosedS?.toFixed(1)} s after the opens began)`);
  const unexplained = missing - c.closedByGateway;
  if (unexplained > 0)
    causes.push(
      `${unexplained} open here but not counted by the gateway` +
        (c.listenDrops ? ` (the kernel dropped ${c.listenDrops} handshakes on full accept queues while they connected)` : ''),
    );
  const log = logLines.length > 0 ? `; the gateway's log: ${logLines.slice(0, 3).join(' | ')}` : "; nothing in the gateway's log at warn";
  return `  WARNING: ${missing} of ${c.terminals} terminals not connected at the window's end: ${causes.join(', ')}${log}`;
}

/** the messages of a pino log's warnings and errors, each once, with how often it came */
export function logWarnings(text: string): string[] {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let rec: { level?: number; msg?: string; plugin?: string };
    try {
      rec = JSON.parse(line) as typeof rec;
    } catch {
      continue;
    }
    if ((rec.level ?? 0) < 40 || !rec.msg) continue;
    const key = rec.plugin ? `${rec.plugin}: ${rec.msg}` : rec.msg;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([msg, n]) => (n > 1 ? `${msg} (x${n})` : msg));
}
