/**
 * Stored-media query speed on the embedded SQLite catalog: 1,000,000 records over 180 days, then GET
 * /strm/record-style range queries, page 1 and page 500 (limit 20), median of several runs. Target: each
 * under 20 ms. The filled catalog is cached under .test-tmp/bench-record-catalog between runs.
 *
 *   node dist/test/bench/record-catalog.js [--rows N] [--runs N] [--fresh]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { StoredRecord } from '../../plugins/recorder/src/catalog';
import { recordPath } from '../../plugins/recorder/src/catalog';
import { openSqliteCatalog } from '../../plugins/recorder/src/catalog-sqlite';
import { repoRoot } from '../support/paths';
import { prng as mulberry32 } from '../support/prng';

const GENERATOR_VERSION = 1;
const DAY = 86_400_000;
const SPAN_DAYS = 180;
const T0 = Date.parse('2024-01-01T00:00:00Z');
const TERMINALS = 2000;
const TARGET_MS = 20;

export interface RecordCatalogBenchResult {
  rows: number;
  fillMs: number | null; // null when the cached catalog was used
  rangeRows: number;
  page1Ms: number;
  page500Ms: number;
  simPage1Ms: number;
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * Records as a busy site writes them: reqTm increasing with jitter, 80% of them from the main application,
 * 2000 terminals with 4 channels, generated 22-character reqIds.
 */
function* generate(rows: number): Generator<StoredRecord> {
  const rnd = mulberry32(1078);
  const step = (SPAN_DAYS * DAY) / rows;
  for (let i = 0; i < rows; i++) {
    const reqTm = new Date(Math.floor(T0 + i * step + rnd() * step));
    const u = rnd();
    const appId = u < 0.8 ? 'demo' : u < 0.95 ? 'fleetB' : 'fleetC';
    const simNo = String(13800000000 + Math.floor(rnd() * TERMINALS));
    let reqId = '';
    for (let k = 0; k < 22; k++) reqId += B64URL[Math.floor(rnd() * 64)];
    const m = rnd();
    yield {
      reqId,
      appId,
      simNo,
      chan: 1 + Math.floor(rnd() * 4),
      live: rnd() < 0.7,
      reqTm,
      path: recordPath(simNo, reqId, reqTm, 'UTC'),
      ext: 'flv',
      sz: Math.floor(1e6 + rnd() * 5e7),
      mediaTyp: m < 0.7 ? 'av' : m < 0.85 ? 'v' : m < 0.95 ? 'a' : null,
      state: 'done',
      endTm: new Date(reqTm.getTime() + 60_000 + Math.floor(rnd() * 600_000)),
      error: null,
      apiBase: null,
    };
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function timeIt(runs: number, fn: () => Promise<unknown>): Promise<number> {
  await fn(); // warm the page cache and the statement
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return median(times);
}

function parseArgs(args: string[]): { rows: number; runs: number; fresh: boolean } {
  const out = { rows: 1_000_000, runs: 9, fresh: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const num = (): number => {
      const v = Number(args[++i]);
      if (!Number.isSafeInteger(v) || v < 1) throw new Error(`${a} needs a positive integer`);
      return v;
    };
    if (a === '--rows') out.rows = num();
    else if (a === '--runs') out.runs = num();
    else if (a === '--fresh') out.fresh = true;
    else throw new Error(`record-catalog bench: unknown argument '${a}' (use --rows N, --runs N, --fresh)`);
  }
  return out;
}

export async function run(args: string[]): Promise<RecordCatalogBenchResult> {
  const { rows, runs, fresh } = parseArgs(args);
  const cacheDir = path.join(repoRoot, '.test-tmp', 'bench-record-catalog');
  const fileName = `catalog-v${GENERATOR_VERSION}-${rows}.sqlite`;
  const cached = path.join(cacheDir, fileName);
  fs.mkdirSync(cacheDir, { recursive: true });
  if (fresh) fs.rmSync(cached, { force: true });

  let fillMs: number | null = null;
  if (!fs.existsSync(cached)) {
    // Built under a temporary name and renamed when complete, so an interrupted fill is never reused.
    const building = `building-${process.pid}-${randomBytes(4).toString('hex')}.sqlite`;
    const t = process.hrtime.bigint();
    const cat = openSqliteCatalog({ dir: cacheDir, fileName: building, timeZone: 'UTC' });
    try {
      cat.insertMany(generate(rows));
    } finally {
      await cat.close();
    }
    fillMs = Number(process.hrtime.bigint() - t) / 1e6;
    fs.renameSync(path.join(cacheDir, building), cached);
    console.log(`record-catalog: filled ${rows} rows in ${(fillMs / 1000).toFixed(1)} s -> ${path.relative(repoRoot, cached)}`);
  } else {
    console.log(`record-catalog: using cached ${path.relative(repoRoot, cached)}`);
  }

  const cat = openSqliteCatalog({ dir: cacheDir, fileName, timeZone: 'UTC' });
  try {
    // A month in the middle of the data for the main application: about 4/5 of rows/6.
    const start = new Date(T0 + 75 * DAY);
    const end = new Date(T0 + 105 * DAY);
    const q = { appId: 'demo', start, end, limit: 20 };
    const all = await cat.queryRange({ ...q, page: 1, limit: 2000 });
    const sim = all[0]?.simNo ?? '13800000000';
    const p500 = await cat.queryRange({ ...q, page: 500 });
    const rangeRows = Math.round(rows * 0.8 * (30 / SPAN_DAYS));
    if (rows >= 100_000 && p500.length !== 20) throw new Error(`page 500 returned ${p500.length} rows, expected 20`);

    const page1Ms = await timeIt(runs, () => cat.queryRange({ ...q, page: 1 }));
    const page500Ms = await timeIt(runs, () => cat.queryRange({ ...q, page: 500 }));
    const simPage1Ms = await timeIt(runs, () => cat.queryRange({ ...q, simNo: sim, page: 1 }));

    const verdict = (ms: number): string => (ms < TARGET_MS ? 'ok' : `OVER the ${TARGET_MS} ms target`);
    console.log(
      `record-catalog: ${rows} rows; range ${start.toISOString()}..${end.toISOString()} appId=demo (~${rangeRows} matching), limit 20, median of ${runs}`,
    );
    console.log(`  page 1:           ${page1Ms.toFixed(3)} ms  ${verdict(page1Ms)}`);
    console.log(`  page 500:         ${page500Ms.toFixed(3)} ms  ${verdict(page500Ms)}`);
    console.log(`  simNo page 1:     ${simPage1Ms.toFixed(3)} ms  ${verdict(simPage1Ms)}`);
    return { rows, fillMs, rangeRows, page1Ms, page500Ms, simPage1Ms };
  } finally {
    await cat.close();
  }
}

if (require.main === module) {
  run(process.argv.slice(2)).catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  });
}
