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
else
  # The build links LibTorch from the venv it was configured with (its RUNPATH points there): another
  # PPCTL_VENV needs its own build folder, or the binaries would still load the old venv's libraries.
  configured="$(sed -n 's/^PPCTL_PYTHON:FILEPATH=//p' "$BUILD/CMakeCache.txt")"
  if [ -n "$configured" ] && [ "$configured" != "$PYTHON" ]; then
    echo "build: $BUILD was configured with PPCTL_PYTHON=$configured, but scripts/setup.sh's venv is now $PYTHON" \
         "(PPCTL_VENV): its binaries would load LibTorch from the other venv (fix: build into a new folder," \
         "PPCTL_BUILD_DIR=$BUILD-shared scripts/build.sh, or remove $BUILD)" >&2
    exit 1
  fi
fi
cmake --build "$BUILD" "$@" >&2
