/**
 * The recorder plugin in a real gateway (test kit: real HTTP, real files, a real catalog): real H.264 pushed
 * through the media bus is recorded, queried, downloaded (ranges too) and decoded by ffprobe; scoping,
 * traversal attempts, the closed notice, a write error, restart and retention; the server time zone and
 * retention by age on its interval; a full data disk (full-disk-suite.ts). One suite, run once per catalog backend: plugin.test.ts (SQLite) and
 * plugin-postgres.test.ts (PostgreSQL) each call recorderPluginSuite with their backend.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { Client } from 'pg';
import { ManualClock } from '../../../plugin-sdk';
import { audioUnit } from '../../../plugin-sdk';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import type { PostgresServer } from '../../../test/support/postgres';
import { recordPath, type RecordCatalog, type StoredRecord } from '../src/catalog';
import { openPostgresCatalog } from '../src/catalog-postgres';
import { openSqliteCatalog } from '../src/catalog-sqlite';
import { FRAME_MS, unitAt, type H264Clip } from './fixtures/h264-clip';
import { fullDiskSuite } from './full-disk-suite';
import {
  A,
  B,
  NORM_SIM,
  SIM,
  closeReq,
  notices,
  openRecorded,
  probeCtx,
  publisherFor,
  queryReq,
  recordClip,
  startGateway,
  testClip,
  utcText,
  type Harness,
} from './harness';
import { metricValue, probeStreams, probeVideo, rawRequest, sleep, waitFor } from './helpers';

/** The catalog one describe of the suite records into, from its first gateway start to its last. */
export interface SuiteCatalog {
  /** Recorder config keys that select this catalog; the same on every (re)start of the describe's gateway. */
  readonly recorder: Readonly<Record<string, unknown>>;
  /** Opens the very catalog the gateway writes, to read it directly (the caller closes it). */
  open(): Promise<RecordCatalog>;
}

export interface CatalogBackend {
  readonly name: 'SQLite' | 'PostgreSQL';
  /**
   * A fresh, empty catalog for one describe of the suite (called from its before()), whose gateway keeps its
   * data in dataDir. `label` is unique per describe: no two describes share a catalog.
   */
  fresh(label: string, dataDir: string): Promise<SuiteCatalog>;
}

/** The embedded catalog: the file records.sqlite in the plugin's store directory <dataDir>/recorder. */
export const sqliteBackend: CatalogBackend = {
  name: 'SQLite',
  async fresh(_label, dataDir) {
    return {
      recorder: {},
      async open() {
        return openSqliteCatalog({ dir: path.join(dataDir, 'recorder') });
      },
    };
  },
};

/**
 * PostgreSQL on `server()` (started by the caller): a database of its own per describe, created with an ICU
 * collation (en-US sorts differently from "C", which the catalog must not depend on). The recorder is given
 * only postgresUrl, so the table is the configured default, stored_av, which the reader names explicitly.
 */
