import assert from 'node:assert/strict';
import { runProcess } from './run-process';
import { requireTool } from './tools';

/**
 * Debian's ffprobe and ffmpeg as the independent readers of what a test recorded or collected. Counting frames makes
 * ffprobe decode every one, and ffmpeg's decode to nowhere says what was wrong with any: neither knows our code.
 * Both run as child processes without blocking, since the gateway under test usually serves from this process.
 */

/** one stream as `ffprobe -show_streams -of json` gives it (the fields tests read) */
export interface ProbedStream {
  codec_type: string;
  codec_name: string;
  codec_tag_string?: string;
  width?: number;
  height?: number;
  sample_rate?: string;
  channels?: number;
  /** with -count_frames: the frames it decoded */
  nb_read_frames?: string;
}

export interface Counted {
  streams: ProbedStream[];
  /** what ffprobe said while decoding (empty: clean) */
  stderr: string;
}

/**
 * Every stream of a file with its frames counted. `input` goes before the file (`-f hevc` for an elementary stream,
 * `-select_streams v`). A file ffprobe cannot read fails the test with its words.
 */
export async function countFrames(file: string, input: string[] = []): Promise<Counted> {
  const p = await runProcess(requireTool('ffprobe', 'ffmpeg'), ['-v', 'error', ...input, '-count_frames', '-show_streams', '-of', 'json', file], 60_000);
  assert.equal(p.code, 0, `ffprobe could not read ${file}: ${p.stderr}`);
  return { streams: (JSON.parse(p.stdout) as { streams: ProbedStream[] }).streams, stderr: p.stderr.trim() };
}

export interface Probed {
  streams: ProbedStream[];
  /** what decoding every frame made ffmpeg say (empty: clean) */
  decodeErrors: string;
}

/** the file's streams with frames counted, then every frame decoded by ffmpeg */
export async function probeFile(file: string): Promise<Probed> {
  const { streams } = await countFrames(file);
  const d = await runProcess(requireTool('ffmpeg', 'ffmpeg'), ['-v', 'error', '-i', file, '-f', 'null', '-'], 60_000);
  assert.equal(d.code, 0, `ffmpeg could not decode ${file}: ${d.stderr}`);
  return { streams, decodeErrors: d.stderr.trim() };
}
