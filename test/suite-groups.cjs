// How `npm test` splits the test files (.mocharc.cjs, .mocharc.serial.cjs): most run two at a time, in mocha's
// parallel mode; the files below run after them, one at a time.
//
// Why these run alone. Each either judges a real-time program, whose timing a second test file loading the machine
// spoils (Chromium playing audio and video, the GStreamer and VLC cameras that rtsp-source pulls, a terminal's
// takeover grace), or floods the machine on purpose (sockets, file descriptors, UDP ports, hostile peers) and so
// spoils the file beside it. In nine clean-clone runs of the whole suite two files at a time, each failure but two
// came from such a file; the two others were a race in the recorder and a test's single look, both fixed.
//
// A file whose checks need the machine to itself belongs here. Everything else must run beside another file: it
// takes no fixed port, file name or server (the test kit binds free ports; test/support/paths.ts scratchDir gives
// each file folders of its own).
'use strict';

const ALONE = [
  'dist/test/browser/**/*.test.js',
  'dist/**/*browser*.test.js',
  'dist/plugins/rtsp-source/test/*.test.js',
  'dist/plugins/jt1078-ingest/test/takeover.test.js',
  'dist/test/e2e/takeover.test.js',
  'dist/test/e2e/log-volume.test.js',
  'dist/test/e2e/fuzz-gateway.test.js',
  'dist/test/core/cluster-flood.test.js',
  'dist/test/core/fd-exhaustion.test.js',
  'dist/test/core/connection-limits.test.js',
  'dist/plugins/rtmp/test/hostile.test.js',
];

const ALL = ['dist/test/**/*.test.js', 'dist/plugins/**/*.test.js', 'dist/plugin-sdk/**/*.test.js'];

/** what both groups share */
const COMMON = { timeout: 60000, exit: true, require: ['dist/test/setup.js'] };

module.exports = { ALONE, ALL, COMMON };
