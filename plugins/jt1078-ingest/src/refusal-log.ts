/**
 * The warnings about links refused a stream (takeover.ts). A sender pushing a stream it may not publish does so with
 * every packet, and a UDP sender can be a new link per source port, so a line per packet, or even per link, would let
 * any peer flood the log. Each refused link gets one warning, then at most one per REFUSAL_RELOG_MS saying how many of
 * its packets were refused since; and at most REFUSAL_LINES_PER_WINDOW links get their first warning per window (the
 * next one written says how many links were left out). The link keeps its own count (TerminalLink.refusalLog), which
 * its close line reports.
 */
import type { Logger } from 'pino';
import type { TerminalLink } from './terminal-link';

/** a link still refused writes one more warning (with what it was refused since) this often at most */
const REFUSAL_RELOG_MS = 60_000;
/** links whose first refusal is logged, at most, per window (a UDP sender can be a new link per source port) */
const REFUSAL_LINES_PER_WINDOW = 20;
const REFUSAL_WINDOW_MS = 10_000;
const REFUSED_LINE = 'another link pushes this stream: refused';

/** What a refusal warning names besides the link. */
export interface Refusal {
  stream: string;
  why: string;
  /** the link publishing the stream, or the one whose terminal is away */
  publisher: string | undefined;
}

export class RefusalLog {
  private window = { start: -Infinity, lines: 0, notLogged: 0 };

  constructor(private readonly log: Logger) {}

  /** `link` was refused a stream at `now` (one packet). */
  note(link: TerminalLink, r: Refusal, now: number): void {
    const own = link.refusalLog;
    if (own.at < 0) {
      own.at = now;
      if (now - this.window.start >= REFUSAL_WINDOW_MS) this.window = { start: now, lines: 0, notLogged: this.window.notLogged };
      if (this.window.lines >= REFUSAL_LINES_PER_WINDOW) {
        this.window.notLogged++;
        own.notLogged++;
        return;
      }
      this.window.lines++;
      const linksNotLogged = this.window.notLogged;
      this.window.notLogged = 0;
      this.log.warn(
        {
          link: link.id,
          stream: r.stream,
          why: r.why,
          publisher: r.publisher,
          ...(linksNotLogged > 0 ? { linksNotLogged } : {}),
        },
        REFUSED_LINE,
      );
    } else if (now - own.at >= REFUSAL_RELOG_MS) {
      this.log.warn({ link: link.id, stream: r.stream, why: r.why, refusedSinceLastLine: own.notLogged + 1 }, 'another link still pushes this stream: refused');
      own.at = now;
      own.notLogged = 0;
    } else {
      own.notLogged++;
    }
  }
}
