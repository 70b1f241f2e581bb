/**
 * Where an audio packet's main-thread time goes (issue 47): `ingest-flv --vs-video 1 --profile` runs the same
 * terminals without audio and with it, each under the CPU profiler; the main thread's self time is grouped into the
 * steps a packet passes (file by file), each step's share of the profile is scaled to the thread's measured CPU, and
 * the difference between the runs over the audio packets a second is that step's cost per audio packet. The AAC
 * encoder itself runs in the worker thread: its CPU is its own line.
 *
 * A profile covers the whole run (boot, opens, warm-up) while the CPU figures are the window's: the shares are a
 * steady-state approximation, good to a few tenths of a microsecond, which is what the table is for.
 *
 * `postMessage` is left out of the shares: with the worker pinned to the main thread's core, the profiler charges it
 * with the time the main thread waits for the core after waking the worker (a third of the samples, where /proc
 * says the thread was busy far less; test/bench/README.md, audio). Its raw share is printed beside the table.
 */
import { repoRoot } from '../../support/paths';
import { summariseCpuProfile } from './process-probe';

/** the steps, first match wins; what matches none is "other" */
export const AUDIO_STEPS: ReadonlyArray<{ step: string; match: RegExp }> = [
  { step: 'socket reads (libuv, read slices)', match: /^(node:internal\/stream_base_commons|dist\/core\/net\/|onStreamRead$)/ },
  { step: 'packet parse', match: /jt1078-ingest\/src\/(packet|parser)\.js$/ },
  { step: 'reorder and loss count', match: /jt1078-ingest\/src\/reorder\.js$/ },
  { step: 'reassembly and normaliser', match: /jt1078-ingest\/src\// },
  { step: 'bus (stream, fan-out, readers, formats)', match: /dist\/core\/bus\// },
  { step: 'AAC stage: hand-off and return', match: /plugins\/audio-aac\/|^node:internal\/worker|plugin-sdk\/(stages|worker)\.js$/ },
  { step: 'FLV tags and players', match: /plugin-sdk\/formats\/flv|plugins\/flv-out\// },
  { step: 'socket writes', match: /^(writev|writeBuffer|writeUtf8String|writeLatin1String|node:net)$/ },
  { step: 'garbage collector', match: /^\(garbage collector\)$/ },
];

export interface StepRun {
  /** the main thread's .cpuprofile */
  profile: string;
  /** the main thread's CPU in the window, % of a core */
  mainCpuPct: number;
}

/** ms of main-thread CPU a second by step, and postMessage's share of the profile's busy samples (left out) */
export function stepMsPerSecond(run: StepRun): { steps: Map<string, number>; postMessagePct: number } {
  const s = summariseCpuProfile(run.profile, repoRoot, 100_000);
  const steps = new Map<string, number>(AUDIO_STEPS.map((x) => [x.step, 0]));
  steps.set('other', 0);
  const postMessagePct = s.files.find((f) => f.name === 'postMessage')?.pct ?? 0;
  const rest = 100 - postMessagePct;
  for (const f of s.files) {
    if (f.name === 'postMessage') continue;
    const step = AUDIO_STEPS.find((x) => x.match.test(f.name))?.step ?? 'other';
    steps.set(step, steps.get(step)! + (f.pct / rest) * run.mainCpuPct * 10);
  }
  return { steps, postMessagePct };
}

/** the table's lines: ms/s of each run by step, and µs per audio packet */
export function audioStepTable(video: StepRun, audio: StepRun, audioPacketsPerSecond: number, aacWorkerCpuPct: number): string[] {
  const { steps: v } = stepMsPerSecond(video);
  const { steps: a, postMessagePct } = stepMsPerSecond(audio);
  const us = (ms: number) => ((ms * 1000) / audioPacketsPerSecond).toFixed(2);
  const lines = [
    `  where an audio packet's main-thread time goes (${audioPacketsPerSecond} audio packets a second; profiles scaled to each run's main-thread CPU):`,
    '  | step | video only, ms/s | with audio, ms/s | µs per audio packet |',
    '  |---|---|---|---|',
  ];
  let sumV = 0;
  let sumA = 0;
  for (const [step, msV] of v) {
    const msA = a.get(step) ?? 0;
    sumV += msV;
    sumA += msA;
    lines.push(`  | ${step} | ${msV.toFixed(1)} | ${msA.toFixed(1)} | ${us(msA - msV)} |`);
  }
  lines.push(`  | main thread, all | ${sumV.toFixed(1)} | ${sumA.toFixed(1)} | ${us(sumA - sumV)} |`);
  lines.push(`  | AAC encoder (worker thread) | 0 | ${(aacWorkerCpuPct * 10).toFixed(1)} | ${us(aacWorkerCpuPct * 10)} |`);
  lines.push(`  (postMessage, ${postMessagePct.toFixed(1)} % of the audio run's profile, is left out: mostly the wait for the core the worker holds)`);
  return lines;
}
