#!/usr/bin/env bash
# Builds this folder's Ray C++ programs against a pip-installed Ray C++ API (pip install
# 'ray[cpp]') and runs them on Ray, to show that what airt's ctest runs (RayCompatCpp.*) is plain
# Ray code. For a person to run outside CI: prints "not installed" and exits 0 when Ray's C++ API
# is not there.
#   tests/ray_compat/cpp/run_on_ray.sh [build folder, default: a temp folder]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v ray >/dev/null 2>&1 || ! paths="$(ray cpp --show-library-path 2>/dev/null)"; then
  echo "not installed: Ray's C++ API (pip install 'ray[cpp]', then 'ray cpp --show-library-path')"
  exit 0
fi
# `ray cpp --show-library-path` prints "Ray C++ include path <dir>" and "Ray C++ library path <dir>".
include_dir="$(printf '%s\n' "$paths" | sed -n 's/.*include path[: ]*//p' | head -n1)"
library_dir="$(printf '%s\n' "$paths" | sed -n 's/.*library path[: ]*//p' | head -n1)"
if [[ ! -f "$include_dir/ray/api.h" || ! -d "$library_dir" ]]; then
  echo "not installed: 'ray cpp --show-library-path' names no C++ headers and libraries:"
  printf '%s\n' "$paths"
  exit 0
fi

out="${1:-$(mktemp -d "${TMPDIR:-/tmp}/ray-compat-cpp-XXXXXX")}"
status=0
for program in quickstart actors_and_errors; do
  dir="$out/$program"
  mkdir -p "$dir"
  flags=(-std=c++17 -O1 -I"$include_dir" -L"$library_dir" -Wl,-rpath,"$library_dir" -lray_api
         -lpthread)
  # The driver, and the same code as the library Ray's workers load from the code search path.
  c++ "$here/$program.cc" -o "$dir/$program" "${flags[@]}"
  c++ "$here/$program.cc" -shared -fPIC -o "$dir/lib$program.so" "${flags[@]}"
  echo "==> $program (on Ray)"
  # Ray's C++ driver starts a local Ray (ray start --head) when RAY_ADDRESS is unset.
  if ! (cd "$dir" && env -u RAY_ADDRESS "./$program" --ray_code_search_path="$dir"); then
    status=1
  fi
done
exit "$status"
