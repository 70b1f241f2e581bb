/**
 * A full data disk (a real tmpfs that fills, see small-fs.ts), run once per catalog backend from plugin-suite.ts:
 * the gateway starts and plays live with the disk full, the recorder comes up degraded and says so (metric, open
 * result, status, notices), records again by itself once space is back; a recording that finds the disk full
 * mid-file has retention make room and goes on, or stops cleanly with a row whose size is its file's.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { parseFlv } from '../../../test/support/flv-reader';
import { scratchDir } from '../../../test/support/paths';
import type { RecordCatalog, StoredRecord } from '../src/catalog';
import { unitAt } from './fixtures/h264-clip';
import { A, APPS, NORM_SIM, SIM, keepApiBase, notices, probeDef, publisherFor, sameNode, testClip } from './harness';
import { metricValue, probeVideo, waitFor } from './helpers';
import type { CatalogBackend, SuiteCatalog } from './plugin-suite';
import { mountSmallFs, type SmallFs } from './small-fs';

const DISK_BYTES = 2 * 1024 * 1024;

interface Ctx {
  gw: TestGateway;
  dataDir: string;
  small: SmallFs;
  catalog: SuiteCatalog;
}

/** The recorder with flv-out for real live plays, on a data directory that can fill. */
async function startGw(c: Pick<Ctx, 'dataDir' | 'catalog'>, recorder: Record<string, unknown> = {}): Promise<TestGateway> {
  const stub = stubMediaPlugin({ fmts: [] });
  // the same apiBase at every restart: as a real node (see sameNode)
  return keepApiBase(
    c.dataDir,
    await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'flv-out', config: { schemes: ['http', 'ws'] } },
        { name: 'probe', def: probeDef },
        {
          name: 'recorder',
          config: {
            timeZone: 'UTC',
            sizeUpdateSec: 1,
            degradedRetrySec: 1,
            resumeFreeBytes: 256 * 1024,
            // as by default: nothing but the disk-full path may run retention or recovery during a test
            retentionIntervalSec: 3600,
            ...c.catalog.recorder,
            ...recorder,
          },
        },
      ],
      gateway: { dataDir: c.dataDir, applications: APPS, ...sameNode(c.dataDir) },
      captureLogs: true,
    }),
  );
}

async function metric(gw: TestGateway, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  return metricValue(await (await fetch(`${gw.baseUrl}/metrics`)).text(), name, labels);
}

async function open(gw: TestGateway, chanId: number, over: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const r = await gw.api(
    'POST',
    '/strm/open',
    { user: { token: 'tok' }, typ: 'live', simNo: SIM, chanId, keepIntv: 600, scheme: 'http', record: true, ...over },
    A,
  );
  assert.equal(r.json.errCode, 0, `a record open is never refused for a full disk: ${JSON.stringify(r.json)}`);
  return r.json.data[0];
}

async function flags(gw: TestGateway, reqId: string): Promise<Record<string, unknown>> {
  const s = await gw.api('GET', `/strm/status?reqId=${reqId}`, undefined, A);
  assert.equal(s.json.count, 1, `request ${reqId} is open`);
  return s.json.data[0].flags;
}

function logged(gw: TestGateway, msg: string, reqId?: string): Record<string, unknown> | undefined {
  return gw.logs.find((l) => l.msg === msg && (reqId === undefined || l.reqId === reqId));
}

async function close(gw: TestGateway, reqId: string, recorded: boolean): Promise<void> {
  const c = await gw.api('POST', '/strm/close', { reqIds: [reqId] }, A);
  assert.deepEqual(c.json.data, [{ reqId, closed: true }]);
  if (recorded) await waitFor(() => gw.logs.some((l) => l.reqId === reqId && l.msg === 'recording ended'), `the end of recording ${reqId}`);
}

