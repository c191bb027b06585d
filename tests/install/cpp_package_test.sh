#!/usr/bin/env bash
# Install.CppPackage: `cmake --install` into a temp prefix, then a project outside the tree
# (outside_project/) configured with find_package(airt CONFIG REQUIRED), built, and run: its
# Init starts a local cluster from the prefix's bin/ (found from lib/libairt_driver.so).
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
for f in lib/libairt_api.so lib/libairt_driver.so include/airt/api.h include/airt/driver.h \
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
ldd "$work/build/tasks" | grep -qF "$prefix/lib/libairt_driver.so" ||
  fail "tasks does not load the prefix's libairt_driver.so: $(ldd "$work/build/tasks")"

echo "==> run tasks (Init starts a local cluster from $prefix/bin)"
# Nothing but the prefix can provide the daemons: no AIRT_BIN_DIR, no build tree on PATH.
env -u AIRT_ADDRESS -u AIRT_BIN_DIR PATH=/usr/bin:/bin "$work/build/tasks" >"$work/run.log" 2>&1 &
driver_pid=$!
deadline=$((SECONDS + 120))
while kill -0 "$driver_pid" 2>/dev/null && ((SECONDS < deadline)); do
  sleep 0.2
done
if kill -0 "$driver_pid" 2>/dev/null; then
  cat "$work/run.log"
  fail "tasks did not finish within 120 s"
fi
status=0
wait "$driver_pid" || status=$?
driver_pid=""
cat "$work/run.log"
((status == 0)) || fail "tasks exited with $status"
grep -qF "1 + 2 = 3, then doubled: 6" "$work/run.log" || fail "wrong task results"
grep -qF "sum of 0..99999 computed remotely: 4999950000" "$work/run.log" || fail "wrong sum"
grep -qF "40 put, plus 2 remotely: 42" "$work/run.log" || fail "wrong put result"
echo "PASS"
