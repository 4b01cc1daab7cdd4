#!/usr/bin/env bash
# scripts/sanitize.sh refuses what it cannot do, before any set-up or build: unknown options, two modes, options after
# test names, test names that are no program, names with --jobs or --self-test; each exits 2 naming the problem. And
# --help prints the modes and exits 0.
set -uo pipefail
SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/sanitize.sh"
fail=0
# $1 = what the message must contain; the rest = the arguments
refused() {
  local want="$1"; shift
  local out rc
  out=$(PPCTL_SANITIZE_BUILD_DIR=/nonexistent PPCTL_TSAN_BUILD_DIR=/nonexistent bash "$SCRIPT" "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: sanitize.sh $* exited $rc, expected 2 with '$want'; it said:" >&2
    echo "$out" | head -5 >&2
    fail=1
  fi
}
refused "unknown option '--bogus'" --bogus
refused "unknown option '--jobs=1'" --jobs=1
refused "--thread and --torch are two modes" --torch --thread
refused "--self-test and --thread are two modes" --thread --self-test
refused "options come before test names: '--thread' follows one" core_tests --thread
refused "'no_such_tests' is not a test program" no_such_tests
refused "'no_such_tests' is not a test program" --torch core_tests no_such_tests
refused "--jobs runs its own jobs" --jobs core_tests
refused "--jobs runs its own jobs" --jobs --torch
refused "--jobs runs its own jobs" --self-test --jobs
refused "--self-test runs its planted faults only" --self-test core_tests
out=$(bash "$SCRIPT" --help 2>&1); rc=$?
if [ "$rc" -ne 0 ] || ! grep -q -- "--thread --jobs" <<<"$out"; then
  echo "FAIL: sanitize.sh --help exited $rc without the modes" >&2; fail=1
fi
exit "$fail"
