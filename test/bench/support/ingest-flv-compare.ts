/**
 * ingest-flv's comparisons: K rounds of two runs on the same load, alternated (this machine's speed drifts, so only
 * figures of one alternation compare), then the ratio each is for: against the floor, one process against workers,
 * other readers against FLV players, video only against audio.
 */
import type { IngestFlvOptions, IngestFlvResult } from '../ingest-flv';
import { alternate, othersNote, total } from './alternate';
import { f1, f2 } from './gateway-harness';
import { TARGET, callsLine, targetChecks, targetsShort } from './ingest-flv-report';
import { synthesise, type SynthStream } from './synth-terminals';
import { boundVerdict, spellLine, spellOf } from './spell';
import { audioStepTable } from './audio-steps';
import { lateEpisodesShort } from './late-episodes';

/** one ingest-flv run with these options on this load */
export type RunWith = (o: IngestFlvOptions, stream: SynthStream) => Promise<IngestFlvResult>;

/**
 * One process against N workers on the same load and the same core, alternated: streams per gateway CPU-second of
 * each. On N cores the workers hold N x (their figure) streams; their figure over the single process's says what the
 * split costs (the primary, N runtimes instead of one) and so how close the machine comes to N times one core.
 */
export async function vsWorkers(o: IngestFlvOptions, stream: SynthStream, runWith: RunWith): Promise<IngestFlvResult> {
  const n = o.workers > 1 ? o.workers : 2;
  const rounds = await alternate(o.vsWorkers, { one: () => runWith({ ...o, workers: 1 }, stream), many: () => runWith({ ...o, workers: n }, stream) });
  const perCore = (r: IngestFlvResult) => r.terminals / (r.cpuPct / 100);
  console.log(`\ningest-flv, 1 process vs ${n} workers on the same core, ${o.terminals} terminals, ${rounds.length} round(s) alternated:`);
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: 1 process ${f1(r.one.cpuPct)} % (${f1(perCore(r.one))} streams per core, RSS ${f1(r.one.rssMB)} MB), ` +
        `${n} workers ${f1(r.many.cpuPct)} % (${f1(perCore(r.many))} streams per core, RSS ${f1(r.many.rssMB)} MB)`,
    );
  }
  const efficiency = total(rounds, (r) => r.one.cpuPct) / total(rounds, (r) => r.many.cpuPct);
  console.log(
    `  streams per CPU-second, ${n} workers / 1 process: ${f2(efficiency)}; on ${n} cores: ${f2(n * efficiency)} x one process ` +
      `(target ${f1(0.9 * n)} x: ${n * efficiency >= 0.9 * n ? 'ok' : 'MISSED'}; this assumes the cores are independent, which a shared memory bus and turbo clocks are not quite)`,
  );
  return rounds[rounds.length - 1].many;
}

/**
 * HLS or RTSP readers against FLV players on the same load, alternated (this machine's speed drifts): gateway CPU and
 * RSS of each, and their ratios over all rounds.
 */
export async function vsFlv(o: IngestFlvOptions, stream: SynthStream, runWith: RunWith): Promise<IngestFlvResult> {
  const rounds = await alternate(o.vsFlv, { alt: () => runWith({ ...o, vsFlv: 0 }, stream), flv: () => runWith({ ...o, vsFlv: 0, readers: 'flv' }, stream) });
  const name = o.readers === 'hls' ? 'LL-HLS' : 'RTSP/TCP';
  console.log(`\n${name} readers vs HTTP-FLV players, ${o.terminals} terminals, ${rounds.length} round(s) alternated (${name} first):`);
  for (const [k, r] of rounds.entries()) {
    const lag = r.alt.readerFigures?.lagMs;
    console.log(
      `  round ${k + 1}: ${name} ${f1(r.alt.cpuPct)} % of a core, RSS ${f1(r.alt.rssMB)} MB (peak ${f1(r.alt.peakRssMB)})` +
        (lag ? `, lag p50 ${f1(lag.p50)} / p99 ${f1(lag.p99)} ms` : '') +
        `, ${r.alt.readerFigures?.errors ?? 0} reader errors, ${r.alt.stalledPlayers} stalled; ` +
        `FLV ${f1(r.flv.cpuPct)} %, RSS ${f1(r.flv.rssMB)} MB (peak ${f1(r.flv.peakRssMB)}), e2e p50 ${f1(r.flv.endToEndMs.p50)} / p99 ${f1(r.flv.endToEndMs.p99)} ms, ` +
        `${r.flv.stalledPlayers} stalled -> CPU ${name}/FLV ${f2(r.alt.cpuPct / r.flv.cpuPct)}, RSS ${f2(r.alt.rssMB / r.flv.rssMB)}` +
        othersNote(r.alt, r.flv),
    );
  }
  const sum = (f: (r: (typeof rounds)[number]) => number) => total(rounds, f);
  console.log(
    `  over all rounds: gateway CPU ${name}/FLV ${f2(sum((r) => r.alt.cpuPct) / sum((r) => r.flv.cpuPct))}, ` +
      `RSS at the end ${name}/FLV ${f2(sum((r) => r.alt.rssMB) / sum((r) => r.flv.rssMB))}, ` +
      `load generator ${name} ${f1(sum((r) => r.alt.generatorCpuPct) / rounds.length)} % vs FLV ${f1(sum((r) => r.flv.generatorCpuPct) / rounds.length)} % of its core`,
  );
  return rounds[rounds.length - 1].alt;
}

/**
 * The same terminals without audio and with it, alternated: the gateway's main-thread CPU of each and their ratio.
 * Both streams are made here (the video of the audio stream is padded a little less, so the bytes on the wire match).
 */
export async function vsVideo(o: IngestFlvOptions, withAudio: SynthStream, runWith: RunWith): Promise<IngestFlvResult> {
  const videoOnly = synthesise(o.capture, o.mbps, 950);
  const rounds = await alternate(o.vsVideo, {
    video: () => runWith({ ...o, vsVideo: 0, audio: false, aac: false }, videoOnly),
    audio: () => runWith({ ...o, vsVideo: 0 }, withAudio),
  });
  console.log(
    `\ningest-flv without and with audio (${o.aac ? 'players take AAC' : 'audio not played'}), ${o.terminals} terminals, ${rounds.length} round(s) alternated:`,
  );
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: video only: main thread ${f1(r.video.threadCpuPct.main)} % (gateway ${f1(r.video.cpuPct)} %); ` +
        `with audio: main thread ${f1(r.audio.threadCpuPct.main)} % (gateway ${f1(r.audio.cpuPct)} %, AAC worker ${f1(r.audio.threadCpuPct.worker)} %, ` +
        `${r.audio.silentPlayers} players without audio) -> ${f2(r.audio.threadCpuPct.main / r.video.threadCpuPct.main)}`,
    );
  }
  const ratio = total(rounds, (r) => r.audio.threadCpuPct.main) / total(rounds, (r) => r.video.threadCpuPct.main);
  console.log(`  main thread with audio / video only: ${f2(ratio)} (target 1.10 or less): ${ratio <= 1.1 ? 'ok' : 'MISSED'}`);
  const last = rounds[rounds.length - 1];
  if (last.video.profile && last.audio.profile) {
    const packets = Math.round(o.terminals * withAudio.audioFramesPerSecond);
    const table = audioStepTable(
      { profile: last.video.profile, mainCpuPct: last.video.threadCpuPct.main },
      { profile: last.audio.profile, mainCpuPct: last.audio.threadCpuPct.main },
      packets,
      last.audio.threadCpuPct.worker,
    );
    console.log(table.join('\n'));
  }
  return rounds[rounds.length - 1].audio;
}

