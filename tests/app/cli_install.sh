#!/usr/bin/env bash
# End-to-end tests of the installed programs: the light ppctl and ppctl-torch beside it, their load-time
# libraries, and a build run by a user other than the one who built it.
# Usage: cli_install.sh CASE PPCTL_BINARY (exits non-zero on failure). Helpers: tests/app/cli_lib.sh.
# shellcheck source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh" "$@"

case "$CASE" in
  no_driver_dependency)
    # The binary must start where no GPU driver is installed: libcuda must not be a load-time need
    # (of ppctl-torch, which links LibTorch; ppctl itself links none: case light_front).
    ldd "$PPCTL_TORCH" > "$WORK/out" 2>&1 || fail "ldd failed"
    grep -q "libtorch_cuda.so" "$WORK/out" || fail "the CUDA/NCCL path is not linked"
    grep -q "libcuda.so" "$WORK/out" && fail "libcuda.so is a load-time dependency"
    grep -q "not found" "$WORK/out" && fail "a shared library is not found"
    "$PPCTL" --version > "$WORK/out" 2>&1 || fail "ppctl --version failed"
    ;;
  light_front)
    # Issue 13: ppctl links no LibTorch (nor anything that loads it) and plans by itself; every other
    # command, --help and --version run in ppctl-torch beside it, exec'ed in the same process.
    ldd "$PPCTL" > "$WORK/out" 2>&1 || fail "ldd failed"
    grep -Eq "libtorch|libc10|libcuda|libnccl" "$WORK/out" && fail "ppctl loads LibTorch or CUDA"
    grep -q "not found" "$WORK/out" && fail "a shared library is not found"
    LD_DEBUG=files "$PPCTL" plan "$ROOT/configs/example.yaml" > /dev/null 2> "$WORK/out" || fail "plan exited $?"
    grep -Eq "file=[^ ]*(libtorch|libc10)" "$WORK/out" && fail "ppctl plan loaded LibTorch"
    grep -q "file=[^ ]*libstdc++" "$WORK/out" || fail "LD_DEBUG=files shows no library loads: the check cannot see"
    # The same plan, bytes for bytes, from both executables: good specs, options and bad input alike.
    tiny_job 2 5 ""
    cp "$WORK/job.yaml" "$WORK/bad.yaml"
    sed -i 's/hidden: 32/hiden: 32/' "$WORK/bad.yaml"
    for args in "$ROOT/configs/example.yaml --comm --timeline --costs 1,2,1,1,2,3,1,2,1,2,1,1,1,2,1,1" \
                "$WORK/job.yaml --balance --p2p-latency 0.5" "$WORK/bad.yaml" "$WORK/none.yaml" \
                "$WORK/job.yaml --costs 1,2,3" "--help"; do
      # shellcheck disable=SC2086  # $args: several words
      "$PPCTL" plan $args > "$WORK/light" 2>&1; light_rc=$?
      # shellcheck disable=SC2086
      (exec -a "$PPCTL" "$PPCTL_TORCH" plan $args) > "$WORK/torch" 2>&1; torch_rc=$?
      [ "$light_rc" -eq "$torch_rc" ] || fail "plan $args: exit code $light_rc, ppctl-torch's $torch_rc"
      cmp -s "$WORK/light" "$WORK/torch" || { diff "$WORK/light" "$WORK/torch" >&2; fail "plan $args: output differs from ppctl-torch's"; }
    done
    "$PPCTL" plan "$WORK/bad.yaml" > "$WORK/out" 2>&1
    [ $? -eq 2 ] && grep -q "model.hiden: unknown key" "$WORK/out" || fail "bad spec: not exit 2 naming the key"
    # --help and --version come from ppctl-torch: every command listed, as before.
    "$PPCTL" --help > "$WORK/out" 2>&1 || fail "--help exited $?"
    for cmd in plan train verify export data; do grep -q "^  $cmd  " "$WORK/out" || fail "--help does not list $cmd"; done
    grep -q "^Usage: $PPCTL \[OPTIONS\] SUBCOMMAND" "$WORK/out" || fail "--help does not name ppctl as typed"
    [ "$("$PPCTL" --version)" = "ppctl 0.1.0" ] || fail "--version"
    "$PPCTL" train > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 2 ] && grep -q "spec is required" "$WORK/out" || fail "train without a spec: exit code $rc"
    # train runs in ppctl-torch in the same process (signals reach it; SIGTERM ends it as before).
    tiny_job 2 100000 ""
    "$PPCTL" train "$WORK/job.yaml" > "$WORK/out" 2>&1 &
    launcher=$!
    for _ in $(seq 1 100); do [ "$(readlink "/proc/$launcher/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] && break; sleep 0.1; done
    [ "$(readlink "/proc/$launcher/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] || fail "pid $launcher did not become ppctl-torch"
    wait_for_line "step 1/" 120
    for pid in $(pgrep -f "worker $WORK/job.yaml"); do
      [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$PPCTL_TORCH")" ] || fail "worker $pid does not run ppctl-torch"
    done
    kill -TERM "$launcher"
    wait_bounded "$launcher" 60
    [ "$rc" -eq 143 ] || fail "SIGTERM: exit code $rc, expected 143"
    no_leftovers
    # Without ppctl-torch beside it (or not executable), ppctl names the path and the fix; plan still works.
    mkdir "$WORK/alone"
    cp "$PPCTL" "$WORK/alone/ppctl"
    "$WORK/alone/ppctl" plan "$WORK/job.yaml" > "$WORK/out" 2>&1 || fail "plan without ppctl-torch exited $?"
    "$WORK/alone/ppctl" train "$WORK/job.yaml" > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "train without ppctl-torch: exit code $rc, expected 1"
    grep -qF "cannot run \`ppctl train\`: $WORK/alone/ppctl-torch is missing" "$WORK/out" || fail "the missing path is not named"
    grep -qF "fix: rebuild with scripts/build.sh" "$WORK/out" || fail "no fix for a missing ppctl-torch"
    touch "$WORK/alone/ppctl-torch"
    "$WORK/alone/ppctl" --version > "$WORK/out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -qF "$WORK/alone/ppctl-torch is not executable" "$WORK/out" || fail "not executable: exit code $rc"
    ;;
  shared_install)
    # Issue 26 item 5: a build run by a user other than the one who built it. As root, a non-root user
    # (ppctl-nonroot, added with useradd when missing) runs `ppctl --version` and a short job from a folder it
    # owns: (a) with the build's venv readable by every user, the job trains; (b) with the venv behind a folder
    # that user cannot open (as the default venv in root's 0700 home is), the light ppctl names that folder and
    # the fix instead of the loader's bare exit 127, and `ppctl plan` (no LibTorch) still works. The venv is
    # neither copied (GBs) nor chmod'ed: in a private mount namespace a fresh folder of mode 0755 (a) or 0700
    # (b) is put over the first folder on its path the user cannot open (else over the venv's parent), with
    # the venv's side of it bound back in, so the path the build recorded (RUNPATH) stays.
    [ "$(id -u)" -eq 0 ] || { echo "SKIP [$CASE]: needs root (useradd, a mount namespace); run the test as root" >&2; exit 77; }
    library="${PPCTL_TEST_TORCH_LIBRARY:-}"
    [ -f "$library" ] || fail "PPCTL_TEST_TORCH_LIBRARY ('$library') names no file (CTest sets it to the build's libtorch)"
    user=ppctl-nonroot
    id -u "$user" > /dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$user" \
      || fail "useradd $user failed"
    uid=$(id -u "$user"); gid=$(id -g "$user")
    as_user() { setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$@"; }
    chmod 0711 "$WORK"
    mkdir "$WORK/home" "$WORK/stage"
    tiny_job 2 2 ""
    cp "$WORK/job.yaml" "$WORK/corpus.txt" "$WORK/home/"
    chown -R "$uid:$gid" "$WORK/home"
    cd "$WORK/home" || fail "cd $WORK/home"
    as_user test -x "$PPCTL" || fail "$user cannot run $PPCTL: a folder on its path is closed to other users"
    # The first folder on the library's path the user cannot open; the venv (the folder with pyvenv.cfg).
    blocked="" path=""
    IFS=/ read -ra parts <<< "${library%/*}"
    for part in "${parts[@]}"; do
      [ -n "$part" ] || continue
      path="$path/$part"
      as_user test -x "$path" || { blocked="$path"; break; }
    done
    venv="${library%/*}"
    while [ "$venv" != "/" ] && [ ! -f "$venv/pyvenv.cfg" ]; do venv=$(dirname "$venv"); done
    [ "$venv" != "/" ] || venv=$(dirname "${library%/*}")
    cover="${blocked:-$(dirname "$venv")}"
    keep="${library#"$cover"/}"; keep="${keep%%/*}"  # the entry of $cover on the way to the library
    with_cover() {  # $1 = mode of the folder over $cover; the rest: a command run as $user in the namespace
      local mode=$1; shift
      unshare --mount --propagation private bash -c '
        cover=$1 keep=$2 stage=$3 mode=$4; shift 4
        mount --bind "$cover/$keep" "$stage" && mount -t tmpfs -o "mode=$mode,size=1m" ppctl-test "$cover" \
          && mkdir "$cover/$keep" && mount --bind "$stage" "$cover/$keep" || exit 99
        exec "$@"' _ "$cover" "$keep" "$WORK/stage" "$mode" \
        setpriv --reuid="$uid" --regid="$gid" --clear-groups env -i PATH=/usr/bin:/bin HOME="$WORK/home" "$@"
    }
    # (a) A venv every user can read.
    with_cover 0755 "$PPCTL" --version > "$WORK/out" 2>&1 || fail "ppctl --version as $user, venv readable: exit $?"
    grep -q "^ppctl [0-9]" "$WORK/out" || fail "no version line"
    with_cover 0755 timeout 120 "$PPCTL" train job.yaml > "$WORK/out" 2>&1 || fail "train as $user, venv readable: exit $?"
    grep -q "training finished" "$WORK/out" || fail "no 'training finished'"
    [ "$(stat -c %U "$(sed -n 's/.*run directory: //p' "$WORK/out" | tail -1)")" = "$user" ] || fail "the run directory is not $user's"
    # (b) The venv behind a folder of mode 0700 that the user cannot open: named, with the fix.
    libdir="${library%/*}"
    want="ppctl-torch loads LibTorch from $libdir (the virtual env this ppctl was built with), and user $user (uid $uid) cannot read it: $cover is not open (searchable) by it (mode 0700, owner root) (fix: install the virtual env where every user can read it"
    for command in "--version" "train job.yaml"; do
      # shellcheck disable=SC2086  # $command: several words
      with_cover 0700 "$PPCTL" $command > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 1 ] || fail "ppctl $command with the venv closed to $user: exit $rc, expected 1 (127 is the loader's)"
      grep -qF "error: cannot run \`ppctl ${command%% *}\`: $want" "$WORK/out" || fail "ppctl $command does not name $cover and the fix"
    done
    with_cover 0700 "$PPCTL" plan job.yaml > "$WORK/out" 2>&1 || fail "ppctl plan needs no LibTorch, yet exited $?"
    # The real layout, when a folder on the way is closed to the user (root's home for the default venv).
    if [ -n "$blocked" ]; then
      as_user "$PPCTL" --version > "$WORK/out" 2>&1
      rc=$?
      [ "$rc" -eq 1 ] && grep -qF "error: cannot run \`ppctl --version\`: ppctl-torch loads LibTorch from $libdir" "$WORK/out" \
        || fail "the build's own venv, closed to $user at $blocked: exit $rc without the message"
    fi
    cd "$ROOT" || true
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS [$CASE]"
