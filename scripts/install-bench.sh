#!/usr/bin/env bash
# Create .venv-bench (Python 3.11): the pinned runtime and test tools as scripts/install.sh installs
# them, plus the benchmark-only extra (requirements-bench.lock: Stable-Baselines3, py-spy).
# SB3 stays out of .venv on purpose: it is never a runtime dependency.
# Then: PYTHONPATH=. .venv-bench/bin/python -m iquitos_lightning bench
set -euo pipefail
cd "$(dirname "$0")/.."

python_bin="${PYTHON:-python3.11}"
if ! command -v "$python_bin" >/dev/null 2>&1; then
  echo "install-bench.sh: $python_bin not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
[ -x .venv-bench/bin/python ] || "$python_bin" -m venv .venv-bench

pip_args=(--quiet --disable-pip-version-check)
[ -d /opt/wheels ] && pip_args+=(--find-links /opt/wheels)

.venv-bench/bin/python -m pip install "${pip_args[@]}" -r requirements.lock -r requirements-dev.lock
.venv-bench/bin/python -m pip install "${pip_args[@]}" --no-deps -r requirements-nodeps.lock
.venv-bench/bin/python -m pip install "${pip_args[@]}" -r requirements-bench.lock
.venv-bench/bin/python -m pip install "${pip_args[@]}" --no-deps --no-build-isolation -e .
echo "install-bench.sh: .venv-bench ready; run: .venv-bench/bin/python -m iquitos_lightning bench"
