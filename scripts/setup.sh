#!/usr/bin/env bash
# Installs everything ppctl needs on Debian 12, idempotently: Debian packages (Catch2 v3 from
# bookworm-backports) and a virtual env holding torch==2.11.0 (LibTorch). Fast when all is there.
# Prints nothing but progress on stderr; the env's python path is printed on stdout.
set -euo pipefail

TORCH_VERSION=2.11.0
# The venv holds LibTorch, which a build links against (its RUNPATH points into the venv). The default, in
# this user's cache, serves this user; PPCTL_VENV outside any home (e.g. /opt/ppctl/venv) is an install that
# every user can run (docs/launching.md, "Installs shared by several users"), made readable by everyone below.
VENV="${PPCTL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ppctl/venv}"
# What setup makes (venv, tokenizer) is readable by every user whatever the caller's umask; a home of mode
# 0700 still keeps the default venv private.
umask 022
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(build-essential cmake ninja-build ccache git python3 python3-venv procps
  libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev libgloo-dev nlohmann-json3-dev fortunes
  munge slurmctld slurmd slurm-client)  # the last four: the local Slurm cluster of tests/slurm/
APT_PACKAGES+=(libsentencepiece-dev sentencepiece python3-sentencepiece)  # `ppctl data prepare`'s
# tokenizer library; spm_train; the same library's Python binding, which tests/prepare/test_prepare.py compares with
APT_PACKAGES+=(libpcre2-dev libunistring-dev)  # `data prepare --tokenizer tokenizer.json`: the pre-tokenizer
# regexes (PCRE2 with Unicode properties) and the NFC normalizer (libunistring)
APT_PACKAGES+=(clang libclang-rt-14-dev)  # tests/fuzz: clang 14 with its libFuzzer, ASan and UBSan runtimes
APT_PACKAGES+=(libprotobuf-dev protobuf-compiler)  # TensorBoard event files (lib/interop/tensorboard_event.proto)
BACKPORTS_PACKAGES=(catch2)

missing=()
for p in "${APT_PACKAGES[@]}" "${BACKPORTS_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Catch2 must be v3 (bookworm itself has v2).
if dpkg-query -W -f='${Version}' catch2 2>/dev/null | grep -q '^2\.'; then missing+=(catch2); fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  if ! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      | $SUDO tee /etc/apt/sources.list.d/ppctl-backports.sources >/dev/null
  fi
  $SUDO apt-get update -q >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${APT_PACKAGES[@]}" >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -t bookworm-backports "${BACKPORTS_PACKAGES[@]}" >&2
fi

# The PyPI wheel is LibTorch built for CUDA 13; its CMake config needs the CUDA toolkit to configure
# (nothing CUDA has to run). NCCL comes with the wheel.
if [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "setup: the CUDA toolkit (nvcc) is not at ${CUDA_HOME:-/usr/local/cuda}: LibTorch's CMake config" \
       "needs it to build ppctl, even on machines without a GPU (fix: install NVIDIA's CUDA 13 toolkit" \
       "for Debian 12, or set CUDA_HOME)" >&2
  exit 1
fi

# Checking the installed version by its metadata folder is instant; importing torch takes ~2 s.
if ! compgen -G "$VENV/lib/python3*/site-packages/torch-$TORCH_VERSION*.dist-info" >/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION into $VENV (a few GB, once)" >&2
  # A shared folder such as /opt/ppctl may need sudo to make; it is then this user's, to install into.
  mkdir -p "$(dirname "$VENV")" 2>/dev/null || $SUDO install -d -m 0755 -o "$(id -u)" -g "$(id -g)" "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" >&2
fi

# The reference implementations the tests compare against (pinned). A stamp holding the requirement
# files' checksum keeps this instant once they are installed.
REQS=("$(dirname "${BASH_SOURCE[0]}")/test-requirements.txt" "$(dirname "${BASH_SOURCE[0]}")/test-requirements-nodeps.txt")
STAMP="$VENV/.ppctl-test-requirements"
WANT="$(cat "${REQS[@]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "setup: installing the test reference packages (transformers, megatron-core, sentencepiece, ...)" >&2
  "$VENV/bin/python" -m pip install -q -r "${REQS[0]}" >&2
  "$VENV/bin/python" -m pip install -q --no-deps -r "${REQS[1]}" >&2
  echo "$WANT" > "$STAMP"
fi

# PPCTL_VENV given: a shared install. Every file readable and every folder searchable by everyone (a venv made
# earlier under a stricter umask is fixed: ~0.1 s to check), and a note when a folder above it keeps other
# users out (a build against it then runs for this user only: the light ppctl names that folder to them).
if [ -n "${PPCTL_VENV:-}" ]; then
  if [ -n "$(find "$VENV" \( ! -perm -o=r -o \( -type d ! -perm -o=x \) \) -print -quit)" ]; then
    echo "setup: making $VENV readable by every user (PPCTL_VENV: an install shared by several users)" >&2
    chmod -R a+rX "$VENV"
  fi
  dir="$VENV"
  while dir="$(dirname "$dir")" && [ "$dir" != "/" ]; do
    case "$(stat -c %A "$dir")" in
      *x|*t) ;;
      *) echo "setup: note: $dir ($(stat -c '%A, owner %U' "$dir")) is closed to other users, so a build against" \
              "PPCTL_VENV=$VENV runs for $(stat -c %U "$dir") only (fix: a venv under folders every user can" \
              "open, e.g. PPCTL_VENV=/opt/ppctl/venv)" >&2
         break ;;
    esac
  done
fi

# The SentencePiece model of configs/example-tokens.yaml: trained once (~15 s) on the fortunes text with
# Debian's spm_train, kept next to the venv (outside the clone) so rebuilds and fresh clones reuse it.
TOKENIZERS="${PPCTL_TOKENIZERS:-${XDG_CACHE_HOME:-$HOME/.cache}/ppctl/tokenizers}"
if [ ! -s "$TOKENIZERS/fortunes-4096.model" ]; then
  echo "setup: training the example SentencePiece tokenizer (vocabulary 4096) into $TOKENIZERS" >&2
  mkdir -p "$TOKENIZERS"
  work="$(mktemp -d "$TOKENIZERS/.train.XXXXXX")"
  spm_train --input="$(ls /usr/share/games/fortunes/*.u8 | paste -sd,)" --model_prefix="$work/fortunes-4096" \
    --vocab_size=4096 --model_type=unigram --num_threads=2 --minloglevel=2 >&2
  mv "$work/fortunes-4096.vocab" "$TOKENIZERS/fortunes-4096.vocab"
  mv "$work/fortunes-4096.model" "$TOKENIZERS/fortunes-4096.model"  # last: its presence means done
  rmdir "$work"
fi

echo "$VENV/bin/python"
