#!/usr/bin/env bash
# The tokens example end to end: sets up (which trains the SentencePiece tokenizer once) and builds
# ppctl if needed, prepares the fortunes text as a Megatron indexed dataset in <clone>/data/ (a few
# seconds; redone every run so it always matches the tokenizer), then trains configs/example-tokens.yaml.
# Extra arguments go to `ppctl train`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${PPCTL_BUILD_DIR:-$ROOT/build}"
TOKENIZERS="${PPCTL_TOKENIZERS:-${XDG_CACHE_HOME:-$HOME/.cache}/ppctl/tokenizers}"
"$ROOT/scripts/build.sh" --target ppctl
mkdir -p "$ROOT/data"
"$BUILD/app/ppctl" data prepare --model "$TOKENIZERS/fortunes-4096.model" \
  --input /usr/share/games/fortunes/*.u8 --document-separator % --append-eod \
  --output "$ROOT/data/fortunes-sp4096"
"$BUILD/app/ppctl" plan "$ROOT/configs/example-tokens.yaml"
exec "$BUILD/app/ppctl" train "$ROOT/configs/example-tokens.yaml" "$@"
