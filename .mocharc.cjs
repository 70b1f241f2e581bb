// npm test, first group: every test file but those in test/suite-groups.cjs's ALONE list, two at a time.
'use strict';
const { ALL, ALONE, COMMON } = require('./test/suite-groups.cjs');

module.exports = { ...COMMON, spec: ALL, ignore: ALONE, parallel: true, jobs: 2 };
