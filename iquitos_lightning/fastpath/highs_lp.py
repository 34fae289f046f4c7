"""HiGHS called the way scipy's ``linprog(method="highs")`` calls it, without the per-solve work nothing here reads.

Why: an MPC solves one small LP an hour (8,760 for a year, times every knob a tuning tries), and around each day's
window ``linprog`` spent more CPU than HiGHS itself: it cleans and copies its inputs, checks each option through
HiGHS's option manager, and loops in Python over every column to build the bounds' marginals, which control/
never reads (a tiny-site baselines run, profiled: HiGHS ~2.0 s of ~7.5 s in ``linprog``). This fills scipy's own
bundled HiGHS (``scipy.optimize._highspy._core``, the build ``linprog`` runs) with the same model, the constraint
rows stacked as ``linprog`` stacks them (``A_ub`` over ``A_eq``, one CSC matrix, infinities as HiGHS's), and the
options ``linprog`` sets for ``method="highs"`` (presolve on, dual simplex, no output), and returns the solution
and the objective: the same bits as ``linprog`` (tests/fastpath/test_highs_lp.py). What it leaves out:
``linprog``'s input checks (the LP builders of control/ give finite float64 arrays of matching sizes) and its
check of the solution against the constraints at 10 x sqrt(1e-9) (HiGHS's optimal status already means feasible
within its 1e-7 tolerances).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize._highspy import _core

from iquitos_lightning.fastpath.pins import require

NEEDED = ("HighsLp", "HighsOptions", "_Highs", "MatrixFormat", "HighsModelStatus", "HighsDebugLevel", "kHighsInf")
require(_core, NEEDED, library="scipy", override="fastpath/highs_lp.py")
require(_core.simplex_constants.SimplexStrategy, ["kSimplexStrategyDual"], library="scipy",
        override="fastpath/highs_lp.py")  # fmt: skip


class HighsFailed(RuntimeError):
    """HiGHS ended without an optimal solution; the message carries its model status."""


def solve(
    cost: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    a_ub: sparse.sparray | np.ndarray | None,
    b_ub: np.ndarray | None,
    a_eq: sparse.sparray | np.ndarray | None,
    b_eq: np.ndarray | None,
    interior_point: bool = False,
) -> tuple[np.ndarray, float]:
    """``min cost @ x`` subject to ``a_ub @ x <= b_ub``, ``a_eq @ x == b_eq`` and ``lower <= x <= upper``: the
    solution and the objective value, as ``linprog(method="highs")`` returns them; :class:`HighsFailed` unless
    HiGHS reports the LP solved to optimality.

    ``interior_point``: HiGHS's interior-point solver without crossover instead of the dual simplex. Why: where an
    LP has many optima of equal objective, the simplex returns a vertex and an interior-point method a point inside
    the optimal face; a schedule then replayed in a simulator whose battery is not the LP's scores differently
    (the CityLearn 2022 benchmark's published LP row came from an interior-point solver)."""
    columns = len(cost)
    parts = [
        (a if sparse.issparse(a) else sparse.coo_array(np.atleast_2d(a)), b)  # dense: linprog takes both
        for a, b in ((a_ub, b_ub), (a_eq, b_eq))
        if a is not None
    ]
    matrix = sparse.csc_array(sparse.vstack([a for a, _ in parts])) if parts else sparse.csc_array((0, columns))
    ub_rows = 0 if b_ub is None else len(b_ub)
    rhs = np.concatenate([np.asarray(b, dtype=float) for _, b in parts]) if parts else np.empty(0)
    lhs = np.concatenate([np.full(ub_rows, -np.inf), rhs[ub_rows:]])

    lp = _core.HighsLp()
    lp.num_col_ = lp.a_matrix_.num_col_ = columns
    lp.num_row_ = lp.a_matrix_.num_row_ = len(rhs)
    lp.a_matrix_.format_ = _core.MatrixFormat.kColwise
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = _highs_infinities(lower)
    lp.col_upper_ = _highs_infinities(upper)
    lp.row_lower_ = _highs_infinities(lhs)
    lp.row_upper_ = _highs_infinities(rhs)
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data

    options = _core.HighsOptions()
    options.presolve = "on"
    options.highs_debug_level = _core.HighsDebugLevel.kHighsDebugLevelNone
    options.log_to_console = False
    options.output_flag = False
    options.simplex_strategy = _core.simplex_constants.SimplexStrategy.kSimplexStrategyDual
    if interior_point:
        options.solver = "ipm"
        options.run_crossover = "off"
    highs = _core._Highs()
    highs.passOptions(options)
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    if status != _core.HighsModelStatus.kOptimal:
        raise HighsFailed(f"HiGHS model status {highs.modelStatusToString(status)}")
    return np.array(highs.getSolution().col_value), highs.getInfo().objective_function_value


def _highs_infinities(values: np.ndarray) -> np.ndarray:
    """A float64 copy of ``values`` with +-inf as HiGHS's +-kHighsInf (what ``linprog`` hands it)."""
    values = np.array(values, dtype=float)
    infinite = np.isinf(values)
    values[infinite] = np.sign(values[infinite]) * _core.kHighsInf
    return values