/** Plays the request's HTTP-FLV URL while `push` publishes; resolves with the video tags the player got. */
function playLive(playUrl: string, wantVideo: number, push: () => void): Promise<number> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err: Error | undefined, n = 0) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      if (err) reject(err);
      else resolve(n);
    };
    const timer = setTimeout(() => finish(new Error(`the live player did not get ${wantVideo} video tags within 10 s`)), 10_000);
    const req = http.get(playUrl, (res) => {
      if (res.statusCode !== 200) return finish(new Error(`live play answered HTTP ${res.statusCode}`));
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        const n = parseFlv(Buffer.concat(chunks), { allowTruncated: true }).tags.filter((t) => t.type === 9 && !t.sequenceHeader).length;
        if (n >= wantVideo) finish(undefined, n);
      });
      // flv-out answers a player at once and holds it until media comes: what is pushed now reaches it whole
      push();
    });
    req.on('error', (err) => finish(err));
  });
}

/** Pushes `frames` frames of the clip into the live stream of `chanId` (looping the 100-frame clip). */
function push(chanId: number, frames: number): { live: () => number; stop: () => void } {
  const { pub, stream } = publisherFor(NORM_SIM, chanId);
  let live = 0;
  const sub = stream.media.subscribe({
    write: () => {
      live++;
    },
  });
  for (let i = 0; i < frames; i++) pub.push(unitAt(testClip(), i));
  return { live: () => live, stop: () => sub.close() };
}

const videoTags = (file: string): number => parseFlv(fs.readFileSync(file)).tags.filter((t) => t.type === 9 && !t.sequenceHeader).length;