export function postgresBackend(server: () => PostgresServer): CatalogBackend {
  return {
    name: 'PostgreSQL',
    async fresh(label) {
      const db = label.toLowerCase().replace(/[^a-z0-9_]/g, '_');
      const admin = new Client({ connectionString: server().connectionString });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${db} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`);
      } finally {
        await admin.end();
      }
      const url = server().urlFor(db);
      return {
        recorder: { postgresUrl: url },
        open: () => openPostgresCatalog({ connectionString: url, table: 'stored_av' }),
      };
    },
  };
}

let clip: H264Clip;

export function recorderPluginSuite(backend: CatalogBackend): void {
  const sqliteFile = (dataDir: string) => path.join(dataDir, 'recorder', 'records.sqlite');

  describe('recording, download, queries, scoping, restart and retention', function () {
    this.timeout(30_000);
    const h = {} as Harness;
    let scratch: string;
    let catalog: SuiteCatalog;
    const startGw = (over: Record<string, unknown> = {}) => startGateway(h.dataDir, { ...catalog.recorder, ...over });
    const readCatalog = async <T>(fn: (c: RecordCatalog) => Promise<T>): Promise<T> => {
      const c = await catalog.open();
      return fn(c).finally(() => c.close());
    };
    const rowOf = (appId: string, reqId: string): Promise<StoredRecord | null> => readCatalog((c) => c.getByReqId(appId, reqId));

    before(async () => {
      clip = testClip();
      assert.equal(clip.frames.length, 100);
      scratch = scratchDir(`recorder-plugin-${backend.name.toLowerCase()}`);
      h.dataDir = path.join(scratch, 'data');
      catalog = await backend.fresh('recorder_plugin_suite', h.dataDir);
      h.gw = await startGw();
    });
    after(async () => {
      await h.gw?.stop();
      fs.rmSync(scratch, { recursive: true, force: true });
    });
    beforeEach(() => {
      notices.length = 0;
    });

    let first: { reqId: string; av: any; file: string };

    it('records real H.264 into one FLV file that ffprobe decodes whole, timestamps from 0', async () => {
      // the publisher's timeline starts at 5 s: the file's must start at 0
      const reqId = await recordClip(h, A, { chanId: 1, frames: 100, startDts: 5000 });
      const [av] = await queryReq(h, A, reqId);
      assert.ok(av, 'the record is listed');
      const row = (await rowOf('A', reqId))!;
      assert.equal(row.state, 'done');
      assert.ok(row.endTm && row.endTm.getTime() >= row.reqTm.getTime());
      // the row above was read from this backend's catalog; the gateway keeps no other beside it
      assert.equal(fs.existsSync(sqliteFile(h.dataDir)), backend.name === 'SQLite', 'an embedded catalog file exactly when SQLite is the catalog');
      const expectedPath = recordPath(NORM_SIM, reqId, row.reqTm, 'UTC');
      assert.equal(av.path, expectedPath);
      assert.match(av.path, new RegExp(`^\\d{4}/\\d{2}/${NORM_SIM}/${reqId}\\.flv$`));
      const file = path.join(h.dataDir, 'records', ...av.path.split('/'));
      const size = fs.statSync(file).size;
      assert.deepEqual(
        { ...av, reqTm: undefined },
        {
          reqId,
          reqTm: undefined,
          appId: 'A',
          simNo: NORM_SIM,
          chan: 1,
          live: true,
          path: expectedPath,
          ext: 'flv',
          sz: size,
          url: `${h.gw.baseUrl}/strm/record/file/${expectedPath}`,
          mediaTyp: 'v',
        },
      );
      assert.match(av.reqTm, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);

      const flv = parseFlv(fs.readFileSync(file));
      const video = flv.tags.filter((t) => t.type === 9 && !t.sequenceHeader);
      assert.equal(video.length, 100, 'every pushed frame is a tag');
      assert.equal(video[0]!.timestamp, 0);
      assert.equal(video[0]!.keyframe, true, 'starts at a keyframe');
      assert.equal(video[99]!.timestamp, 99 * FRAME_MS);
      assert.equal(flv.tags.filter((t) => t.type === 8).length, 0, 'no audio was pushed');

      const p = probeVideo(file);
      assert.equal(p.stderr, '', 'decodes without errors');
      assert.deepEqual([p.codec, p.width, p.height, p.frames], ['h264', 320, 240, 100]);
      const pushedSec = (100 * FRAME_MS) / 1000;
      assert.ok(Math.abs(p.duration - pushedSec) <= pushedSec * 0.05, `duration ${p.duration} s within 5% of ${pushedSec} s`);
      first = { reqId, av, file };
    });

    it('downloads the file with Basic auth: whole, by ranges (206/416) and HEAD', async () => {
      const whole = fs.readFileSync(first.file);
      const get = (headers: Record<string, string> = {}, method = 'GET') => rawRequest(h.gw.baseUrl, method, new URL(first.av.url).pathname, A, headers);

      const full = await get();
      assert.equal(full.status, 200);
      assert.equal(full.headers['content-type'], 'video/x-flv');
      assert.equal(full.headers['accept-ranges'], 'bytes');
      assert.equal(Number(full.headers['content-length']), whole.length);
      assert.ok(full.body.equals(whole));
      const saved = path.join(scratch, 'download.flv');
      fs.writeFileSync(saved, full.body);
      assert.equal(probeVideo(saved).frames, 100);

      const head = await get({ range: 'bytes=0-99' });
      assert.equal(head.status, 206);
      assert.equal(head.headers['content-range'], `bytes 0-99/${whole.length}`);
      assert.ok(head.body.equals(whole.subarray(0, 100)));
      const tail = await get({ range: 'bytes=100-' });
      assert.equal(tail.status, 206);
      assert.equal(tail.headers['content-range'], `bytes 100-${whole.length - 1}/${whole.length}`);
      assert.ok(Buffer.concat([head.body, tail.body]).equals(whole), 'the two ranges make the file');
      // seeking: a range that starts at a keyframe tag in the middle holds exactly that tag onwards
      const mid = parseFlv(whole).tags.filter((t) => t.keyframe)[2]!;
      const seek = await get({ range: `bytes=${mid.offset}-` });
      assert.equal(seek.status, 206);
      assert.ok(seek.body.equals(whole.subarray(mid.offset)));
      const suffix = await get({ range: 'bytes=-50' });
      assert.ok(suffix.body.equals(whole.subarray(whole.length - 50)));

      const beyond = await get({ range: `bytes=${whole.length}-` });
      assert.equal(beyond.status, 416);
      assert.equal(beyond.headers['content-range'], `bytes */${whole.length}`);
      assert.equal(beyond.body.length, 0);

      const onlyHead = await get({}, 'HEAD');
      assert.equal(onlyHead.status, 200);
      assert.equal(Number(onlyHead.headers['content-length']), whole.length);
      assert.equal(onlyHead.body.length, 0);

      const noAuth = await rawRequest(h.gw.baseUrl, 'GET', new URL(first.av.url).pathname, null);
      assert.equal(noAuth.status, 401);
    });

    it('queries by reqId and by time range, paging across pages, narrowed by simNo; bad parameters answer -7', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(await recordClip(h, A, { chanId: 20 + i, frames: 26, simNo: i % 2 ? '013900139000' : SIM }));
        await sleep(5); // distinct reqTm milliseconds, so the order is by time, not by reqId
      }
      const all = [first.reqId, ...ids];
      const start = utcText(new Date(Date.now() - 60_000));
      const end = utcText(new Date(Date.now() + 60_000));
      const pages: string[][] = [];
      for (let page = 1; page <= 4; page++) {
        const r = await h.gw.api(
          'GET',
          `/strm/record?startTm=${encodeURIComponent(start)}&endTm=${encodeURIComponent(end)}&__page=${page}&__limit=2`,
          undefined,
          A,
        );
        assert.equal(r.json.errCode, 0);
        assert.equal(r.json.count, r.json.data.length);
        pages.push(r.json.data.map((x: { reqId: string }) => x.reqId));
      }
      assert.deepEqual(
        pages.map((p) => p.length),
        [2, 2, 2, 0],
      );
      assert.deepEqual(pages.flat(), all, 'pages in reqTm order, every record once');

      const bySim = await h.gw.api('GET', `/strm/record?startTm=${encodeURIComponent(start)}&simNo=13900139000&__limit=100`, undefined, A);
      assert.deepEqual(
        bySim.json.data.map((x: { reqId: string }) => x.reqId),
        [ids[1], ids[3]],
      );
      assert.ok(bySim.json.data.every((x: { sz: number; mediaTyp: string }) => x.sz > 0 && x.mediaTyp === 'v'));

      const isoRange = await h.gw.api('GET', `/strm/record?startTm=${new Date(Date.now() - 60_000).toISOString().slice(0, 19)}Z&appId=A`, undefined, A);
      assert.equal(isoRange.json.count, all.length);

      for (const [q, field] of [
        ['startTm=yesterday', 'startTm'],
        ['', 'startTm'],
        [`startTm=${encodeURIComponent(start)}&endTm=2000-01-01%2000:00:00`, 'endTm'],
        ['startTm=2020-01-01%2000:00:00&endTm=2020-06-01%2000:00:00', 'endTm'],
        [`startTm=${encodeURIComponent(start)}&__limit=0`, '__limit'],
        [`startTm=${encodeURIComponent(start)}&__page=x`, '__page'],
        ['reqId=a/b', 'reqId'],
      ] as const) {
        const r = await h.gw.api('GET', `/strm/record?${q}`, undefined, A);
        assert.equal(r.json.errCode, -7, q);
        assert.equal(r.json.message, `Invalid parameter \`${field}\`.`, q);
      }
      const unknown = await h.gw.api('GET', '/strm/record?reqId=no-such-request', undefined, A);
      assert.deepEqual([unknown.json.errCode, unknown.json.data, unknown.json.count], [0, [], 0]);
    });

    it("another application sees and downloads nothing of A's", async () => {
      assert.deepEqual(await queryReq(h, B, first.reqId), []);
      const narrowed = await h.gw.api('GET', `/strm/record?reqId=${first.reqId}&appId=A`, undefined, B);
      assert.deepEqual(narrowed.json.data, []);
      const range = await h.gw.api('GET', `/strm/record?startTm=${encodeURIComponent(utcText(new Date(Date.now() - 3_600_000)))}&__limit=2000`, undefined, B);
      assert.deepEqual(range.json.data, []);
      const dl = await rawRequest(h.gw.baseUrl, 'GET', new URL(first.av.url).pathname, B);
      assert.equal(dl.status, 404);
      assert.equal(JSON.parse(dl.body.toString()).errCode, -8);
      const headB = await rawRequest(h.gw.baseUrl, 'HEAD', new URL(first.av.url).pathname, B);
      assert.equal(headB.status, 404);

      // and B's own recording is B's alone
      const bReq = await recordClip(h, B, { chanId: 40, frames: 10 });
      const [bAv] = await queryReq(h, B, bReq);
      assert.equal(bAv.appId, 'B');
      assert.deepEqual(await queryReq(h, A, bReq), []);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', new URL(bAv.url).pathname, A)).status, 404);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', new URL(bAv.url).pathname, B)).status, 200);
    });

    it('every traversal attempt answers 404 without serving anything outside the store', async () => {
      // a file outside the store with a name a record could have
      fs.writeFileSync(path.join(h.dataDir, 'secret.flv'), 'FLV not for you');
      fs.writeFileSync(path.join(h.dataDir, 'records', 'loose.flv'), 'FLV not catalogued');
      const p = first.av.path as string;
      const [yyyy, mm, sim, name] = p.split('/');
      const attempts = [
        '../secret.flv',
        '../../secret.flv',
        '%2e%2e/secret.flv',
        '%2E%2E%2Fsecret.flv',
        '..%2fsecret.flv',
        '..%5csecret.flv',
        '..\\secret.flv',
        '%252e%252e/secret.flv',
        `${yyyy}/${mm}/${sim}/../../../../secret.flv`,
        `${yyyy}/${mm}/./${sim}/${name}`,
        `${yyyy}//${mm}/${sim}/${name}`,
        `/${p}`,
        `%2F${p}`,
        `${p}%00.flv`,
        `${p}/`,
        '../recorder/records.sqlite', // the SQLite catalog's file (absent with PostgreSQL: must answer the same)
        `${yyyy}/${mm}/${sim}/${name!.replace('.flv', '.sqlite')}`,
        'loose.flv',
        `${yyyy}/${mm}/${sim}`,
        `${yyyy}/${mm}/${sim}/..%2f${name}`,
        '',
      ];
      for (const a of attempts) {
        const r = await rawRequest(h.gw.baseUrl, 'GET', `/strm/record/file/${a}`, A);
        assert.equal(r.status, 404, a);
        assert.equal(JSON.parse(r.body.toString()).errCode, -8, a);
      }
      const raw = await rawRequest(h.gw.baseUrl, 'GET', '/strm/record/file/../../../etc/passwd', A);
      assert.equal(raw.status, 404);

      // a catalogued record whose file became a symlink out of the store, or whose folder did
      const victim = await recordClip(h, A, { chanId: 41, frames: 10 });
      const [vAv] = await queryReq(h, A, victim);
      const vFile = path.join(h.dataDir, 'records', ...vAv.path.split('/'));
      const urlPath = new URL(vAv.url).pathname;
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', urlPath, A)).status, 200);
      const kept = vFile + '.kept';
      fs.renameSync(vFile, kept);
      fs.symlinkSync(path.join(h.dataDir, 'secret.flv'), vFile);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', urlPath, A)).status, 404, 'file symlinked out of the store');
      fs.unlinkSync(vFile);
      const outside = path.join(scratch, 'outside', vAv.simNo);
      fs.mkdirSync(outside, { recursive: true });
      fs.copyFileSync(kept, path.join(outside, path.basename(vFile)));
      const simDir = path.dirname(vFile);
      fs.renameSync(simDir, simDir + '.real');
      fs.symlinkSync(outside, simDir);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', urlPath, A)).status, 404, 'folder symlinked out of the store');
      fs.unlinkSync(simDir);
      fs.renameSync(simDir + '.real', simDir);
      fs.renameSync(kept, vFile);
      assert.equal((await rawRequest(h.gw.baseUrl, 'GET', urlPath, A)).status, 200, 'restored');
    });

    it('an aborted download does not leak its file descriptor', async () => {
      // a big enough file that the transfer is still going when the client leaves
      fs.appendFileSync(first.file, Buffer.alloc(32 * 1024 * 1024));
      const openOnFile = () =>
        fs.readdirSync('/proc/self/fd').filter((fd) => {
          try {
            return fs.readlinkSync(`/proc/self/fd/${fd}`) === first.file;
          } catch {
            return false;
          }
        }).length;
      const active = async () => metricValue(await (await fetch(`${h.gw.baseUrl}/metrics`)).text(), 'gw_recorder_downloads_active');
      const u = new URL(first.av.url);
      for (let i = 0; i < 5; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = http.request(
            { host: u.hostname, port: u.port, path: u.pathname, headers: { authorization: 'Basic ' + Buffer.from(A).toString('base64') } },
            (res) => {
              assert.equal(res.statusCode, 200);
              res.once('data', () => {
                req.destroy();
                resolve();
              });
            },
          );
          req.on('error', (e: NodeJS.ErrnoException) => (e.message.includes('socket hang up') || e.code === 'ECONNRESET' ? resolve() : reject(e)));
          req.end();
        });
      }
      // the download ends only once its file stream has closed; at that moment its fd must be gone (not left to GC)
      await waitFor(async () => (await active()) === 0, 'the aborted downloads to end');
      assert.equal(openOnFile(), 0, 'no descriptor left open on the file');
      fs.truncateSync(first.file, first.av.sz);
    });

    it('the closed notice of a recorded request carries playedAvDumpUrl; others do not', async () => {
      const rec = await recordClip(h, A, { chanId: 50, frames: 10 });
      const [av] = await queryReq(h, A, rec);
      const closed = notices.find((n) => n.payload.reqId === rec && n.payload.act === 'closed');
      assert.ok(closed);
      assert.equal(closed.payload.playedAvDumpUrl, av.url);

      const plain = await h.gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: SIM, chanId: 51, keepIntv: 600 }, A);
      assert.equal(plain.json.data[0].recording, undefined, 'not recording: not said');
      const plainId = plain.json.data[0].reqId;
      await h.gw.api('POST', '/strm/close', { reqIds: [plainId] }, A);
      const plainClosed = notices.find((n) => n.payload.reqId === plainId);
      assert.ok(plainClosed && !('playedAvDumpUrl' in plainClosed.payload));

      // recorded, but no media ever came: nothing stored, nothing listed, no url
      const empty = await openRecorded(h, A, { chanId: 52 });
      await closeReq(h, A, empty);
      const emptyClosed = notices.find((n) => n.payload.reqId === empty && n.payload.act !== 'ready');
      assert.ok(emptyClosed && emptyClosed.payload.playedAvDumpUrl === undefined);
      assert.deepEqual(await queryReq(h, A, empty), []);
    });

    it('record is refused with any fmt but 0 (-7 naming record)', async () => {
      const r = await h.gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: SIM, chanId: 60, fmt: 1, record: true }, A);
      assert.equal(r.json.errCode, -7);
      assert.match(r.json.message, /`record`/);
    });

    it('a write error stops the recording (row failed, metric, log) while the live stream goes on', async () => {
      const blockedSim = '13700137000';
      // a regular file where the recording's folder has to be: folder creation fails
      const dir = path.dirname(recordPath(blockedSim, 'x', new Date(), 'UTC'));
      fs.mkdirSync(path.join(h.dataDir, 'records', path.dirname(dir)), { recursive: true });
      fs.writeFileSync(path.join(h.dataDir, 'records', dir), 'in the way');

      const reqId = await openRecorded(h, A, { simNo: blockedSim, chanId: 3 });
      const { pub, stream } = publisherFor(blockedSim, 3);
      let live = 0;
      const sub = stream.media.subscribe({
        write: () => {
          live++;
        },
      });
      for (let i = 0; i < 50; i++) pub.push(unitAt(clip, i));
      await waitFor(() => h.gw.logs.some((l) => l.reqId === reqId && l.msg === 'recording stopped by a write error; live play goes on'), 'the write error');
      for (let i = 50; i < 100; i++) pub.push(unitAt(clip, i));
      assert.equal(live, 100, 'the live subscriber got every frame, before and after the error');
      const status = await h.gw.api('GET', `/strm/status?reqId=${reqId}`, undefined, A);
      assert.equal(status.json.count, 1, 'the request is still open');
      assert.equal(status.json.data[0].flags.recording, false, 'status shows the recording stopped');
      assert.match(status.json.data[0].flags.recordingError, /^E[A-Z]+/);
      sub.close();
      await closeReq(h, A, reqId);

      const row = (await rowOf('A', reqId))!;
      assert.equal(row.state, 'failed');
      assert.equal(row.sz, 0, 'nothing was kept');
      const code = /^(E[A-Z]+)/.exec(row.error ?? '')?.[1];
      assert.ok(code === 'ENOTDIR' || code === 'EEXIST', `error text names the cause: ${row.error}`);
      const metrics = await (await fetch(`${h.gw.baseUrl}/metrics`)).text();
      assert.equal(metricValue(metrics, 'gw_recorder_write_errors_total', { code: code! }), 1);
      assert.ok(metricValue(metrics, 'gw_recorder_bytes_written_total')! >= first.av.sz);
      assert.equal(metricValue(metrics, 'gw_recorder_recordings_active'), 0);
      assert.equal(metricValue(metrics, 'gw_recorder_recordings_ended_total', { outcome: 'failed' }), 1);
    });

    it('the size in the catalog follows a recording in progress, and its file is downloadable meanwhile', async () => {
      const reqId = await openRecorded(h, A, { chanId: 70 });
      const { pub } = publisherFor(NORM_SIM, 70);
      for (let i = 0; i < 60; i++) pub.push(unitAt(clip, i));
      const [av] = await waitFor(async () => {
        const d = await queryReq(h, A, reqId);
        return d[0]?.sz > 0 ? d : undefined;
      }, 'a size update');
      const partial = await rawRequest(h.gw.baseUrl, 'GET', new URL(av.url).pathname, A);
      assert.equal(partial.status, 200);
      assert.ok(partial.body.length >= av.sz);
      assert.ok(parseFlv(partial.body).tags.length > 0, 'what is there already parses as FLV');
      for (let i = 60; i < 100; i++) pub.push(unitAt(clip, i));
      await closeReq(h, A, reqId);
      const [done] = await queryReq(h, A, reqId);
      assert.ok(done.sz > av.sz);
      assert.equal(done.sz, fs.statSync(path.join(h.dataDir, 'records', ...done.path.split('/'))).size);
    });

    it('mediaTyp says what was recorded: video with G.711 audio is av, audio alone is a', async () => {
      const alaw = (i: number) => audioUnit({ codec: 'g711a', dts: i * 40, timescale: 8000, duration: 320, payload: Buffer.alloc(320, 0xd5) });
      const av = await openRecorded(h, A, { chanId: 80 });
      const { pub } = publisherFor(NORM_SIM, 80);
      pub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
      for (let i = 0; i < 50; i++) {
        pub.push(unitAt(clip, i));
        pub.push(alaw(i));
      }
      await closeReq(h, A, av);
      const [avRec] = await queryReq(h, A, av);
      assert.equal(avRec.mediaTyp, 'av');
      const avFile = path.join(h.dataDir, 'records', ...avRec.path.split('/'));
      assert.deepEqual(probeStreams(avFile).sort(), ['audio:pcm_alaw', 'video:h264']);

      // listening only (dataTyp 3): no video is expected, so the first audio unit starts the file
      const a = await openRecorded(h, A, { chanId: 81, dataTyp: 3 });
      const s = probeCtx().sessions.findStream(NORM_SIM, 81, 'live')!;
      const apub = s.media.attachPublisher();
      apub.setTrack({ kind: 'audio', codec: 'g711a', sampleRate: 8000, channels: 1 });
      for (let i = 0; i < 100; i++) apub.push(alaw(i));
      await closeReq(h, A, a);
      const [aRec] = await queryReq(h, A, a);
      assert.equal(aRec.mediaTyp, 'a');
      const aFile = path.join(h.dataDir, 'records', ...aRec.path.split('/'));
      assert.deepEqual(probeStreams(aFile), ['audio:pcm_alaw']);
      assert.equal(parseFlv(fs.readFileSync(aFile)).tags.filter((t) => t.type === 8).length, 100);
    });

    it('a restart (same data directory) keeps the catalog and the files', async () => {
      const start = encodeURIComponent(utcText(new Date(Date.now() - 3_600_000)));
      const listA = async () => (await h.gw.api('GET', `/strm/record?startTm=${start}&__limit=2000`, undefined, A)).json.data as any[];
      const before = await listA();
      assert.ok(before.length >= 8);
      await h.gw.stop();
      h.gw = await startGw();
      const after = await listA();
      const strip = (l: any[]) => l.map((x) => ({ ...x, url: new URL(x.url).pathname }));
      assert.deepEqual(strip(after), strip(before));
      const dl = await rawRequest(h.gw.baseUrl, 'GET', new URL(after[0].url).pathname, A);
      assert.equal(dl.status, 200);
      assert.equal(dl.body.length, after[0].sz);
    });

    it('stopping the gateway mid-recording finishes the file and its row', async () => {
      const reqId = await openRecorded(h, A, { chanId: 90 });
      const { pub } = publisherFor(NORM_SIM, 90);
      for (let i = 0; i < 30; i++) pub.push(unitAt(clip, i));
      await h.gw.stop();
      const row = (await rowOf('A', reqId))!;
      assert.equal(row.state, 'done');
      const file = path.join(h.dataDir, 'records', ...row.path.split('/'));
      assert.equal(row.sz, fs.statSync(file).size);
      assert.equal(parseFlv(fs.readFileSync(file)).tags.filter((t) => t.type === 9 && !t.sequenceHeader).length, 30);
      h.gw = await startGw();
      assert.equal(
        h.gw.logs.some((l) => l.msg === 'closed a recording left unfinished by an unclean stop'),
        false,
        'nothing to recover',
      );
    });

    it('retention at start removes the oldest records, files and rows together, down to maxTotalBytes', async () => {
      await h.gw.stop();
      const rows = await readCatalog((c) => c.oldest(10_000));
      const total = rows.reduce((n, r) => n + r.sz, 0);
      // total - 1 bytes allowed: the oldest rows go until one with bytes has gone
      const expectGone: StoredRecord[] = [];
      for (const r of rows) {
        expectGone.push(r);
        if (r.sz > 0) break;
      }
      h.gw = await startGw({ maxTotalBytes: total - 1 });
      const remaining = await readCatalog((c) => c.oldest(10_000));
      assert.deepEqual(
        remaining.map((r) => r.reqId),
        rows.slice(expectGone.length).map((r) => r.reqId),
      );
      for (const r of expectGone) assert.equal(fs.existsSync(path.join(h.dataDir, 'records', ...r.path.split('/'))), false, r.path);
      for (const r of remaining.filter((x) => x.sz > 0)) assert.ok(fs.existsSync(path.join(h.dataDir, 'records', ...r.path.split('/'))), r.path);
      const metrics = await (await fetch(`${h.gw.baseUrl}/metrics`)).text();
      assert.equal(metricValue(metrics, 'gw_recorder_retention_removed_total'), expectGone.length);
    });
  });

  describe('server time zone and retention by age on its interval (manual clock)', function () {
    this.timeout(30_000);
    const h = {} as Harness;
    let scratch: string;
    let clock: ManualClock;

    before(async () => {
      clip = testClip();
      scratch = scratchDir(`recorder-clock-${backend.name.toLowerCase()}`);
      h.dataDir = path.join(scratch, 'data');
      // 20:00 UTC on 31 December is already 04:00 on 1 January in Shanghai
      clock = new ManualClock(Date.UTC(2025, 11, 31, 20, 0, 0));
      const catalog = await backend.fresh('recorder_plugin_clock', h.dataDir);
      h.gw = await startGateway(h.dataDir, { ...catalog.recorder, timeZone: 'Asia/Shanghai', maxAgeDays: 1, retentionIntervalSec: 600 }, clock);
    });
    after(async () => {
      await h.gw?.stop();
      fs.rmSync(scratch, { recursive: true, force: true });
    });

    it('paths, reqTm and query times use the configured zone; a record older than maxAgeDays goes at the next pass', async () => {
      const reqId = await recordClip(h, A, { chanId: 1, frames: 30 });
      const [av] = await queryReq(h, A, reqId);
      assert.equal(fs.existsSync(sqliteFile(h.dataDir)), backend.name === 'SQLite', 'an embedded catalog file exactly when SQLite is the catalog');
      assert.equal(av.path, `2026/01/${NORM_SIM}/${reqId}.flv`);
      assert.equal(av.reqTm, '2026-01-01T04:00:00+08:00');
      const q = async (s: string, e: string) =>
        (await h.gw.api('GET', `/strm/record?startTm=${encodeURIComponent(s)}&endTm=${encodeURIComponent(e)}`, undefined, A)).json.data.length;
      assert.equal(await q('2026-01-01 00:00:00', '2026-01-01 23:59:59'), 1);
      assert.equal(await q('2025-12-31 00:00:00', '2025-12-31 23:59:59'), 0);
      assert.equal(await q('2025-12-31T20:00:00Z', '2025-12-31T20:00:00Z'), 1, 'explicit UTC');

      const file = path.join(h.dataDir, 'records', ...av.path.split('/'));
      assert.ok(fs.existsSync(file));
      // 23 h later: still young enough, however often retention ran
      for (let hour = 0; hour < 23; hour++) clock.advance(3_600_000);
      await sleep(100);
      assert.ok(fs.existsSync(file), 'kept while younger than a day');
      assert.equal((await queryReq(h, A, reqId)).length, 1);
      await waitFor(
        async () => {
          clock.advance(600_000);
          await sleep(20);
          return !fs.existsSync(file) && (await queryReq(h, A, reqId)).length === 0;
        },
        'retention by age',
        15_000,
      );
      assert.ok(clock.now() - Date.UTC(2025, 11, 31, 20) > 86_400_000, 'not before a day had passed');
    });
  });

  fullDiskSuite(backend);
}
