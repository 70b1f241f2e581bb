/**
 * Example source: a test pattern, published without a terminal, a camera or an encoder. A request opened for one of
 * the configured SIMs plays moving colour bars (H.264 made by `h264TestPattern`: I_PCM key frames, skipped P frames)
 * through any output, as if that terminal pushed them: a way to check players, sites and dashboards end to end.
 */
import { IsArray, IsInt, IsString, Max, Min } from 'class-validator';
import { definePlugin, normaliseSim, videoUnit, type Cancel, type VideoTrackInfo } from '../..';
import { h264TestPattern } from '../../formats';

export class TestPatternConfig {
  /** the SIMs (any form: they are normalised) whose requests get the pattern */
  @IsArray()
  @IsString({ each: true })
  sims: string[] = ['19900000000'];
  @IsInt()
  @Min(1)
  @Max(60)
  fps = 25;
  /** frames from one key frame to the next */
  @IsInt()
  @Min(1)
  @Max(600)
  gopFrames = 25;
}

export default definePlugin({
  name: 'test-pattern',
  config: TestPatternConfig,
  setup(ctx) {
    const { fps, gopFrames } = ctx.config;
    const sims = new Set(ctx.config.sims.map(normaliseSim));
    const pattern = h264TestPattern({ width: 320, height: 240 });
    const track: VideoTrackInfo = { kind: 'video', codec: 'h264', width: 320, height: 240, sps: pattern.sps, pps: pattern.pps, frameRate: fps };
    const running = new Set<Cancel>();

    // a stream opens with the first request on its channel; it closes with the last, and the publisher is told
    ctx.sessions.onStreamOpened((s) => {
      if (!sims.has(s.normSim)) return;
      const pub = s.media.attachPublisher();
      pub.setTrack(track);
      let n = 0;
      const timer = ctx.clock.setInterval(() => {
        const f = pattern.frame(n, gopFrames);
        pub.push(videoUnit({ codec: 'h264', dts: (n++ * 1000) / fps, keyframe: f.keyframe, payload: f.payload }));
      }, 1000 / fps);
      running.add(timer);
      pub.onClose(() => {
        timer();
        running.delete(timer);
      });
      ctx.log.info({ stream: s.name }, 'test pattern publishing');
    });
    return { stop: () => running.forEach((cancel) => cancel()) };
  },
});