export function fullDiskSuite(backend: CatalogBackend): void {
  const sqlite = backend.name === 'SQLite';

  /** Mounts a small file system as the data directory of a fresh catalog; the caller starts the gateway. */
  function setUp(label: string): Ctx {
    const c = {} as Ctx;
    let scratch = '';
    before(async () => {
      testClip();
      scratch = scratchDir(`${label}-${backend.name.toLowerCase()}`);
      c.dataDir = path.join(scratch, 'data');
      c.small = mountSmallFs(c.dataDir, DISK_BYTES);
      c.catalog = await backend.fresh(label, c.dataDir);
    });
    after(async () => {
      await c.gw?.stop();
      c.small?.unmount();
      fs.rmSync(scratch, { recursive: true, force: true });
    });
    beforeEach(() => {
      notices.length = 0;
    });
    return c;
  }
  const readRow = async (c: Ctx, reqId: string): Promise<StoredRecord | null> => {
    const cat: RecordCatalog = await c.catalog.open();
    try {
      return await cat.getByReqId('A', reqId);
    } finally {
      await cat.close();
    }
  };
  const fileOf = (c: Ctx, row: Pick<StoredRecord, 'path'>): string => path.join(c.dataDir, 'records', ...row.path.split('/'));

  describe('a data disk that is full when the gateway starts', function () {
    this.timeout(60_000);
    const c = setUp('recorder_full_at_boot');
    let notRecorded: string;
    let recordedBefore: string;

    it('starts, plays live FLV, and opens with record: true play live without recording, saying why', async () => {
      // as on a gateway that ran before its disk filled (and on a disk file system a folder takes a block too)
      fs.mkdirSync(path.join(c.dataDir, 'records'));
      c.small.fill();
      assert.ok(c.small.free() < 4096, `the data disk is full (${c.small.free()} bytes free)`);
      c.gw = await startGw(c);
      const gw = c.gw;

      if (sqlite) {
        // the embedded catalog cannot even be created: the recorder is up, degraded, from the start
        assert.equal(await metric(gw, 'gw_recorder_degraded'), 1);
        assert.match(
          String(
            logged(gw, 'recorder degraded: requests opened with record: true are played live without recording until the store can be written again')?.reason,
          ),
          /^the record store is out of space \((SQLITE_FULL|ENOSPC)\)$/,
        );
        const q = await gw.api(
          'GET',
          `/strm/record?startTm=${encodeURIComponent('2020-01-01 00:00:00')}&endTm=${encodeURIComponent('2020-02-01 00:00:00')}`,
          undefined,
          A,
        );
        assert.deepEqual([q.json.errCode, q.json.message], [-3, 'The record catalog is not available.']);
      } else {
        // the catalog lives elsewhere: the recorder finds out at its first write
        assert.equal(await metric(gw, 'gw_recorder_degraded'), 0);
      }

      const first = await open(gw, 1);
      const got = await playLive(String(first.playUrl), 100, () => {
        push(1, 100).stop();
      });
      assert.equal(got, 100, 'the live player got every frame');
      if (sqlite) {
        assert.equal(first.recording, undefined, 'the open result does not say recording');
        const f = await flags(gw, first.reqId);
        assert.equal(f.recording, false);
        // SQLite's own error on a tmpfs; on a disk file system the catalog's folder cannot even be made
        assert.match(String(f.recordingError), /^not recorded: the record store is out of space \((SQLITE_FULL|ENOSPC)\)$/);
        assert.equal(first.recordingError, f.recordingError, 'the open result says why it is not recording');
      } else {
        assert.equal(first.recording, true);
        await waitFor(async () => (await metric(gw, 'gw_recorder_degraded')) === 1, 'the recorder to be degraded');
        const f = await flags(gw, first.reqId);
        assert.equal(f.recording, false);
        assert.match(String(f.recordingError), /^ENOSPC: no space left on device, (write|mkdir)$/, 'the cause, and no server path');
        assert.equal(await metric(gw, 'gw_recorder_no_space_total', { outcome: 'none' }), 1, 'retention ran before giving up');
      }
      await close(gw, first.reqId, !sqlite);
      const closed = notices.find((n) => n.payload.reqId === first.reqId && n.payload.act === 'closed');
      assert.ok(closed, 'closed notice');
      assert.match(
        String((closed.payload as { recordingError?: string }).recordingError),
        sqlite ? /^not recorded: the record store is out of space/ : /^ENOSPC/,
      );
      if (sqlite) assert.equal(closed.payload.playedAvDumpUrl, undefined);
      else {
        const row = (await readRow(c, first.reqId))!;
        // on a disk file system not even the file's folder could be made: nothing was kept
        const file = fileOf(c, row);
        assert.deepEqual([row.state, row.sz], ['failed', fs.existsSync(file) ? fs.statSync(file).size : 0]);
      }

      // every record open from now on, whichever backend: played live, not recorded, and told why
      const second = await open(gw, 2);
      assert.equal(second.recording, undefined);
      const f2 = await flags(gw, second.reqId);
      assert.equal(f2.recording, false);
      assert.match(String(f2.recordingError), /^not recorded: the record store is out of space \((SQLITE_FULL|ENOSPC)\)$/);
      const got2 = await playLive(String(second.playUrl), 30, () => {
        push(2, 30).stop();
      });
      assert.equal(got2, 30);
      await close(gw, second.reqId, false);
      const notes = notices.filter((n) => n.payload.reqId === second.reqId);
      assert.deepEqual(
        notes.map((n) => n.payload.act),
        ['ready', 'closed'],
      );
      for (const n of notes) assert.equal((n.payload as { recordingError?: string }).recordingError, f2.recordingError, `${n.payload.act} notice says why`);
      assert.equal(await metric(gw, 'gw_recorder_recordings_skipped_total'), sqlite ? 2 : 1);
      assert.equal(await metric(gw, 'gw_recorder_degraded'), 1);
      notRecorded = second.reqId;
      // health: still 200 (live media flows), degraded, with the reason for a reader allowed the details
      const h = await gw.api('GET', '/healthz');
      assert.equal(h.status, 200);
      assert.equal(h.json.status, 'degraded');
      assert.match(String(h.json.degraded?.recorder?.reason), /^not recording: (the record store is out of space|ENOSPC)/);
    });

    it('records again once space comes back, without a restart', async () => {
      const gw = c.gw;
      c.small.unfill();
      await waitFor(async () => (await metric(gw, 'gw_recorder_degraded')) === 0, 'the recorder to recover', 15_000);
      assert.ok(logged(gw, 'recorder recovered: requests opened with record: true are recorded again'));
      const healthy = await gw.api('GET', '/healthz');
      assert.deepEqual([healthy.status, healthy.json.status, healthy.json.degraded], [200, 'ok', undefined]);

      const r = await open(gw, 3);
      assert.equal(r.recording, true);
      const p = push(3, 100);
      p.stop();
      await close(gw, r.reqId, true);
      const row = (await readRow(c, r.reqId))!;
      assert.equal(row.state, 'done');
      const file = fileOf(c, row);
      assert.equal(row.sz, fs.statSync(file).size);
      assert.equal(probeVideo(file).frames, 100, 'the new recording decodes whole');
      const [av] = (await gw.api('GET', `/strm/record?reqId=${r.reqId}`, undefined, A)).json.data;
      assert.equal(av.sz, row.sz);
      // a request opened while degraded stays unrecorded: it has no record
      assert.deepEqual((await gw.api('GET', `/strm/record?reqId=${notRecorded}`, undefined, A)).json.data, []);
      const closed = notices.find((n) => n.payload.reqId === r.reqId && n.payload.act === 'closed')!;
      assert.equal(closed.payload.playedAvDumpUrl, av.url);
      assert.equal((closed.payload as { recordingError?: string }).recordingError, undefined);
      recordedBefore = r.reqId;
    });

    it('a restart with the disk full and a catalog already there: starts, plays live, and lists its records once space is back', async () => {
      await c.gw.stop();
      c.small.fill();
      c.gw = await startGw(c);
      const gw = c.gw;
      if (sqlite) {
        // an existing WAL catalog cannot get its shared-memory file on a full disk: SQLite says "disk I/O error"
        assert.equal(await metric(gw, 'gw_recorder_degraded'), 1);
        assert.match(String(logged(gw, 'recorder ready')?.degraded), /^the record store is out of space \(SQLITE_(FULL|IOERR_SHMSIZE)\)$/);
      }
      const r = await open(gw, 4, { record: false });
      assert.equal(
        await playLive(String(r.playUrl), 50, () => {
          push(4, 50).stop();
        }),
        50,
      );
      await close(gw, r.reqId, false);

      c.small.unfill();
      await waitFor(async () => (await metric(gw, 'gw_recorder_degraded')) === 0, 'the recorder to be ready', 15_000);
      const [av] = (await gw.api('GET', `/strm/record?reqId=${recordedBefore}`, undefined, A)).json.data;
      assert.ok(av, 'the record made before the restart is listed');
      // the row names the node as it was when it recorded (the apiBase the test gateway had before the restart, which
      // it keeps, on another port): its path on the restarted gateway
      const dl = await fetch(gw.baseUrl + new URL(av.url).pathname, { headers: { authorization: 'Basic ' + Buffer.from(A).toString('base64') } });
      assert.equal(dl.status, 200);
      assert.equal((await dl.arrayBuffer()).byteLength, av.sz);
    });
  });

  describe('a data disk that fills during a recording', function () {
    this.timeout(60_000);
    const c = setUp('recorder_full_mid_file');
    const ids: Record<string, string> = {};

    const record = async (chanId: number, frames: number): Promise<string> => {
      const r = await open(c.gw, chanId);
      assert.equal(r.recording, true);
      push(chanId, frames).stop();
      await close(c.gw, r.reqId, true);
      return r.reqId;
    };

    it('retention (maxTotalBytes) removes older records to make room, and the recording goes on whole', async () => {
      c.gw = await startGw(c);
      ids.old = await record(1, 600);
      ids.kept = await record(2, 300);
      const old = (await readRow(c, ids.old))!;
      const kept = (await readRow(c, ids.kept))!;
      await c.gw.stop();
      // exactly what is stored: a start does not remove anything, the next recording puts the store over it
      c.gw = await startGw(c, { maxTotalBytes: old.sz + kept.sz });
      assert.ok(fs.existsSync(fileOf(c, old)));

      c.small.fill(32 * 1024);
      const reqId = await record(3, 300);
      const row = (await readRow(c, reqId))!;
      assert.equal(row.state, 'done', `the recording went on: ${row.error}`);
      const file = fileOf(c, row);
      assert.equal(row.sz, fs.statSync(file).size);
      assert.equal(videoTags(file), 300, 'every frame is in the file');
      assert.equal(probeVideo(file).frames, 300);
      assert.equal(await readRow(c, ids.old), null, 'the oldest record went');
      assert.equal(fs.existsSync(fileOf(c, old)), false, 'with its file');
      assert.ok(await readRow(c, ids.kept), 'the next one was not needed');
      assert.ok(fs.existsSync(fileOf(c, kept)));
      assert.ok((await metric(c.gw, 'gw_recorder_no_space_total', { outcome: 'freed' }))! >= 1);
      assert.equal(await metric(c.gw, 'gw_recorder_degraded'), 0);
      assert.equal(await metric(c.gw, 'gw_recorder_write_errors_total', { code: 'ENOSPC' }), undefined);
      c.small.unfill();
    });

    it('with nothing retention may remove, the recording stops cleanly; its row follows the file once space is back', async () => {
      await c.gw.stop();
      c.gw = await startGw(c);
      c.small.fill(32 * 1024);
      const r = await open(c.gw, 4);
      assert.equal(r.recording, true);
      const p = push(4, 300);
      await waitFor(() => logged(c.gw, 'recording stopped by a write error; live play goes on', r.reqId), 'the write error');
      assert.equal(p.live(), 300, 'live play got every frame');
      p.stop();
      await waitFor(async () => (await metric(c.gw, 'gw_recorder_degraded')) === 1, 'the recorder to be degraded');
      const f = await flags(c.gw, r.reqId);
      assert.equal(f.recording, false);
      assert.equal(f.recordingError, 'ENOSPC: no space left on device, write');
      await close(c.gw, r.reqId, true);

      // the file ends on a whole tag and plays
      const file = path.join(
        c.dataDir,
        'records',
        ...(
          await waitFor(() => {
            const found = fs
              .readdirSync(path.join(c.dataDir, 'records'), { recursive: true })
              .map(String)
              .find((x) => x.endsWith(`${r.reqId}.flv`));
            return found?.split(path.sep).join('/');
          }, 'the record file')
        ).split('/'),
      );
      const kept = fs.statSync(file).size;
      const keptTags = videoTags(file); // throws on a torn last tag
      assert.ok(keptTags > 0 && keptTags < 300, `the part that fitted was kept (${keptTags} frames, ${kept} bytes)`);
      assert.equal(probeVideo(file).frames, keptTags, 'and decodes');

      // space comes back: no restart, and the row says what the file holds
      c.small.unfill();
      await waitFor(
        async () => {
          const row = await readRow(c, r.reqId);
          return row && row.state === 'failed' && row.sz === kept;
        },
        "the row to say failed with the file's size",
        15_000,
      );
      const row = (await readRow(c, r.reqId))!;
      assert.match(String(row.error), /^ENOSPC/);
      await waitFor(async () => (await metric(c.gw, 'gw_recorder_degraded')) === 0, 'the recorder to recover', 15_000);
      const closed = notices.find((n) => n.payload.reqId === r.reqId && n.payload.act === 'closed')!;
      assert.equal((closed.payload as { recordingError?: string }).recordingError, 'ENOSPC: no space left on device, write');
      assert.ok(closed.payload.playedAvDumpUrl, 'what was kept is served');

      const again = await record(5, 50);
      const ok = (await readRow(c, again))!;
      assert.deepEqual([ok.state, ok.sz], ['done', fs.statSync(fileOf(c, ok)).size]);
    });
  });
}