/** The gateway and the floor on the same load, alternated: gateway CPU / floor CPU, the figure issue 16 steers by. */
export async function vsFloor(o: IngestFlvOptions, stream: SynthStream, runWith: RunWith): Promise<IngestFlvResult> {
  // alternated in one session, since this machine's speed drifts: the ratio is the figure, not either CPU alone
  const rounds = await alternate(o.vsFloor, {
    gateway: () => runWith({ ...o, floor: false }, stream),
    floor: () => runWith({ ...o, floor: true, audio: false, aac: false }, stream),
  });
  console.log(`\ningest-flv vs the floor, ${o.terminals} terminals, ${rounds.length} round(s) alternated:`);
  for (const [k, r] of rounds.entries()) {
    console.log(
      `  round ${k + 1}: gateway ${f1(r.gateway.cpuPct)} % (RSS ${f1(r.gateway.rssMB)} MB, e2e p99 ${f1(r.gateway.endToEndMs.p99)} ms, ${lateShort(r.gateway)}; ${callsLine(r.gateway)} a second), ` +
        `floor ${f1(r.floor.cpuPct)} % (RSS ${f1(r.floor.rssMB)} MB, e2e p99 ${f1(r.floor.endToEndMs.p99)} ms, ${lateShort(r.floor)}; ${callsLine(r.floor)} a second) -> gateway / floor ${f2(r.gateway.cpuPct / r.floor.cpuPct)}, ${spellOf(r.floor.cpuPct, o.terminals, stream.audio !== 'none').name} spell; ` +
        `gateway ${targetsShort(r.gateway)}`,
    );
  }
  const ratio = total(rounds, (r) => r.gateway.cpuPct) / total(rounds, (r) => r.floor.cpuPct);
  const spell = spellOf(total(rounds, (r) => r.floor.cpuPct) / rounds.length, o.terminals, stream.audio !== 'none');
  const ratios = rounds.map((r) => r.gateway.cpuPct / r.floor.cpuPct);
  console.log(`  ${spellLine(spell, o.terminals)}`);
  console.log(`  gateway CPU / floor CPU: ${f2(ratio)} (issue 16: 2 or less, ${ratio <= 2 ? 'ok' : 'MISSED'}; ${boundVerdict(spell, ratios, 'round')})`);
  // the absolute targets move with the machine: which rounds met them, and on what floor, says how fast it was
  const met = rounds.filter((r) => targetChecks(r.gateway).every((c) => c.met));
  console.log(
    `  gateway rounds meeting every issue 16 target${o.terminals !== TARGET.terminals ? ` (at ${o.terminals} terminals, not ${TARGET.terminals})` : ''}: ` +
      `${met.length} of ${rounds.length}` +
      (met.length > 0 ? ` (the floor beside them: ${met.map((r) => `${f1(r.floor.cpuPct)} %`).join(', ')})` : ''),
  );
  return rounds[rounds.length - 1].gateway;
}

function lateShort(r: IngestFlvResult): string {
  return r.late ? lateEpisodesShort(r.late) : 'late frames not counted';
}
