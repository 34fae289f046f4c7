"""Plots of simulated energy flows: a typical week's dispatch, the average day and monthly energy per controller.

Why these three: the week shows HOW a controller runs the site (when the BESS charges, when EVs
draw, what the grid sees); the average day shows the same over the whole year, hour by hour (what a
policy does at 15 h on most days, where one week can mislead); the monthly bars show HOW MUCH it
imports over the year against the site's PV, mall and EV energy. All read the environment's flow tables only
(:data:`~iquitos_lightning.envs.state.FLOW_COLUMNS`), so any controller or agent can be plotted.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from iquitos_lightning.atomic_files import write_atomically  # noqa: E402

HOURS_PER_WEEK = 168
_COLOURS = {
    "pv": "#f2b701",
    "mall": "#7f7f7f",
    "ev": "#2ca02c",
    "import": "#d62728",
    "bess": "#1f77b4",
    "soc": "#9467bd",
}


# Titles at the top of their axes, not placed by measuring the axes' ticks at every draw: matplotlib moves a title up
# only over ticks on top, which these plots never have (the images are pixel-identical; a health grid ~10 % less CPU).
# A decorator of each plot function rather than a global rcParams change: a user's own figures keep their settings.
titles_at_the_top = matplotlib.rc_context({"axes.titley": 1.0})


def typical_week_start(flows: pd.DataFrame) -> int:
    """First step of the week (7 x 24 h from a midnight) whose PV energy is closest to the median week's."""
    steps = len(flows)
    if steps <= HOURS_PER_WEEK:
        return 0
    starts = np.arange(0, steps - HOURS_PER_WEEK + 1, 24)
    cumulative = np.concatenate([[0.0], np.cumsum(flows["pv_kw"].to_numpy(dtype=float))])
    weekly_pv = cumulative[starts + HOURS_PER_WEEK] - cumulative[starts]
    return int(starts[np.argmin(np.abs(weekly_pv - np.median(weekly_pv)))])


@titles_at_the_top
def plot_dispatch_week(
    flows_by_controller: Mapping[str, pd.DataFrame],
    path: Path,
    *,
    year: int,
    start_step: int | None = None,
    title: str = "",
) -> Path:
    """Per controller over the same week: PV, mall, grid import, BESS power and SOC; below it, EV charging.

    EV charging gets its own small axis because it is a few percent of the mall load: on the
    shared kW axis its timing (the thing controllers change) would be invisible.
    """
    first = next(iter(flows_by_controller.values()))
    start = typical_week_start(first) if start_step is None else start_step
    stop = min(start + HOURS_PER_WEEK, len(first))
    time_index = pd.date_range(f"{year}-01-01", periods=len(first), freq="h")[start:stop]

    rows = len(flows_by_controller)
    figure, axes = plt.subplots(
        2 * rows,
        1,
        figsize=(14, 4.6 * rows + 1.0),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 1.1] * rows},
    )
    ev_peak = max(float(flows["ev_kw"].iloc[start:stop].max()) for flows in flows_by_controller.values())
    for index, (name, flows) in enumerate(flows_by_controller.items()):
        axis, ev_axis = axes[2 * index, 0], axes[2 * index + 1, 0]
        week = flows.iloc[start:stop]
        bess_net = week["bess_discharge_kw"] - week["bess_charge_kw"]
        axis.fill_between(time_index, week["pv_kw"], step="post", color=_COLOURS["pv"], alpha=0.35, label="PV")
        axis.step(time_index, week["mall_kw"], where="post", color=_COLOURS["mall"], lw=1.2, label="mall load")
        axis.step(
            time_index, week["grid_import_kw"], where="post", color=_COLOURS["import"], lw=1.4, label="grid import"
        )
        axis.step(time_index, bess_net, where="post", color=_COLOURS["bess"], lw=1.2, label="BESS (+ discharge)")
        axis.axhline(0.0, color="black", lw=0.6)
        axis.set_ylabel("kW")
        axis.set_title(name, loc="left", fontsize=11, fontweight="bold")
        axis.grid(alpha=0.3)
        soc_axis = axis.twinx()
        soc_axis.plot(time_index, 100 * week["bess_soc"], color=_COLOURS["soc"], lw=1.2, ls="--", label="BESS SOC")
        soc_axis.set_ylim(0, 105)
        soc_axis.set_ylabel("BESS SOC [%]", color=_COLOURS["soc"])
        ev_axis.fill_between(
            time_index, week["ev_kw"], step="post", color=_COLOURS["ev"], alpha=0.6, label="EV charging"
        )
        ev_axis.set_ylim(0, 1.1 * ev_peak if ev_peak > 0 else 1.0)
        ev_axis.set_ylabel("EV kW")
        ev_axis.grid(alpha=0.3)
    handles, labels = [], []
    for legend_axis in (axes[0, 0], soc_axis, axes[1, 0]):
        more_handles, more_labels = legend_axis.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    period = f"{time_index[0]:%d %b} - {time_index[-1]:%d %b %Y}"
    # Margins and gaps in inches (set_margins_in_inches): a comparison's week of eleven controllers ~4.8 -> ~2.8 s of
    # CPU, a run report's one ~0.9 -> ~0.5 s.
    height = figure.get_figheight()
    figure.suptitle(f"{title} dispatch, {period}".strip(), y=1 - 0.08 / height, va="top", fontsize=13)
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.4 / height), ncol=6, frameon=False)
    top, bottom, gap = 0.95, 0.45, 0.38  # inches: the title and legend; the dates; a row's title between axes
    hspace = gap * 2 * rows / (height - top - bottom - gap * (2 * rows - 1))  # a gap of `gap` inches between axes
    set_margins_in_inches(figure, left=0.75, right=0.8, top=top, bottom=bottom, hspace=hspace)
    return save_figure(figure, path)


