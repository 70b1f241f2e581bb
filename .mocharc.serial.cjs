// npm test, second group: the files of test/suite-groups.cjs's ALONE list, one at a time, after the first group.
'use strict';
const { ALONE, COMMON } = require('./test/suite-groups.cjs');

module.exports = { ...COMMON, spec: ALONE };
