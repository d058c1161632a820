#!/usr/bin/env bash
# The test suite, exactly as CI runs it: environment, Go builds, lint, types, tests.
# Usage: hack/test.sh [pytest arguments]   (the README's `make test` runs it without arguments;
# `make test-long` with `--long -m long`: only the soak runs make test leaves out, in one process)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/venv.sh
venv_install test

echo "==> building the local control plane (reused from the cache when present)"
.venv/bin/berthmaster dev build
# Prometheus and promtool for the alerting tests (tests/integration/observability), built here
# rather than inside a test's time limit: a cold build takes minutes (docs/observability.md).
.venv/bin/python -P -m berthmaster.tooling.devcluster.build prometheus
# The registry and cosign for tests/integration/chart/test_publish_to_registry.py, for the same reason (cold:
# registry 2 min 38 s wall, 162 s CPU; cosign 5 min 53 s wall, 353 s CPU; docs/testing.md).
.venv/bin/python -P -m berthmaster.tooling.devcluster.build publishing

# The static checks run beside pytest (they need a core for about half a minute; the first
# minute of pytest is mostly control planes starting), and their verdict is read at the end.
checks_log=$(mktemp)
(
  set -e
  echo "==> ruff"; .venv/bin/ruff check .
  echo "==> mypy --strict"; .venv/bin/python hack/typecheck.py
  echo "==> import layers (import-linter)"; .venv/bin/python hack/lint_imports.py
) >"$checks_log" 2>&1 &
checks_pid=$!

# pytest runs in BERTHMASTER_TEST_WORKERS pytest-xdist workers (default 4; 1: one process),
# each with its own control plane, temp dirs and free ports, a test file to a worker so that
# module fixtures start once (docs/testing.md). Most integration tests wait on the cluster
# rather than compute, so four workers fit on two cores: measured in docs/testing.md.
workers=${BERTHMASTER_TEST_WORKERS:-4}
parallel=()
if [ "$workers" -gt 1 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi
# Tests marked serial (the differential test's quick share, which needs the machine's cores
# for kube-scheduler and berthmaster at once) run alone after the workers, unless the caller
# chose with -m.
selected=no
for arg in "$@"; do
  if [ "$arg" = "-m" ]; then selected=yes; fi
done
# pytest's output is also kept, so that its failures are printed again at the very end: a
# reader of the log's tail (CI shows the tail) sees them, not the static checks' report.
pytest_log=$(mktemp)
set +e
if [ ${#parallel[@]} -gt 0 ] && [ "$selected" = no ]; then
  echo "==> pytest (${workers} workers; the tests marked serial after them)"
  .venv/bin/python -m pytest "${parallel[@]}" -m "not serial" "$@" 2>&1 | tee "$pytest_log"
  status=${PIPESTATUS[0]}
  echo "==> pytest: the tests marked serial, alone"
  .venv/bin/python -m pytest -m serial "$@" 2>&1 | tee -a "$pytest_log"
  serial=${PIPESTATUS[0]}
  # either part may select nothing when a narrower path is given; both empty is exit 5
  if [ "$status" -eq 5 ]; then status=$serial
  elif [ "$status" -eq 0 ] && [ "$serial" -ne 5 ]; then status=$serial
  fi
else
  echo "==> pytest${parallel:+ (${workers} workers)}"
  .venv/bin/python -m pytest "${parallel[@]}" "$@" 2>&1 | tee "$pytest_log"
  status=${PIPESTATUS[0]}
fi
wait "$checks_pid"
checks=$?
set -e
echo "==> static checks (ruff, mypy --strict, import layers), run beside pytest:"
cat "$checks_log"
rm -f "$checks_log"
if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then
  echo "==> pytest failed (exit $status); its summary lines again:"
  grep -E '^(FAILED|ERROR) |^=+ .*(failed|error|passed|interrupted).* =+$' "$pytest_log" | tail -n 40
fi
rm -f "$pytest_log"
if [ "$checks" -ne 0 ]; then
  echo "the static checks failed (above)" >&2
  exit 1
fi
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
