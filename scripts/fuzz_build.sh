#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan; torch-free) into build/fuzz (or
# $PPCTL_FUZZ_BUILD_DIR). Fails naming the Debian packages when clang or libFuzzer is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_FUZZ_BUILD_DIR:-$ROOT/build/fuzz}"
CXX_FUZZ="${PPCTL_FUZZ_CXX:-clang++}"

if ! command -v "$CXX_FUZZ" >/dev/null; then
  echo "fuzz_build: $CXX_FUZZ not found: the fuzz targets need clang with libFuzzer (fix: install the Debian" \
       "packages clang and libclang-rt-14-dev; scripts/setup.sh does)" >&2
  exit 1
fi
RUNTIME="$("$CXX_FUZZ" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
if [ ! -f "$RUNTIME" ]; then
  echo "fuzz_build: libFuzzer is missing ($RUNTIME does not exist) (fix: install the Debian package" \
       "libclang-rt-14-dev, which holds clang's fuzzer and sanitizer runtimes; scripts/setup.sh does)" >&2
  exit 1
fi
LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT/tests/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" "${LAUNCHER[@]}" >&2
fi
cmake --build "$BUILD" -j "${PPCTL_FUZZ_JOBS:-2}" >&2
