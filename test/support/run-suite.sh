#!/usr/bin/env bash
# npm test: the build, lint and format check side by side (none needs another's output), then the test files in
# the two groups of test/suite-groups.cjs. The second group runs even when the first fails, so one run reports
# every failing test; the exit status is non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

pids=()
names=()
for step in build lint format:check; do
  npm run -s "$step" &
  pids+=($!)
  names+=("$step")
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if ((${#failed[@]})); then
  echo "npm test: ${failed[*]} failed; no test was run" >&2
  exit 1
fi

rc=0
npx mocha || rc=1
npx mocha --config .mocharc.serial.cjs || rc=1
if ((rc)); then echo 'npm test: some tests failed (the failures are listed above, in their group)' >&2; fi
exit $rc
