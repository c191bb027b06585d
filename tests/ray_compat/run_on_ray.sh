#!/usr/bin/env bash
# Runs the programs of this folder unchanged on pip-installed Ray, to show they are right for
# Ray (run.py runs the same programs on airt). Not part of CI: it needs `pip install ray`.
#
#   PYTHON=/path/to/python-with-ray tests/ray_compat/run_on_ray.sh [NAME ...]
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
unset RAY_ADDRESS  # each program starts its own local Ray

"$PYTHON" -c "import ray" 2>/dev/null || { echo "run_on_ray: $PYTHON cannot import ray" >&2; exit 2; }
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for f in "$HERE"/*.py; do
    n="$(basename "$f" .py)"
    [[ "$n" == run || "$n" == _* ]] || names+=("$n")
  done
fi
failed=0
for n in "${names[@]}"; do
  start=$SECONDS
  if out="$(cd "$(mktemp -d)" && timeout 600 "$PYTHON" "$HERE/$n.py" 2>&1)"; then
    echo "PASS $n ($((SECONDS - start)) s)"
  else
    echo "FAIL $n ($((SECONDS - start)) s)"
    echo "$out" | tail -30 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
done
echo "$(( ${#names[@]} - failed ))/${#names[@]} programs passed on Ray $("$PYTHON" -c 'import ray; print(ray.__version__)')"
[[ $failed -eq 0 ]]
