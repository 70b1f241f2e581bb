/**
 * A segmenter's track configuration: the tracks it muxes (with a signature that tells a new configuration from
 * the same one announced again) and, once active, the init segment made for it (each configuration gets the next
 * version: init-{version}.mp4) or the MPEG-TS writer.
 */
import type { AudioTrackInfo, TrackInfo, VideoTrackInfo } from '../../../plugin-sdk';
import { fmp4Init, type FragmentTrack } from './fmp4';
import type { Container, HlsInit } from './hls-types';
import { TsWriter } from './mpegts';
import { audioTrack, videoTrack } from './mux-tracks';
import type { MuxTrack } from './mux-types';
import type { AudioSample, VideoSample } from './samples';

export interface Config {
  sig: string;
  video: MuxTrack | undefined;
  audio: MuxTrack | undefined;
}

export interface Active extends Config {
  init: HlsInit;
  ts: TsWriter | undefined;
}

/** the configuration a bus track list asks for */
export function configOf(list: ReadonlyArray<TrackInfo>): Config {
  const v = list.find((t): t is VideoTrackInfo => t.kind === 'video');
  const a = list.find((t): t is AudioTrackInfo => t.kind === 'audio');
  const video = v ? videoTrack(v) : undefined;
  const audio = a ? audioTrack(a, video ? 2 : 1) : undefined;
  const sig = `${video?.codec}:${video?.config.toString('hex')}|${audio?.config.toString('hex')}:${audio?.sampleRate}`;
  return { sig, video, audio };
}

/** `w` made active: its init segment (as init version `version`) or its MPEG-TS writer */
export function activate(w: Config, container: Container, version: number): Active {
  const tracks = [w.video, w.audio].filter((t): t is MuxTrack => !!t);
  const data = container === 'fmp4' ? fmp4Init(tracks) : undefined;
  return { ...w, init: { version, data }, ts: container === 'mpegts' ? new TsWriter(tracks) : undefined };
}

export function fragmentTracks(a: Active, video: VideoSample[], audio: AudioSample[]): FragmentTrack[] {
  const out: FragmentTrack[] = [];
  if (a.video && video.length) out.push({ track: a.video, baseTime: video[0].dts, samples: video });
  if (a.audio && audio.length) out.push({ track: a.audio, baseTime: audio[0].dts, samples: audio });
  return out;
}
