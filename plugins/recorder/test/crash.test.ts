/**
 * The recorder in a real gateway process (`node dist/core/main.js site.json`) fed by a test ingest plugin:
 * killed with SIGKILL mid-recording, the file still decodes and the next start catalogues it; and a real write
 * error (the process's file size limit, EFBIG) stops the recording while the live stream goes on.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseFlv } from '../../../test/support/flv-reader';
import { repoRoot, scratchDir } from '../../../test/support/paths';
import { requireTool } from '../../../test/support/tools';
import { openSqliteCatalog } from '../src/catalog-sqlite';
import { encodeTestPattern } from './fixtures/h264-clip';
import { queryReq, startGateway, type Harness } from './harness';
import { metricValue, probeVideo, sleep, waitFor } from './helpers';

const MAIN = path.join(repoRoot, 'dist', 'core', 'main.js');
const FEED = path.join(repoRoot, 'dist', 'plugins', 'recorder', 'test', 'fixtures', 'feed-plugin.js');
const DEMO = 'demo:demo';

interface Gateway {
  proc: ChildProcess;
  baseUrl: string;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcess>();

/** Runs the gateway; with fileSizeKb, under `ulimit -f` so writes past that size fail with EFBIG. */
async function runGateway(siteFile: string, fileSizeKb?: number): Promise<Gateway> {
  const [cmd, args] = fileSizeKb
    ? ['bash', ['-c', `ulimit -f ${fileSizeKb} && exec "$0" "$@"`, process.execPath, MAIN, siteFile]]
    : [process.execPath, [MAIN, siteFile]];
  const proc = spawn(cmd, args, { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d) => {
    out += d;
  });
  proc.stderr!.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => {
      children.delete(proc);
      resolve({ code, signal });
    }),
  );
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const port = await waitFor(
    () => {
      if (gone) throw new Error(`the gateway exited during start: ${err}${out}`);
      const line = out.split('\n').find((l) => l.includes('"gateway started"'));
      return line ? (JSON.parse(line) as { httpPort: number }).httpPort : undefined;
    },
    'the gateway to start',
    20_000,
  );
  return { proc, baseUrl: `http://127.0.0.1:${port}`, output: () => out, exited };
}

function logged(g: Gateway, msg: string, reqId: string): boolean {
  return g
    .output()
    .split('\n')
    .some((l) => l.includes(`"msg":"${msg}`) && l.includes(`"reqId":"${reqId}"`));
}

