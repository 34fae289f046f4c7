"""fastpath/highs_lp.py gives what ``linprog(method="highs")`` gives, bit for bit, on the LPs control/ builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from iquitos_lightning.control import objective_lp
from iquitos_lightning.control.objective_lp import solve_year
from iquitos_lightning.control.optimum import LPSolution, solve_optimum
from iquitos_lightning.envs.objectives import TARIFF, THESIS
from iquitos_lightning.envs.site_data import site_years
from iquitos_lightning.fastpath import highs_lp

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


def _linprog(lp: dict) -> tuple[np.ndarray, float]:
    bounds = np.column_stack([lp["lower"], lp["upper"]])
    result = linprog(lp["cost"], A_ub=lp["a_ub"], b_ub=lp["b_ub"], A_eq=lp["a_eq"], b_eq=lp["b_eq"], bounds=bounds,
                     method="highs")  # fmt: skip
    assert result.status == 0, result.message
    return result.x, result.fun


def test_the_lps_of_the_optimum_and_of_each_objective_solve_to_linprogs_bits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny site's year (168 h): the CO2 optimum (control/optimum.py), and the objective LP of control/
    objective_lp.py under ``tariff`` (a peak variable per month, the EV sessions) and ``thesis`` (the solar slack,
    17 tangent rows a hour), the MPC's LP over the whole episode. Compared with a different LP's solution (the
    other objective's), the check fails."""
    (series,) = site_years(TINY, [0], tmp_path)
    captured: list[dict] = []

    def capture(cost, lower, upper, *, a_ub=None, b_ub=None, a_eq=None, b_eq=None) -> LPSolution:
        captured.append(dict(cost=cost, lower=lower, upper=upper, a_ub=a_ub, b_ub=b_ub, a_eq=a_eq, b_eq=b_eq))
        x, objective = highs_lp.solve(cost, lower, upper, a_ub, b_ub, a_eq, b_eq)
        return LPSolution(x, objective, 0.0)

    monkeypatch.setattr(objective_lp, "solve_lp", capture)
    solve_year(series, TARIFF)
    solve_year(series, THESIS)
    monkeypatch.setattr("iquitos_lightning.control.optimum.solve_lp", capture)
    solve_optimum(series)
    assert len(captured) == 3 and captured[1]["a_ub"].shape[0] > 17 * series.hours  # the tangent rows

    solutions = []
    for lp in captured:
        ours = highs_lp.solve(lp["cost"], lp["lower"], lp["upper"], lp["a_ub"], lp["b_ub"], lp["a_eq"], lp["b_eq"])
        theirs = _linprog(lp)
        assert np.array_equal(ours[0], theirs[0]) and ours[1] == theirs[1]
        solutions.append(ours[0])
    assert len(solutions[0]) != len(solutions[1]) or not np.array_equal(solutions[0], solutions[1])


def test_dense_constraints_and_an_infeasible_lp_as_linprog_takes_and_refuses_them() -> None:
    """min x0 + 2 x1 with x0 + x1 = 1 and x0 - x1 <= 1 on [0, 1]^2 is x = (1, 0); with x0 + x1 = 3 HiGHS finds no
    solution."""
    cost, lower, upper = np.array([1.0, 2.0]), np.zeros(2), np.ones(2)
    x, objective = highs_lp.solve(cost, lower, upper, np.array([[1.0, -1.0]]), np.array([1.0]), np.ones((1, 2)),
                                  np.array([1.0]))  # fmt: skip
    assert np.array_equal(x, [1.0, 0.0]) and objective == 1.0
    with pytest.raises(highs_lp.HighsFailed, match="Infeasible"):
        highs_lp.solve(cost, lower, upper, None, None, np.ones((1, 2)), np.array([3.0]))
