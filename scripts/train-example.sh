#!/usr/bin/env bash
# Sets up and builds ppctl if needed, then trains the example job (configs/example.yaml:
# a byte-level GPT on the fortunes text, 4 stages, 1F1B, CPU). Extra arguments go to `ppctl train`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" --target ppctl
exec "$BUILD/app/ppctl" train "$ROOT/configs/example.yaml" "$@"
