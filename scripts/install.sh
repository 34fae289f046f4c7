#!/usr/bin/env bash
# Create .venv (Python 3.11) and install the pinned runtime, the test tools and the package.
# Idempotent: a second run only checks that everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

python_bin="${PYTHON:-python3.11}"
if ! command -v "$python_bin" >/dev/null 2>&1; then
  echo "install.sh: $python_bin not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
# A new .venv takes about 1.9 GB (torch alone about 1 GB); on a full disk pip fails deep in its output with
# "[Errno 28] No space left on device" (seen in CI): say it first, in one line.
needed_mb="${INSTALL_NEEDS_MB:-2500}"  # tests/test_install_script.py sets more than any disk has
free_mb=$(df -Pm . | awk 'NR == 2 {print $4}')
if [ ! -x .venv/bin/python ] && [ "${free_mb:-0}" -lt "$needed_mb" ]; then
  echo "install.sh: only ${free_mb} MB free on $(pwd); a new .venv needs about ${needed_mb} MB: free some disk first" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv

pip_args=(--quiet --disable-pip-version-check)
# torch 2.13.0 (CPU) lies on some machines' disks; use it rather than downloading a CUDA build.
[ -d /opt/wheels ] && pip_args+=(--find-links /opt/wheels)

.venv/bin/python -m pip install "${pip_args[@]}" -r requirements.lock -r requirements-dev.lock
# citylearn's declared dependencies pull an unpinned torchvision (breaks `import lightning`)
# and ~800 MB it never imports: install it alone; requirements.lock holds what it imports.
.venv/bin/python -m pip install "${pip_args[@]}" --no-deps -r requirements-nodeps.lock
.venv/bin/python -m pip install "${pip_args[@]}" --no-deps --no-build-isolation -e .
# The package runs from this tree (-e), where pip compiles nothing: compile its bytecode as pip did every other
# package's in .venv. Where PYTHONDONTWRITEBYTECODE is set (CI images often set it) no process ever writes it, and
# each one (a fit, a compare run, a test worker) compiled the modules it imports: ~0.5 s of each start here.
.venv/bin/python -m compileall -q iquitos_lightning benchmarks
echo "install.sh: .venv ready"
