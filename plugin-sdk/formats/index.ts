/** Media formats for plugins: `plugin-sdk/formats`. */
export { h264TestPattern } from './h264-pattern';
export type { H264TestPattern, H264TestPatternOptions } from './h264-pattern';
