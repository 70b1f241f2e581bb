/**
 * The plugins that serve sessions, as they registered: ingests (who receives a channel's media), outputs (who makes
 * play URLs, by fmt and scheme), the talk provider, the presence provider and the open guards. An open is checked
 * against what is here (a source with no ingest, or an fmt and scheme no output serves, is refused), and a request's
 * URLs are made here: its output's play URL first, then those of outputs without a fmt and the talk URLs, which are
 * extras: one that fails to make its URL is logged and left out rather than failing the open.
 */
import type { Logger } from 'pino';
import type { IngestProvider, OpenGuard, OpenParams, OutputProvider, PresenceProvider, TalkProvider } from '../../plugin-sdk/sessions';
import type { RequestState } from './session-state';

export class SessionProviders {
  private readonly ingests: IngestProvider[] = [];
  /** by fmt: one or more outputs, each serving its own schemes (fmt 0: flv-out's http/ws, rtmp's rtmp) */
  private readonly outputs = new Map<number, OutputProvider[]>();
  /** outputs without a fmt: their URLs go into `urls` of every open */
  private readonly extraOutputs: OutputProvider[] = [];
  private talk: TalkProvider | undefined;
  private presence: PresenceProvider | undefined;
  /** run on every open after its fields are checked, in the order they were added */
  readonly guards: OpenGuard[] = [];

  constructor(private readonly log: Logger) {}

  registerIngest(p: IngestProvider): void {
    this.ingests.push(p);
  }

  registerOutput(p: OutputProvider): void {
    if (p.schemes.length === 0) throw new Error(`output ${p.name}: give at least one scheme`);
    if (p.fmt === undefined) {
      if (this.extraOutputs.some((o) => o.name === p.name)) throw new Error(`output ${p.name} is registered already`);
      this.extraOutputs.push(p);
      return;
    }
    const same = this.outputs.get(p.fmt) ?? [];
    const taken = same.find((o) => o.schemes.some((x) => p.schemes.includes(x)));
    if (taken) throw new Error(`fmt ${p.fmt}: ${taken.name} serves ${taken.schemes.join(', ')} already`);
    this.outputs.set(p.fmt, [...same, p]);
  }

  registerTalk(p: TalkProvider): void {
    if (this.talk) throw new Error(`talk provider ${p.name}: ${this.talk.name} is registered already`);
    this.talk = p;
  }

  setPresenceProvider(p: PresenceProvider): void {
    this.presence = p;
  }

  hasIngestFor(source: IngestProvider['source']): boolean {
    return this.ingests.some((i) => i.source === source);
  }

  /** the schemes the outputs of `fmt` serve; undefined when no output serves it */
  outputSchemes(fmt: number): string[] | undefined {
    return this.outputs.get(fmt)?.flatMap((o) => o.schemes);
  }

  /** the presence provider says the terminal is offline (without one, nothing is) */
  offline(normSim: string): boolean {
    return this.presence?.presence(normSim) === 'offline';
  }

  /** the ingest and output of a checked open (validation made sure both exist) */
  servingOf(params: OpenParams): { ingest: IngestProvider; output: OutputProvider } {
    const ingest = this.ingests.find((i) => i.source === (params.rtspSrc ? 'rtsp' : 'terminal'))!;
    const output = this.outputs.get(params.fmt)!.find((o) => o.schemes.includes(params.scheme!))!;
    return { ingest, output };
  }

  /** Sets the request's play URL from `output`, and its extra output URLs and talk URLs. */
  makeUrls(req: RequestState, output: OutputProvider, streamName: string, host: string, params: OpenParams): void {
    const token = params.user.token;
    req.playUrl = output.playUrl({ streamName, reqId: req.reqId, token, scheme: params.scheme!, host, subFmt: params.subFmt });
    for (const o of this.extraOutputs) {
      try {
        (req.urls ??= {})[o.name] = o.playUrl({ streamName, reqId: req.reqId, token, scheme: o.schemes[0], host });
      } catch (err) {
        this.log.error({ err, output: o.name }, 'output failed to make its URL; left out of the open result');
      }
    }
    if (this.talk && params.typ === 'live' && params.dataTyp === 2) {
      try {
        req.talk = this.talk.talkUrls({ streamName, reqId: req.reqId, token, host, params });
      } catch (err) {
        this.log.error({ err, talk: this.talk.name }, 'talk provider failed to make its URLs; left out of the open result');
      }
    }
  }
}
