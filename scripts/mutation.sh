#!/usr/bin/env bash
# Mutation testing of the critical modules with cosmic-ray (docs/testing.md): slow, so outside CI.
#
#   scripts/mutation.sh                 every target below
#   scripts/mutation.sh reward kpis     only these targets
#
# Why a copy: cosmic-ray writes each mutant into the source file, runs the tests, then restores it; a run
# stopped half-way would leave a mutant in your tree. Here it works on a scratch copy of the tree (tracked
# and untracked, not ignored, files), and only the reports come back, to docs/mutation/<target>.txt.
# The tool lives in its own venv (requirements-mutation.lock, $MUTATION_VENV), never in the project's: it
# runs the project's tests with the project's interpreter ($PROJECT_PYTHON, default .venv/bin/python).
# Each mutant runs its target's test files with `pytest -x -n 0`; $MUTATION_TIMEOUT (s) kills a mutant
# that hangs (counted as killed). A target may name a second, slower group of test files after a second `|`:
# it runs only for a mutant the first group lets live (pytest imports every collected file before the first
# test, so one run of both would pay the slow files' imports for every mutant). One core by default (OMP_NUM_THREADS=1), run under `nice`.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

project_python="${PROJECT_PYTHON:-.venv/bin/python}"
# Absolute, but not through realpath: a venv's python is a symlink to the base interpreter, which lacks the venv.
[[ "$project_python" = /* ]] || project_python="$repo/$project_python"
venv="${MUTATION_VENV:-${TMPDIR:-/tmp}/iquitos-mutation-venv}"
timeout_s="${MUTATION_TIMEOUT:-120}"

# target -> "module path | test files [| slower test files, run when the first ones pass]" (the tests that pin
# that module's behaviour)
declare -A targets=(
  [reward]="iquitos_lightning/envs/reward.py|tests/envs/test_reward_values.py"
  [objectives]="iquitos_lightning/envs/objectives.py|tests/envs/test_reward_values.py"
  [kpis]="iquitos_lightning/metrics/kpis.py|tests/control/test_kpis.py"
  [checkpoint_io]="iquitos_lightning/training/checkpoint_io.py|tests/training/checkpointing/test_checkpoint_io.py"
  [atomic_files]="iquitos_lightning/atomic_files.py|tests/training/checkpointing/test_checkpoint_io.py tests/robustness/test_unwritable_output.py"
  [resume]="iquitos_lightning/agents/resume.py|tests/agents/test_resume_state.py"
  [actions]="iquitos_lightning/envs/actions.py|tests/envs/test_actions.py tests/control/test_kpis.py::test_unavoidable_unmet_is_need_beyond_charger_power_times_dwell|tests/envs/test_actions_episodes.py"
)
order=(reward objectives kpis actions checkpoint_io atomic_files resume)
chosen=("$@")
[ ${#chosen[@]} -gt 0 ] || chosen=("${order[@]}")
for name in "${chosen[@]}"; do
  [ -n "${targets[$name]:-}" ] || { echo "mutation.sh: unknown target '$name' (one of: ${order[*]})" >&2; exit 2; }
done

if [ ! -x "$venv/bin/cosmic-ray" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-mutation.lock
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/iquitos-mutation.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$scratch"
mkdir -p docs/mutation

for name in "${chosen[@]}"; do
  IFS='|' read -r module tests then_tests <<<"${targets[$name]}"
  pytest_command="env PYTHONPATH=$scratch OMP_NUM_THREADS=1 WANDB_MODE=disabled $project_python -m pytest -x -q -n 0 -p no:cacheprovider"
  test_command="$pytest_command $tests"
  [ -z "$then_tests" ] || test_command="sh -c \"$test_command && $pytest_command $then_tests\""
  config="$scratch/mutation-$name.toml"
  session="$scratch/mutation-$name.sqlite"
  cat >"$config" <<EOF
[cosmic-ray]
module-path = "$module"
timeout = $timeout_s
excluded-modules = []
test-command = '$test_command'

[cosmic-ray.distributor]
name = "local"

# Bitwise and shift operators in place of arithmetic raise TypeError on floats and tensors of floats: any test
# that runs the line kills them, so they measure coverage, not whether a test pins the value. Skipped (half the
# mutants of the reward module, ~4 s each).
[cosmic-ray.filters.operators-filter]
exclude-operators = ["core/ReplaceBinaryOperator_.*_(BitOr|BitAnd|BitXor|LShift|RShift)$"]
EOF
  echo "== $name: $module against $tests${then_tests:+, then $then_tests}"
  (
    cd "$scratch"
    "$venv/bin/cosmic-ray" init "$config" "$session"
    "$venv/bin/cr-filter-operators" "$session" "$config"
    "$venv/bin/cr-filter-pragma" "$session"  # a line marked `# pragma: no mutate` is skipped (docs/testing.md)
    # The tests must pass unmutated, or every mutant "dies"; cosmic-ray baseline says so but exits 0.
    nice -n 5 "$venv/bin/cosmic-ray" baseline "$config" 2>&1 | tee baseline.log
    if grep -q "Baseline failed" baseline.log; then exit 1; fi
    nice -n 5 "$venv/bin/cosmic-ray" exec "$config" "$session"
    "$venv/bin/cr-report" "$session" --show-pending
  ) >"docs/mutation/$name.log" 2>&1 || { echo "mutation.sh: $name failed, see docs/mutation/$name.log" >&2; exit 1; }
  # The report: every surviving mutant as a diff, then the totals; the run log is not kept.
  (cd "$scratch" && "$venv/bin/cr-report" "$session" --surviving-only --show-diff) >"docs/mutation/$name.txt"
  rm -f "docs/mutation/$name.log"
  tail -n 3 "docs/mutation/$name.txt"
done
