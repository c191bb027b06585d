#!/usr/bin/env bash
# Install.CppPackage: `cmake --install` into a temp prefix, then a project outside the tree
# (outside_project/) configured with find_package(airt CONFIG REQUIRED), built, and run: its
# Init starts a local cluster from the prefix's bin/ (found from lib/libairt_driver.so). The
# project uses airt::driver (tasks), airt::collective (collective_sgd, run) and
# airt::tune_sweep (cpp_tune_sweep, built only: its trials ask for GPUs).
# Env: AIRT_SOURCE_DIR, AIRT_BUILD_DIR (the build to install), CMAKE (the cmake to use).
set -euo pipefail
: "${AIRT_SOURCE_DIR:?}" "${AIRT_BUILD_DIR:?}"
CMAKE="${CMAKE:-cmake}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Under the build tree, under a fixed name, so that ccache (base_dir) hits on a rerun; wiped
# first and removed at the end, whatever happens.
work="$AIRT_BUILD_DIR/tests/install/cpp_package.tmp"
driver_pid=""
cleanup() {
  if [[ -n "$driver_pid" ]] && kill -0 "$driver_pid" 2>/dev/null; then
    kill -KILL "$driver_pid" 2>/dev/null || true  # its cluster dies with it (PR_SET_PDEATHSIG)
    wait "$driver_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"

echo "==> cmake --install $AIRT_BUILD_DIR --prefix $prefix"
"$CMAKE" --install "$AIRT_BUILD_DIR" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
for f in bin/airt bin/airt-head bin/airt-node bin/airt-worker; do
  [[ -x "$prefix/$f" ]] || fail "$prefix/$f is missing or not executable"
done
for f in lib/libairt_api.so lib/libairt_driver.so lib/libairt_collective.so lib/libairt_tune.a \
  lib/libairt_tune_sweep.a include/airt/collective.h include/airt/tune/sweep.h \
  include/airt/api.h include/airt/driver.h \
  include/airt/internal/serialization.h include/ray/api.h lib/cmake/airt/airtConfig.cmake \
  lib/cmake/airt/airtConfigVersion.cmake lib/cmake/airt/airtTargets.cmake \
  lib/cmake/airt/AirtRemote.cmake; do
  [[ -f "$prefix/$f" ]] || fail "$prefix/$f is missing"
done
[[ ! -e "$prefix/airt" ]] || fail "the Python wheel's layout ($prefix/airt/) was installed too"
# No installed binary may still point into the build tree.
if command -v readelf >/dev/null; then
  for f in "$prefix"/bin/* "$prefix"/lib/*.so; do
    if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -qF "$AIRT_BUILD_DIR"; then
      fail "$f keeps an RPATH into the build tree: $(readelf -d "$f" | grep -E 'R(UN)?PATH')"
    fi
  done
fi

echo "==> configure and build outside_project against $prefix"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
"$CMAKE" -S "$AIRT_SOURCE_DIR/tests/install/outside_project" -B "$work/build" "${generator[@]}" \
  "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DAIRT_EXAMPLES="$AIRT_SOURCE_DIR/examples" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring the outside project failed"; }
"$CMAKE" --build "$work/build" -j2 >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "building the outside project failed"; }
tasks_deps=$(ldd "$work/build/tasks")  # whole, so that grep -q cannot cut the pipe (pipefail)
grep -qF "$prefix/lib/libairt_driver.so" <<<"$tasks_deps" ||
  fail "tasks does not load the prefix's libairt_driver.so: $tasks_deps"
collective_lib=$(find "$work/build" -name 'libcollective_sgd_functions.so' | head -1)
[[ -n "$collective_lib" ]] || fail "the outside project built no libcollective_sgd_functions.so"
collective_deps=$(ldd "$collective_lib")  # whole, so that grep -q cannot cut the pipe (pipefail)
grep -qF "$prefix/lib/libairt_collective.so" <<<"$collective_deps" ||
  fail "$collective_lib does not load the prefix's libairt_collective.so: $collective_deps"
[[ -x "$work/build/cpp_tune_sweep" ]] || fail "cpp_tune_sweep (airt::tune_sweep) was not built"

# Runs the outside project's program $1 (output in $work/$1.log) with nothing but the prefix to
# provide the daemons (no AIRT_BIN_DIR, no build tree on PATH): its Init starts a local cluster
# from $prefix/bin. Fails unless it exits 0 within 120 s.
run_program() {
  local name=$1 status=0
  echo "==> run $name (Init starts a local cluster from $prefix/bin)"
  env -u AIRT_ADDRESS -u AIRT_BIN_DIR PATH=/usr/bin:/bin "$work/build/$name" \
    >"$work/$name.log" 2>&1 &
  driver_pid=$!
  local deadline=$((SECONDS + 120))
  while kill -0 "$driver_pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2
  done
  if kill -0 "$driver_pid" 2>/dev/null; then
    cat "$work/$name.log"
    fail "$name did not finish within 120 s"
  fi
  wait "$driver_pid" || status=$?
  driver_pid=""
  cat "$work/$name.log"
  ((status == 0)) || fail "$name exited with $status"
}

run_program tasks
grep -qF "1 + 2 = 3, then doubled: 6" "$work/tasks.log" || fail "wrong task results"
grep -qF "sum of 0..99999 computed remotely: 4999950000" "$work/tasks.log" || fail "wrong sum"
grep -qF "40 put, plus 2 remotely: 42" "$work/tasks.log" || fail "wrong put result"
# Two ranks allreduce through the prefix's libairt_collective.so.
run_program collective_sgd
grep -qF "reached the threshold" "$work/collective_sgd.log" || fail "collective_sgd did not converge"
echo "PASS"
