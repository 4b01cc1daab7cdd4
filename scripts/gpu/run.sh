#!/usr/bin/env bash
# Run ON A GPU MACHINE where nothing can be installed (prepared: scripts/gpu/prepare.sh, then carry
# .gpu-deps/ with the tree). NOT RUN in this project so far: no GPU machine was available when it was
# written. Builds ppctl against that machine's own torch (python3 -c 'import torch'), then trains the
# example (configs/example.yaml) twice, writing everything to ${OUT:-runs/gpu}:
#   1. pp = 1 on cuda:0 (backend auto = NCCL, one rank);
#   2. 2 stages on the one GPU over Gloo (NCCL refuses two ranks on one GPU), i.e. backend gloo.
# Usage: scripts/gpu/run.sh [STEPS]   (default 100 steps each)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEPS="$ROOT/.gpu-deps/root"
OUT="${OUT:-$ROOT/runs/gpu}"
STEPS="${1:-100}"
BUILD="$ROOT/build-gpu"
mkdir -p "$OUT"
[ -d "$DEPS/usr" ] || { echo "run.sh: $DEPS is missing (fix: run scripts/gpu/prepare.sh on a machine with network and carry .gpu-deps/)" >&2; exit 1; }

# The carried tools and libraries come after the machine's own.
export PATH="$PATH:$DEPS/usr/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$DEPS/usr/lib/x86_64-linux-gnu"
export CMAKE_ROOT="$DEPS/usr/share/cmake-3.25"
PYTHON="${PPCTL_PYTHON:-$(command -v python3)}"
# LibTorch's CMake config needs a CUDA toolkit (nvcc, headers) to configure, as on the build machines.
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "run.sh: no CUDA toolkit at $CUDA_HOME (bin/nvcc): LibTorch's CMake config needs one to configure (fix: set CUDA_HOME to the machine's toolkit)" >&2
  exit 1
fi

{
  echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} 2>&1 | tee "$OUT/machine.txt"

# Configure and build only the binary (no tests): torch from this machine, the rest from .gpu-deps.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$DEPS/usr/bin/ninja" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DPPCTL_PYTHON="$PYTHON" -DCUDAToolkit_ROOT="$CUDA_HOME" \
  -DCMAKE_PREFIX_PATH="$DEPS/usr;$DEPS/usr/lib/x86_64-linux-gnu/cmake" \
  -DCMAKE_CXX_FLAGS="-isystem $DEPS/usr/include" > "$OUT/configure.log" 2>&1 \
  || { tail -n 40 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD" --target ppctl -j "$(nproc)" > "$OUT/build.log" 2>&1 \
  || { tail -n 40 "$OUT/build.log"; exit 1; }
PPCTL="$BUILD/app/ppctl"

# Two variants of the example: the same model, data and seed; only the layout and device differ.
# (tie_embeddings etc. stay at the example's values.)
variant() {  # $1 = name, $2 = stages, $3 = backend
  sed -e "s#^  path: .*#  path: $ROOT/.gpu-deps/corpus/*.u8#" \
      -e "s#^  stages: .*#  stages: $2#" \
      -e "s#^  device: .*#  device: cuda#" \
      -e "s#^  backend: .*#  backend: $3#" \
      -e "s#^  layers: .*#  layers: 4#" \
      -e "s#^  dir: .*#  dir: $OUT/checkpoints-$1#" \
      "$ROOT/configs/example.yaml" > "$OUT/$1.yaml"
  echo "== $1: $2 stage(s), backend $3, $STEPS steps"
  "$PPCTL" plan "$OUT/$1.yaml" | head -n 8
  local start=$SECONDS
  "$PPCTL" train "$OUT/$1.yaml" --steps "$STEPS" > "$OUT/$1.log" 2>&1 \
    || { echo "$1 failed:"; tail -n 30 "$OUT/$1.log"; return 1; }
  grep -E "\| loss |timing over|memory:" "$OUT/$1.log"
  echo "wall time $((SECONDS - start)) s (launch to exit)"
}
status=0
variant pp1_cuda 1 auto | tee "$OUT/pp1_cuda.summary" || status=1
variant pp2_cuda_gloo 2 gloo | tee "$OUT/pp2_cuda_gloo.summary" || status=1
exit $status
