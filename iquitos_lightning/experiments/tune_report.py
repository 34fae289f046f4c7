"""What ``tune`` leaves behind: the best config as a YAML ``fit`` takes as it is, the study as a table, two plots.

Why the YAML is built from the best trial's own overrides: the trial ran ``fit --config <profile> <overrides>``,
so writing those overrides into the profile gives exactly the config that trial trained, with nothing restated
by hand (only its run folder and study hooks are left out: the tuned run gets its own folder).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window (a cluster node has no display)

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from iquitos_lightning.atomic_files import write_atomically  # noqa: E402
from iquitos_lightning.profile.bases import profile_yaml  # noqa: E402


def tuned_config(profile: Path, overrides: Sequence[str], run_name: str) -> dict[str, Any]:
    """The profile with every ``--key=value`` override written in (values read as YAML, as the CLI reads them),
    logging and checkpoints under ``runs/<run_name>``."""
    config = profile_yaml(profile)
    for override in overrides:
        key, _, value = override.removeprefix("--").partition("=")
        _set(config, key.split("."), yaml.safe_load(value))
    config.setdefault("trainer", {})["logger"] = {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": "runs", "name": run_name},
    }
    return config


def _set(config: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        config = config.setdefault(key, {})
    config[keys[-1]] = value


def write_best_config(path: Path, config: dict[str, Any], header: Sequence[str]) -> Path:
    """Write the tuned config, its provenance as comments on top (one file, written whole)."""
    text = "".join(f"# {line}\n" for line in header) + yaml.safe_dump(config, sort_keys=False, width=120)
    write_atomically(text.encode(), path, what="tuned config")
    return path


def study_table(study: Any) -> pd.DataFrame:
    """One row per trial: state, value, the frames of its last evaluation, minutes, and its parameters."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        duration = trial.duration.total_seconds() / 60 if trial.duration else None
        last_step = max(trial.intermediate_values) if trial.intermediate_values else None
        rows.append(
            {"trial": trial.number, "state": trial.state.name.lower(), "value": trial.value}
            | {"last_eval_frames": last_step, "minutes": duration}
            | trial.params
        )
    return pd.DataFrame(rows).set_index("trial") if rows else pd.DataFrame()


def markdown_table(table: pd.DataFrame) -> str:
    """A plain GitHub table of any frame (numbers to 4 significant digits)."""
    header = [table.index.name or "", *map(str, table.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in table.iterrows():
        cells = [_cell(index), *(_cell(value) for value in row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def write_study_plots(study: Any, stem: Path) -> list[Path]:
    """Optimisation history and parameter importances (Optuna's matplotlib plots) as ``<stem>_*.png``.

    Importances need two completed trials whose values differ; with fewer the plot is left out, not faked.
    """
    # lazy: optuna is needed by `tune` only
    from optuna.visualization import matplotlib as optuna_plots

    written = []
    plots = {"history": optuna_plots.plot_optimization_history, "importances": optuna_plots.plot_param_importances}
    for name, plot in plots.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental on every call
            try:
                axes = plot(study)
            except (RuntimeError, ValueError, ZeroDivisionError):
                continue
        path = stem.with_name(f"{stem.name}_{name}.png")
        figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
        figure.set_size_inches(8, 4.5)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
