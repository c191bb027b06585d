#!/usr/bin/env bash
# Install.Wheel: `pip wheel` (scikit-build-core over the existing build folder), the wheel into a
# fresh venv, then what a Python user does: `VENV/bin/airt start --head --port P`, a driver
# (wheel_driver.py) joining with address="auto" and running a Python task on the venv's
# interpreter, `airt stop`. Then the node's own default (no AIRT_PYTHON): the python3 on PATH when
# it imports airt (the venv's), and a clear refusal when it does not. All in a temp folder; every
# daemon is stopped by its pid whatever happens. Exit 77 ("skipped: ...") only when no Python with
# scikit-build-core is found and pip cannot install it.
# Env: AIRT_SOURCE_DIR, AIRT_BUILD_DIR (the build folder the wheel reuses), AIRT_BUILD_PYTHON (the
# build's Python3_EXECUTABLE), AIRT_WHEEL_PYTHON (a Python to build with, tried first).
set -euo pipefail
: "${AIRT_SOURCE_DIR:?}" "${AIRT_BUILD_DIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }

# ---- a Python that builds the wheel ----------------------------------------------------------
# The build's own interpreter first: scikit-build-core sets Python3_EXECUTABLE to the one that
# runs it, so any other would reconfigure the build folder for itself (as scripts/setup's
# `pip install .` with .venv/bin/python does once).
builder=""
for candidate in "${AIRT_WHEEL_PYTHON:-}" "${AIRT_BUILD_PYTHON:-}" "$AIRT_SOURCE_DIR/.venv/bin/python"; do
  [[ -n "$candidate" && -x "$candidate" ]] || continue
  if "$candidate" -c "import scikit_build_core, pybind11" 2>/dev/null; then
    builder="$candidate"
    break
  fi
done
if [[ -z "$builder" ]]; then
  # Kept in the build folder: its CMake cache then keeps naming an interpreter that exists.
  build_venv="$AIRT_BUILD_DIR/tests/install/build-venv"
  if ! "$build_venv/bin/python" -c "import scikit_build_core, pybind11" 2>/dev/null; then
    rm -rf "$build_venv"
    /usr/bin/python3 -m venv --system-site-packages "$build_venv"
    "$build_venv/bin/python" -m pip install --disable-pip-version-check -q \
      -r "$AIRT_SOURCE_DIR/python/requirements-build.txt" >"$AIRT_BUILD_DIR/tests/install/build-venv.log" 2>&1 ||
      skip "no Python with scikit-build-core (scripts/setup puts it in .venv) and pip could not install python/requirements-build.txt (no network?): see $AIRT_BUILD_DIR/tests/install/build-venv.log"
  fi
  builder="$build_venv/bin/python"
fi
echo "==> building with $builder"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/airt-wheel-test-XXXXXX")"
venv="$tmp/venv"
sessions=()
# Stops every daemon `airt start` recorded in each session, by pid (SIGTERM, then SIGKILL), if it
# is still the binary that was started, then removes the temp folder.
cleanup() {
  for session in "${sessions[@]}"; do
    for pidfile in "$session"/session/pids/*.pid; do
      [[ -f "$pidfile" ]] || continue
      read -r pid binary <"$pidfile" || continue
      if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$binary" ]]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
          [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$binary" ]] || break
          sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"  # nothing of the source tree on the driver's sys.path

echo "==> pip wheel (build folder $AIRT_BUILD_DIR)"
"$builder" -m pip wheel "$AIRT_SOURCE_DIR" --disable-pip-version-check --no-build-isolation \
  --no-deps -w "$tmp/wheels" --config-settings=build-dir="$AIRT_BUILD_DIR" >"$tmp/wheel.log" 2>&1 ||
  { tail -n 60 "$tmp/wheel.log"; fail "pip wheel failed"; }
wheels=("$tmp"/wheels/airt-*.whl)
[[ -f "${wheels[0]}" ]] || fail "pip wheel made no airt wheel: $(ls "$tmp/wheels")"
echo "    ${wheels[0]##*/}"

