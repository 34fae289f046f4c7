"""The CityLearn 2022 challenge score, computed from arrays the way the paper "Decomposing the MPC Performance Gap..."
(dvoitekh/mpc-gap-citylearn) scores: the district rows of CityLearn 2.2b0's ``CityLearnEnv.evaluate()``.

Why arrays and not a CityLearn env: the score must not move when the installed CityLearn does, and a controller that is
not a CityLearn agent (an LP, an MPC replay) is scored from its net consumption alone. Every KPI is control / baseline,
where baseline is the same buildings with no battery (load minus PV); 1.0 is "no better than no battery".

Definitions (2.2b0 ``citylearn/cost_function.py`` and ``CityLearnEnv.evaluate``), with d = the district series (the sum
over buildings of net consumption, per hour):

- ``cost`` / ``emissions``: per building sum over hours of max(net * price, 0) (resp. carbon); the district value is the
  MEAN over buildings of each building's ratio, not the ratio of the district sums.
- ``ramping``: sum over t >= 1 of max(d[t] - d[t-1], 0): upward steps only, negative (exporting) d included.
- one minus load factor, window w: consecutive blocks of w rows from row 0 (the last may be short), per block
  1 - mean / max, then the mean over blocks. ``daily_...`` w = 24, ``monthly_...`` w = 730.
- peak, window w: the mean over the same blocks of each block's max; ``daily_peak`` w = 24; ``all_time_peak`` the max.
- ``grid`` = mean(ramping, daily 1-load factor, daily peak, all-time peak); ``score`` = (cost + emissions + grid) / 3.
- ``grid_2022`` = (ramping + monthly 1-load factor) / 2 and ``score_2022`` = (cost + emissions + grid_2022) / 3: the
  2022 competition's own metric as the paper records it (CityLearn 1.3.6's evaluate()).

Where CityLearn 3.0.2's ``evaluate()`` (``citylearn/internal/kpi.py``) differs from 2.2b0 (on the 2022 data, with its
non-negative prices and carbon and non-zero baselines, all seven KPIs above agree: tests/citylearn_2022):

- cost_total: 3.0.2 prices max(net, 0) * price, 2.2b0 max(net * price, 0): the same unless a price is negative.
- cost_total / carbon_emissions_total: prices (carbon) summing to 0 give None in 2.2b0, 1.0 (0/0) in 3.0.2.
- every ratio: 3.0.2's ``_safe_div`` gives 1.0 for 0/0 and None for x/0 and reads non-finite totals as 0; 2.2b0
  divides (inf or NaN); this module raises a ValueError naming the KPI.
- grid KPIs: 3.0.2 drops non-finite hours inside a block; 2.2b0 lets NaN through; this module refuses them.
- windows: 3.0.2 derives 24 and 730 from ``seconds_per_time_step`` (the same at the 2022 data's 3600 s).
- precision: 3.0.2 stores building net, cost and emission series in float32 and sums its no-storage district series in
  float32, so its values match these float64 ones to about 1e-7 relative (measured: at most 3.6e-8).
- 3.0.2's local energy market, where a schema enables it, rewrites building costs; the 2022 schema does not.

A negative block peak (a block that only exports) gives 1 - mean / max as 2.2b0 computes it, not a load factor in
[0, 1]: the protocol's arithmetic is kept as published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

HOURS_PER_DAY = 24
# CityLearn's "month": 8760 / 12 hours, so monthly blocks drift against calendar months, as in the published protocol.
HOURS_PER_MONTH = 730
# The challenge's three evaluation phases (1: buildings 1-5, days 0-120; 2: buildings 1-5, days 120-240;
# 3: buildings 6-17 less 12 and 15, days 240-365) count 0.2, 0.3 and 0.5 in the final ranking.
PHASE_WEIGHTS = (0.2, 0.3, 0.5)

Array = NDArray[np.float64]


@dataclass(frozen=True)
class ChallengeScore:
    """One controller's KPIs on one phase, each control / no-battery baseline (lower is better, 1.0 = no battery)."""

    cost: float
    emissions: float
    ramping: float
    daily_one_minus_load_factor: float
    monthly_one_minus_load_factor: float
    daily_peak: float
    all_time_peak: float
    grid: float
    score: float
    grid_2022: float
    score_2022: float

    def as_dict(self) -> dict[str, float]:
        """Plain floats by KPI name, for JSON results and for :func:`weighted_phase_score`."""
        return asdict(self)