def daily_profile(flows: pd.DataFrame) -> pd.DataFrame:
    """Per hour of day (24 rows; the flows start at midnight, one row an hour): the year's mean PV, mall load, EV
    charging, grid import, BESS power (``bess_net_kw``, + discharge) and SOC, and the BESS power's quartiles."""
    hour = np.arange(len(flows)) % 24
    table = flows.assign(bess_net_kw=flows["bess_discharge_kw"] - flows["bess_charge_kw"], hour=hour)
    grouped = table.groupby("hour")
    means = grouped[["pv_kw", "mall_kw", "ev_kw", "grid_import_kw", "bess_net_kw", "bess_soc"]].mean()
    means["bess_net_q25_kw"] = grouped["bess_net_kw"].quantile(0.25)
    means["bess_net_q75_kw"] = grouped["bess_net_kw"].quantile(0.75)
    return means


@titles_at_the_top
def plot_daily_profile(flows_by_controller: Mapping[str, pd.DataFrame], path: Path, *, title: str = "") -> Path:
    """The average day of each controller (:func:`daily_profile`) on shared axes: BESS power (+ discharge, the
    band its middle half of days) and grid import above, BESS SOC below. Why: whether a policy keeps the battery
    for the evening or spends it in the afternoon is one glance here; in a week of dispatch it is a search."""
    figure, (power_axis, soc_axis) = plt.subplots(
        2, 1, figsize=(12, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    hours = np.arange(24)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (name, flows) in enumerate(flows_by_controller.items()):
        profile = daily_profile(flows)
        colour = colours[index % len(colours)]
        power_axis.step(hours, profile["bess_net_kw"], where="mid", color=colour, lw=1.8, label=f"{name}: BESS")
        power_axis.fill_between(
            hours, profile["bess_net_q25_kw"], profile["bess_net_q75_kw"], step="mid", color=colour, alpha=0.15
        )
        power_axis.step(
            hours, profile["grid_import_kw"], where="mid", color=colour, lw=1.2, ls="--", label=f"{name}: grid import"
        )
        soc_axis.step(hours, 100 * profile["bess_soc"], where="mid", color=colour, lw=1.6, label=name)
    power_axis.axhline(0.0, color="black", lw=0.6)
    power_axis.set_ylabel("kW (BESS: + discharge)")
    power_axis.grid(alpha=0.3)
    power_axis.legend(loc="upper left", fontsize=9, ncol=2, frameon=False)
    soc_axis.set_ylim(0, 105)
    soc_axis.set_ylabel("BESS SOC [%]\n(end of hour)")
    soc_axis.set_xlabel("hour of day")
    soc_axis.set_xticks(hours)
    soc_axis.grid(alpha=0.3)
    figure.suptitle(f"{title} average day over the year".strip(), fontsize=13)
    set_margins_in_inches(figure, left=0.85, right=0.2, top=0.55, bottom=0.6, hspace=0.08)
    return save_figure(figure, path)


def plot_monthly_energy(
    flows_by_controller: Mapping[str, pd.DataFrame],
    path: Path,
    *,
    year: int,
    title: str = "",
) -> Path:
    """Monthly grid import per controller, its change against the first controller, and the site's energy.

    The middle panel exists because the controllers differ by a few percent of an import dominated
    by the mall: side by side the bars look alike, their differences do not. EV charging, a few
    percent of the mall load, is drawn on its own right-hand axis for the same reason.
    """
    names = list(flows_by_controller)
    first = flows_by_controller[names[0]]
    month = pd.date_range(f"{year}-01-01", periods=len(first), freq="h").month
    labels = [pd.Timestamp(year=year, month=m, day=1).strftime("%b") for m in sorted(set(month))]
    positions = np.arange(len(labels))
    monthly_import = {
        name: flows["grid_import_kw"].groupby(month).sum().to_numpy() / 1000
        for name, flows in flows_by_controller.items()
    }

    figure, (import_axis, change_axis, site_axis) = plt.subplots(
        3, 1, figsize=(12, 11), sharex=True, gridspec_kw={"height_ratios": [3, 2, 3]}
    )
    width = 0.8 / len(names)
    offsets = {name: (index - (len(names) - 1) / 2) * width for index, name in enumerate(names)}
    for name in names:
        import_axis.bar(positions + offsets[name], monthly_import[name], width, label=name)
        change_axis.bar(positions + offsets[name], monthly_import[name] - monthly_import[names[0]], width, label=name)
    import_axis.set_ylabel("grid import [MWh]")
    import_axis.set_title("Grid import per controller", loc="left")
    change_axis.set_ylabel("MWh")
    change_axis.set_title(f"Grid import minus {names[0]}", loc="left")
    change_axis.axhline(0.0, color="black", lw=0.6)
    for axis in (import_axis, change_axis):
        axis.grid(axis="y", alpha=0.3)
    import_axis.legend(frameon=False, ncol=len(names), loc="lower center", bbox_to_anchor=(0.5, 1.06))

    site_width = 0.35
    pv_mwh = first["pv_kw"].groupby(month).sum().to_numpy() / 1000
    mall_mwh = first["mall_kw"].groupby(month).sum().to_numpy() / 1000
    ev_mwh = first["ev_kw"].groupby(month).sum().to_numpy() / 1000
    site_axis.bar(positions - site_width / 2, pv_mwh, site_width, color=_COLOURS["pv"], label="PV generation")
    site_axis.bar(positions + site_width / 2, mall_mwh, site_width, color=_COLOURS["mall"], label="mall load")
    site_axis.set_ylabel("PV, mall [MWh]")
    site_axis.grid(axis="y", alpha=0.3)
    ev_axis = site_axis.twinx()
    ev_axis.plot(positions, ev_mwh, color=_COLOURS["ev"], marker="o", lw=1.5, label=f"EV charging ({names[0]})")
    ev_axis.set_ylim(0, 1.25 * max(float(ev_mwh.max()), 1e-9))
    ev_axis.set_ylabel("EV charging [MWh]", color=_COLOURS["ev"])
    site_axis.set_title("Site energy", loc="left")
    handles, texts = site_axis.get_legend_handles_labels()
    ev_handles, ev_texts = ev_axis.get_legend_handles_labels()
    site_axis.legend(
        handles + ev_handles, texts + ev_texts, frameon=False, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.06)
    )
    site_axis.set_xticks(positions, labels)
    figure.suptitle(f"{title} monthly energy, {year}".strip(), fontsize=13)
    figure.tight_layout()
    return save_figure(figure, path)


def set_margins_in_inches(
    figure: plt.Figure, *, left: float, right: float, top: float, bottom: float, **spacing: float
) -> None:
    """The axes' margins from the figure's edges in inches (``spacing``: ``hspace``/``wspace`` as
    ``subplots_adjust`` takes them). Why not ``tight_layout``: it measures every tick label of every axis before the
    draw, ~40 % of drawing a many-axes figure here, for labels whose sizes the plot fixes anyway."""
    width, height = figure.get_size_inches()
    figure.subplots_adjust(
        left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height, **spacing
    )


def save_figure(figure: plt.Figure, path: Path) -> Path:
    path = Path(path)
    image = io.BytesIO()
    figure.savefig(image, dpi=110, format=path.suffix.lstrip(".") or "png")
    plt.close(figure)
    write_atomically(image.getbuffer(), path, "report")  # a full disk: one clear error, the old plot kept
    return path
