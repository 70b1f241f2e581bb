/**
 * The routes of record files: `GET|HEAD /strm/record/file/{path}[?format=flv|mp4][&audio=aac|as-is]` with the API's
 * Basic credentials, `GET /strm/record/link?reqId=…[&format=…][&audio=…]` (a signed link to the same file) and
 * `GET|HEAD /strm/record/signed/{path}?format[&audio]&app&exp&sig` (no credentials: the link's signature stands for
 * them). `format` and `audio` are not signed: they choose the form of the one file the signature grants, and the
 * holder of a link may have it in any form (as the FLV's owner may), so signing them would protect nothing.
 */
import { ErrCode, GatewayError, invalidParam, type PluginContext } from '../../../plugin-sdk';
import { recordFileHandler, serveRecordFile, SIGNED_PREFIX, type FileRouteOptions } from './file-route';
import { G711Transcoder } from './g711-aac';
import { Mp4LayoutCache, recordAudio, recordFormat } from './mp4-route';
import { REQ_ID_PATTERN } from './query-params';
import { decodeStoredPath } from './safe-path';
import { LinkSigner } from './signed-link';

export type RecordFileRouteOptions = Omit<FileRouteOptions, 'mp4Cache' | 'log'>;

export async function registerRecordFileRoutes(
  ctx: PluginContext<unknown>,
  o: RecordFileRouteOptions,
): Promise<{ mp4Cache: Mp4LayoutCache; close(): Promise<void> }> {
  // G.711 as AAC (audio=aac) is encoded in a worker thread started when first needed
  const transcoder = new G711Transcoder(ctx.log);
  const mp4Cache = new Mp4LayoutCache(32, 64 * 1024 * 1024, () => ctx.clock.now(), transcoder);
  const opts: FileRouteOptions = { ...o, log: ctx.log, mp4Cache };
  ctx.routes.raw('GET', '/strm/record/file/*', recordFileHandler(opts), { auth: 'api' });

  const signer = await LinkSigner.open(ctx.stores.keyv('recorder'), ctx.log, () => ctx.clock.now());
  ctx.routes.get(
    '/strm/record/link',
    async (req) => {
      const reqId = req.query.get('reqId') ?? '';
      if (!REQ_ID_PATTERN.test(reqId)) throw invalidParam('reqId');
      const format = req.query.get('format') ?? 'mp4';
      if (format !== 'mp4' && format !== 'flv') throw invalidParam('format', 'Use `flv` or `mp4`.');
      const audio = req.query.get('audio') ?? undefined;
      if (audio !== undefined && audio !== 'aac' && audio !== 'as-is') throw invalidParam('audio', 'Use `aac` or `as-is`.');
      const catalog = o.catalog();
      if (!catalog) throw new GatewayError(ErrCode.EXECUTION_ERROR, 'The record catalog is not available.');
      const rec = await catalog.getByReqId(req.app!.appId, reqId);
      if (!rec) throw new GatewayError(ErrCode.RECORD_NOT_FOUND, 'Not found.');
      return { data: [signer.link(rec.apiBase ?? o.apiBase, rec.appId, rec.path, format, audio)] };
    },
    { auth: 'api' },
  );

  ctx.routes.raw(
    'GET',
    `${SIGNED_PREFIX}*`,
    async (req, res) => {
      const format = recordFormat(req.query);
      const audio = recordAudio(req.query);
      // the link first: without a valid one nothing is looked up (links are made for valid paths only, so a refused
      // path cannot carry one)
      const rel = decodeStoredPath(req.rest);
      const appId = await signer.verify(req.query, rel ?? `\0${req.rest}`);
      await serveRecordFile(opts, req, res, appId, format, SIGNED_PREFIX, audio);
    },
    { auth: 'none' },
  );
  return { mp4Cache, close: () => transcoder.close() };
}
