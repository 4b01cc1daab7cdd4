#!/usr/bin/env bash
# Benchmark: time to generate, add communication to, validate and simulate schedules with p = 64
# stages and m = 256 microbatches, and to simulate a 1,024-rank job (p = 64 x dp = 16). Prints
# tables. Usage: scripts/bench/simulate_scale.sh (builds the simulate_scale target first).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${PPCTL_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" --target simulate_scale
"$BUILD/bench/simulate_scale"