async function api(g: Gateway, method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(g.baseUrl + p, {
    method,
    headers: { authorization: 'Basic ' + Buffer.from(DEMO).toString('base64'), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return res.json();
}

async function openRecorded(g: Gateway, chanId: number): Promise<string> {
  const r = await api(g, 'POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '13800138000', chanId, keepIntv: 600, record: true });
  assert.equal(r.errCode, 0, JSON.stringify(r));
  assert.equal(r.data[0].recording, true);
  return r.data[0].reqId;
}

const videoFrames = (buf: Buffer) => {
  const flv = parseFlv(buf, { allowTruncated: true });
  return { frames: flv.tags.filter((t) => t.type === 9 && !t.sequenceHeader).length, trailing: flv.trailing };
};

describe('recorder in a gateway process: crash recovery and a real write error', function () {
  this.timeout(60_000);
  let scratch: string;
  let clipFile: string;

  before(() => {
    scratch = scratchDir('recorder-crash');
    clipFile = path.join(scratch, 'clip.h264');
    fs.writeFileSync(clipFile, encodeTestPattern(requireTool('ffmpeg', 'ffmpeg'), 4));
    requireTool('ffprobe', 'ffmpeg');
  });
  after(() => {
    for (const c of children) c.kill('SIGKILL');
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  function writeSite(name: string, dataDir: string, intervalMs: number): string {
    const file = path.join(scratch, `${name}.json`);
    fs.writeFileSync(
      file,
      JSON.stringify({
        gateway: {
          // one process: SIGKILL must hit the process that writes the file
          workers: 1,
          httpPort: 0,
          listenHost: '127.0.0.1',
          dataDir,
          logLevel: 'info',
          applications: [{ appId: 'A', user: 'demo', password: 'demo' }],
        },
        plugins: [
          { name: 'recorder-feed', module: FEED, config: { clip: clipFile, intervalMs } },
          { name: 'recorder', config: { timeZone: 'UTC', sizeUpdateSec: 1 } },
        ],
      }),
    );
    return file;
  }

  it('after SIGKILL the file plays up to its last tag; the next start catalogues it done with its real size', async () => {
    const dataDir = path.join(scratch, 'crash-data');
    const g = await runGateway(writeSite('crash', dataDir, 40));
    const reqId = await openRecorded(g, 1);
    // the catalog's size follows the file while it grows
    const [av] = await waitFor(
      async () => {
        const r = await api(g, 'GET', `/strm/record?reqId=${reqId}`);
        return r.data[0]?.sz >= 15_000 ? r.data : undefined;
      },
      'about two seconds of recording',
      20_000,
    );
    g.proc.kill('SIGKILL');
    assert.equal((await g.exited).signal, 'SIGKILL');

    const file = path.join(dataDir, 'records', ...av.path.split('/'));
    const { frames, trailing } = videoFrames(fs.readFileSync(file));
    assert.ok(frames >= 25, `${frames} frames recorded before the kill`);
    const p = probeVideo(file);
    // a torn last tag (a kill inside a write) may add one damaged frame at the end, nothing else
    assert.ok(p.frames === frames || (trailing > 0 && p.frames === frames + 1), `ffprobe decoded ${p.frames} of ${frames} frames`);
    const c = openSqliteCatalog({ dir: path.join(dataDir, 'recorder') });
    assert.equal((await c.getByReqId('A', reqId))!.state, 'recording', 'the kill left the row unfinished');
    await c.close();

    // the next start (in-process this time, same data directory) closes the row with what the file holds
    const h: Harness = { dataDir, gw: await startGateway(dataDir) };
    try {
      const c2 = openSqliteCatalog({ dir: path.join(dataDir, 'recorder') });
      const row = (await c2.getByReqId('A', reqId))!;
      await c2.close();
      const st = fs.statSync(file);
      assert.equal(row.state, 'done');
      assert.equal(row.sz, st.size);
      assert.equal(row.endTm!.getTime(), st.mtime.getTime(), 'end time from the file');
      assert.equal(row.mediaTyp, 'v');
      const after = parseFlv(fs.readFileSync(file));
      assert.equal(after.trailing, 0, 'the file ends on a whole tag');
      assert.equal(after.tags.filter((t) => t.type === 9 && !t.sequenceHeader).length, frames);
      assert.ok(h.gw.logs.some((l) => l.msg === 'closed a recording left unfinished by an unclean stop' && l.reqId === reqId));
      const [listed] = await queryReq(h, 'appa:pwa', reqId);
      assert.equal(listed.sz, st.size);
    } finally {
      await h.gw.stop();
    }
  });

  it('EFBIG mid-recording: the row says failed with what was kept, the kept part decodes, the live stream goes on', async () => {
    const dataDir = path.join(scratch, 'efbig-data');
    const limitKb = 512;
    // 500 frames a second: the limit is reached within a couple of seconds
    const g = await runGateway(writeSite('efbig', dataDir, 2), limitKb);
    const reqId = await openRecorded(g, 2);
    await waitFor(() => logged(g, 'recording stopped by a write error', reqId), 'the write error', 20_000);
    const s1 = await api(g, 'GET', `/strm/status?reqId=${reqId}`);
    assert.equal(s1.count, 1, 'the request is still open');
    await sleep(300);
    const s2 = await api(g, 'GET', `/strm/status?reqId=${reqId}`);
    assert.ok(s2.data[0].bytesIn > s1.data[0].bytesIn, 'media keeps flowing into the stream');
    const metrics = await (await fetch(`${g.baseUrl}/metrics`)).text();
    assert.equal(metricValue(metrics, 'gw_recorder_write_errors_total', { code: 'EFBIG' }), 1);

    const closed = await api(g, 'POST', '/strm/close', { reqIds: [reqId] });
    assert.deepEqual(closed.data, [{ reqId, closed: true }]);
    await waitFor(() => logged(g, 'recording ended', reqId), 'the end of the recording');
    g.proc.kill('SIGTERM');
    assert.equal((await g.exited).code, 0);

    const c = openSqliteCatalog({ dir: path.join(dataDir, 'recorder') });
    const row = (await c.getByReqId('A', reqId))!;
    await c.close();
    assert.equal(row.state, 'failed');
    assert.match(row.error ?? '', /EFBIG/);
    const file = path.join(dataDir, 'records', ...row.path.split('/'));
    const size = fs.statSync(file).size;
    assert.equal(row.sz, size, 'sz is what was kept');
    assert.ok(size > 0 && size <= limitKb * 1024, `${size} bytes kept`);
    const flv = parseFlv(fs.readFileSync(file));
    assert.equal(flv.trailing, 0, 'cut back to the last whole tag');
    const frames = flv.tags.filter((t) => t.type === 9 && !t.sequenceHeader).length;
    assert.equal(probeVideo(file).frames, frames, 'every kept frame decodes');
  });
});
