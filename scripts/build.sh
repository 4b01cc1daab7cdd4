#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and builds ppctl and its tests into build/ (or $PPCTL_BUILD_DIR).
# Extra arguments are passed to `cmake --build` (e.g. --target config_tests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_BUILD_DIR:-$ROOT/build}"
PYTHON="$("$ROOT/scripts/setup.sh")"

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPPCTL_PYTHON="$PYTHON" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
fi
cmake --build "$BUILD" "$@" >&2
