"""The grid connection's limit: both simulators curtail the same command to the bit, every EV keeps its guaranteed
minimum, and the year's LP plans under the limit (tiny site with a limit that binds the battery and the EVs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.bench.equivalence import citylearn_trajectory, compare, twin_trajectories
from iquitos_lightning.control.objective_lp import solve_year
from iquitos_lightning.envs.citylearn import IquitosEnv, make_iquitos_env
from iquitos_lightning.envs.import_limit import IMPORT_LIMIT_MARGIN_KW, cap_import
from iquitos_lightning.envs.objectives import TARIFF
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.site.config import SiteConfigError, load_site_config

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
# The tiny site's mall peaks near 75 kW, its 4 chargers add 9 kW and its battery 85 kW: 78 kW binds the battery's
# charging on most days and the EVs' flexible power in the evening.
LIMIT_KW = 78.0


@pytest.fixture(scope="module")
def limited_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site") / "tiny-limited.yaml"
    path.write_text(f"base: {TINY}\nname: tiny-limited\ngrid: {{import_limit_kw: {LIMIT_KW}}}\n")
    return path


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def test_a_limit_must_be_positive(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"base: {TINY}\nname: bad\ngrid: {{import_limit_kw: -5.0}}\n")
    with pytest.raises(SiteConfigError, match=r"grid.import_limit_kw: must be > 0"):
        load_site_config(path)


def test_numpy_and_torch_curtail_alike_keeping_the_guarantee_and_every_discharge() -> None:
    rng = np.random.default_rng(0)
    rows, sockets = 2_000, 6
    low = rng.uniform(0.0, 1.5, (rows, sockets)) * (rng.random((rows, sockets)) < 0.6)
    socket_kw = low + rng.uniform(0.0, 1.5, (rows, sockets))
    bess = rng.uniform(-1.0, 1.0, rows)
    pv, mall = rng.uniform(0.0, 40.0, rows), rng.uniform(20.0, 80.0, rows)
    options = {"bess_power_kw": 50.0, "limit_kw": 70.0}
    capped_bess, capped_kw = cap_import(bess, socket_kw, pv_kw=pv, mall_kw=mall, guaranteed_kw=low, **options)
    as_torch = [torch.from_numpy(a) for a in (bess, socket_kw, pv, mall, low)]
    torch_bess, torch_kw = cap_import(
        as_torch[0], as_torch[1], pv_kw=as_torch[2], mall_kw=as_torch[3], guaranteed_kw=as_torch[4], **options
    )
    np.testing.assert_array_equal(capped_bess, torch_bess.numpy())
    np.testing.assert_array_equal(capped_kw, torch_kw.numpy())

    assert (capped_kw >= low).all() and (capped_kw <= socket_kw + 1e-12).all()  # the guarantee wins, nothing is added
    np.testing.assert_array_equal(capped_bess[bess <= 0], bess[bess <= 0])  # a discharge is never touched
    assert (capped_bess <= bess).all() and (capped_bess[bess > 0] >= 0).all()  # charging only cut, never reversed
    imports = mall - pv + capped_kw.sum(-1) + capped_bess.clip(0.0, None) * 50.0
    reachable = mall - pv + low.sum(-1) <= 70.0 - IMPORT_LIMIT_MARGIN_KW
    assert (imports[reachable] <= 70.0 - IMPORT_LIMIT_MARGIN_KW + 1e-9).all()
    assert (capped_bess < bess).sum() > 100 and (capped_kw < socket_kw).any(-1).sum() > 100  # the limit binds
    unlimited = cap_import(bess, socket_kw, pv_kw=pv, mall_kw=mall, guaranteed_kw=low, **{**options, "limit_kw": None})
    assert unlimited[0] is bess and unlimited[1] is socket_kw


@pytest.mark.parametrize("layout", ["per_socket", "self_consumption_window"])
def test_the_twin_equals_citylearn_under_the_limit_and_no_hour_imports_above_it(
    limited_site: Path, data_root: Path, layout: str
) -> None:
    options = {"layout": layout, "objective": TARIFF}
    env: IquitosEnv = make_iquitos_env(limited_site, data_root=data_root, **options)
    free = make_iquitos_env(TINY, data_root=data_root, **options)
    count = env.action_space.shape[0]
    rng = np.random.default_rng(5)
    draws = np.sign(rng.uniform(-1.0, 1.0, (env.hours, count)))  # the actions' ends: full charge, every EV at full
    draws[:, 0] = np.where(rng.random(env.hours) < 0.7, 1.0, draws[:, 0])
    actions = iter(draws)
    reference = citylearn_trajectory(env, lambda observation, state: next(actions))
    twin = IquitosTwin(env.schema_path, env.series, num_envs=1, record=True, **options)
    (replay,) = twin_trajectories(twin, reference.actions[None])
    errors = compare(reference, replay)
    assert errors["flows"] == 0.0 and errors["departures"] == 0.0, errors  # bit-equal
    np.testing.assert_array_equal(reference.observations, replay.observations)

    flows = reference.flows
    over = flows["grid_import_kw"] > LIMIT_KW
    assert over.sum() <= 3, flows[over]  # an evening or two whose EVs' guaranteed minimum alone breaks it
    assert (flows["bess_charge_kw"][over] == 0).all()  # there the battery does not charge ...
    assert (flows["grid_import_kw"] - flows["ev_kw"])[over].max() <= LIMIT_KW  # ... and the mall alone is under it
    assert flows["grid_import_kw"][~over].max() > LIMIT_KW - 0.1  # elsewhere it is reached
    actions = iter(draws)
    unlimited = citylearn_trajectory(free, lambda observation, state: next(actions))
    assert unlimited.flows["grid_import_kw"].max() > LIMIT_KW + 20.0  # the same actions break it without the limit
    # Every EV is still served as without the limit (the curtailment keeps each band's minimum).
    assert reference.kpis["ev_unmet_kwh"] == pytest.approx(unlimited.kpis["ev_unmet_kwh"], abs=1e-6)


def test_the_years_lp_plans_under_the_limit(limited_site: Path, data_root: Path) -> None:
    limited = make_iquitos_env(limited_site, data_root=data_root).series
    free = make_iquitos_env(TINY, data_root=data_root).series
    capped, uncapped = solve_year(limited, TARIFF), solve_year(free, TARIFF)
    assert uncapped.grid_import_kw.max() > LIMIT_KW  # the unlimited optimum would break it
    assert capped.grid_import_kw.max() <= LIMIT_KW - IMPORT_LIMIT_MARGIN_KW + 1e-6
    assert capped.objective >= uncapped.objective - 1e-6
    assert capped.session_unmet_kwh.sum() == pytest.approx(uncapped.session_unmet_kwh.sum(), abs=1e-6)
