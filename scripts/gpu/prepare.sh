#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with network): gathers what scripts/gpu/run.sh needs on a GPU machine
# where nothing can be installed, into .gpu-deps/ (git-ignored): the Debian packages ppctl builds with,
# unpacked with `dpkg -x` (headers, CMake configs, shared libraries, cmake and ninja themselves), and
# the example's training text. Carry .gpu-deps/ to the GPU machine with the working tree.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEPS="$ROOT/.gpu-deps"
PACKAGES=(libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libgloo-dev cmake cmake-data ninja-build libjsoncpp25 librhash0 libuv1 libarchive13)
mkdir -p "$DEPS/debs" "$DEPS/root" "$DEPS/corpus"
cd "$DEPS/debs"
apt-get download "${PACKAGES[@]}"
for deb in ./*.deb; do dpkg -x "$deb" "$DEPS/root"; done
rm -rf "$DEPS/debs"
# Only what a build needs: the device's carry is 64 MiB with the working tree.
rm -rf "$DEPS/root/usr/share/"{doc,man,vim,emacs,bash-completion,aclocal} \
  "$DEPS/root/usr/share/cmake-3.25/Help" "$DEPS/root/usr/bin/"{cpack,ctest,cmake-gui}
# The example's text (configs/example.yaml reads the fortunes files).
cp -L /usr/share/games/fortunes/*.u8 "$DEPS/corpus/"
du -sh "$DEPS" >&2