echo "==> the wheel into a fresh venv"
"$builder" -m venv --system-site-packages "$venv"
# --no-index: its dependencies (cloudpickle, msgpack, numpy) are Debian's, seen by the venv.
"$venv/bin/python" -m pip install --disable-pip-version-check -q --no-index "${wheels[0]}" \
  >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "pip install of the wheel failed"; }
for script in airt airt-head airt-node; do
  [[ -x "$venv/bin/$script" ]] || fail "the wheel put no $script on the venv's PATH"
done
package="$("$venv/bin/python" -c 'import airt, os; print(os.path.dirname(airt.__file__))')"
[[ "$package" == "$venv"/* ]] || fail "import airt found $package, not the venv's"
for binary in airt airt-head airt-node airt-worker; do
  [[ -x "$package/$binary" ]] || fail "$package/$binary is missing or not executable"
done
"$venv/bin/airt" --help >/dev/null || fail "airt --help failed"

# A clean environment: nothing of this build, and a python3 on PATH (Debian's) without airt, so
# that only what the wheel itself does can make Python tasks run.
clean=(env -u AIRT_PYTHON -u AIRT_ADDRESS -u AIRT_BIN_DIR -u AIRT_TEMP_DIR -u PYTHONPATH)
free_port() { "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_cluster NAME PATH AIRT [flags]: `AIRT start --head` with that PATH, in session NAME.
start_cluster() {
  local name="$1" path="$2" airt="$3"
  shift 3
  sessions+=("$tmp/$name")
  "${clean[@]}" PATH="$path" "$airt" start --head --temp-dir="$tmp/$name" --num-cpus=2 \
    --object-store-memory=128M "$@" >"$tmp/$name.start.log" 2>&1 ||
    { cat "$tmp/$name.start.log"; fail "$airt start --head failed"; }
  cat "$tmp/$name.start.log"
}
# driver NAME ARGS...: wheel_driver.py in the venv, joining session NAME with address="auto".
driver() {
  local name="$1"
  shift
  "${clean[@]}" PATH="$venv/bin:/usr/bin:/bin" AIRT_TEMP_DIR="$tmp/$name" \
    timeout -k 5 120 "$venv/bin/python" "$AIRT_SOURCE_DIR/tests/install/wheel_driver.py" "$@" ||
    fail "the driver failed on session $name (logs: $tmp/$name/logs)"
}
stop_cluster() {
  local name="$1" airt="$2"
  "${clean[@]}" PATH=/usr/bin:/bin "$airt" stop --temp-dir="$tmp/$name" | tee "$tmp/$name.stop.log"
  grep -qF "Stopped 2 airt processes." "$tmp/$name.stop.log" || fail "airt stop did not stop the head and the node"
}

echo "==> venv/bin/airt start --head: Python tasks on the venv's interpreter"
port="$(free_port)"
start_cluster console /usr/bin:/bin "$venv/bin/airt" --port="$port"
grep -qF "Python tasks run with:          $venv/bin/python" "$tmp/console.start.log" ||
  fail "the console script did not give the node its interpreter"
# Whole, so that grep -q cannot cut the pipe (pipefail).
console_status=$("${clean[@]}" PATH=/usr/bin:/bin "$venv/bin/airt" status --temp-dir="$tmp/console")
grep -qF "1 alive" <<<"$console_status" || fail "airt status does not show the node: $console_status"
driver console ok "$venv"
stop_cluster console "$venv/bin/airt"

echo "==> the bundled airt, no AIRT_PYTHON, the venv first on PATH: the node takes its python3"
start_cluster path-venv "$venv/bin:/usr/bin:/bin" "$package/airt" --port=0
driver path-venv ok "$venv"
stop_cluster path-venv "$package/airt"

if /usr/bin/python3 -c "import airt" 2>/dev/null; then
  echo "==> (Debian's python3 imports an airt: the refusal case cannot be made here)"
else
  echo "==> the bundled airt, no AIRT_PYTHON, a python3 on PATH without airt: tasks refused"
  start_cluster path-debian /usr/bin:/bin "$package/airt" --port=0
  driver path-debian refused
  grep -rqF "cannot import airt" "$tmp/path-debian/logs" ||
    fail "the node's log does not say why it has no Python workers"
  stop_cluster path-debian "$package/airt"
fi
echo "PASS"