def score_challenge(control: ArrayLike, baseline: ArrayLike, price: ArrayLike, carbon: ArrayLike) -> ChallengeScore:
    """Score ``control`` against ``baseline`` (both (buildings, hours) net consumption in kWh) at hourly ``price`` and
    ``carbon`` (both (hours,)), as CityLearn 2.2b0's district rows do."""
    net_c, net_b, price_arr, carbon_arr = _validated(control, baseline, price, carbon)
    district_c, district_b = net_c.sum(axis=0), net_b.sum(axis=0)
    cost = _mean_building_ratio("cost", positive_total(net_c, price_arr), positive_total(net_b, price_arr))
    emissions = _mean_building_ratio("emissions", positive_total(net_c, carbon_arr), positive_total(net_b, carbon_arr))
    ramp = _ratio("ramping", ramping(district_c), ramping(district_b))
    daily_lf = _ratio(
        "daily_one_minus_load_factor",
        one_minus_load_factor(district_c, HOURS_PER_DAY),
        one_minus_load_factor(district_b, HOURS_PER_DAY),
    )
    monthly_lf = _ratio(
        "monthly_one_minus_load_factor",
        one_minus_load_factor(district_c, HOURS_PER_MONTH),
        one_minus_load_factor(district_b, HOURS_PER_MONTH),
    )
    daily_peak = _ratio("daily_peak", peak(district_c, HOURS_PER_DAY), peak(district_b, HOURS_PER_DAY))
    all_time_peak = _ratio("all_time_peak", float(district_c.max()), float(district_b.max()))
    grid = (ramp + daily_lf + daily_peak + all_time_peak) / 4
    grid_2022 = (ramp + monthly_lf) / 2
    return ChallengeScore(
        cost=cost,
        emissions=emissions,
        ramping=ramp,
        daily_one_minus_load_factor=daily_lf,
        monthly_one_minus_load_factor=monthly_lf,
        daily_peak=daily_peak,
        all_time_peak=all_time_peak,
        grid=grid,
        score=(cost + emissions + grid) / 3,
        grid_2022=grid_2022,
        score_2022=(cost + emissions + grid_2022) / 3,
    )


def weighted_phase_score(phase_scores: Sequence[Mapping[str, float]], key: str = "score") -> float:
    """The challenge's final number: the three phases' ``key`` weighted 0.2, 0.3, 0.5 (pass ``key="score_2022"`` for
    the competition's own metric). Three phases exactly, since a missing phase would silently reweight the rest."""
    if len(phase_scores) != len(PHASE_WEIGHTS):
        raise ValueError(f"weighted_phase_score needs {len(PHASE_WEIGHTS)} phases, got {len(phase_scores)}")
    return float(sum(weight * phase[key] for weight, phase in zip(PHASE_WEIGHTS, phase_scores, strict=True)))


def positive_total(net: Array, rate: Array) -> Array:
    """Per building, the sum over hours of max(net * rate, 0): exported hours earn nothing, as in 2.2b0."""
    return np.maximum(net * rate, 0.0).sum(axis=1)


def ramping(district: Array) -> float:
    """Sum of the upward hour-to-hour steps: 2.2b0's ramping counts no downward step (``down_ramp=False``) but does
    count steps while the district exports (``net_export=True``)."""
    return float(np.clip(np.diff(district), 0.0, None).sum())


def one_minus_load_factor(district: Array, window: int) -> float:
    """Mean over blocks of ``window`` rows (from row 0, the last possibly short) of 1 - mean / max. A block whose max
    is 0 gives a non-finite value, which :func:`_ratio` then reports by KPI name."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.mean([1.0 - block.mean() / block.max() for block in _blocks(district, window)]))


def peak(district: Array, window: int) -> float:
    """Mean over blocks of ``window`` rows (from row 0, the last possibly short) of each block's max."""
    return float(np.mean([block.max() for block in _blocks(district, window)]))


def _blocks(series: Array, window: int) -> list[Array]:
    """Consecutive blocks from row 0, as 2.2b0 groups rows (``index / window`` truncated): not calendar days."""
    return [series[start : start + window] for start in range(0, series.size, window)]


def _mean_building_ratio(kpi: str, control_totals: Array, baseline_totals: Array) -> float:
    """The district value of a per-building KPI: 2.2b0 averages the buildings' ratios (each building weighs the
    same, however large its bill), it does not divide the district totals."""
    ratios = [
        _ratio(f"{kpi} (building {index})", float(control), float(baseline))
        for index, (control, baseline) in enumerate(zip(control_totals, baseline_totals, strict=True))
    ]
    return float(np.mean(ratios))


def _ratio(kpi: str, control: float, baseline: float) -> float:
    """control / baseline, refusing what would otherwise surface as an inf or NaN score far from its cause."""
    if not (np.isfinite(control) and np.isfinite(baseline)):
        raise ValueError(f"{kpi}: non-finite value (control {control}, baseline {baseline}); a block's peak may be 0")
    if baseline == 0.0:
        raise ValueError(f"{kpi}: baseline value is 0 (control {control}), so control/baseline is undefined")
    return control / baseline


def _validated(
    control: ArrayLike, baseline: ArrayLike, price: ArrayLike, carbon: ArrayLike
) -> tuple[Array, Array, Array, Array]:
    """The inputs as float64 arrays, or a one-line ValueError naming the shapes: a transposed or misaligned array
    would otherwise broadcast into a plausible-looking wrong score."""
    net_c, net_b = np.asarray(control, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    price_arr, carbon_arr = np.asarray(price, dtype=np.float64), np.asarray(carbon, dtype=np.float64)
    if net_c.ndim != 2 or net_c.shape != net_b.shape or net_c.size == 0:
        raise ValueError(f"control {net_c.shape} and baseline {net_b.shape} must be one non-empty (buildings, hours)")
    hours = (net_c.shape[1],)
    if price_arr.shape != hours or carbon_arr.shape != hours:
        raise ValueError(f"price {price_arr.shape} and carbon {carbon_arr.shape} must be {hours}, one value per hour")
    for name, array in (("control", net_c), ("baseline", net_b), ("price", price_arr), ("carbon", carbon_arr)):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} has non-finite values")
    return net_c, net_b, price_arr, carbon_arr
