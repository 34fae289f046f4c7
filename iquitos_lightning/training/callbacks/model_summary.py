"""Lightning's model summary cut to what says something about an RL agent: its modules and their parameters.

Why: Lightning ends its summary with "Modules in train mode: 24", "Modules in eval mode: 0" and "Total FLOPs: 0"
(FLOPs are counted only for a module with an ``example_input_array``, which an agent has not), and on a terminal a
"Mode" and a "FLOPs" column of the same. Every fit printed them, in its log file too. This summary keeps the table
of the top-level modules (name, type, parameters) and the parameter totals, the same on a terminal and in a file.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.model_summary import get_formatted_model_size, get_human_readable_count

DROPPED = ("Mode", "FLOPs")


class ParameterSummary(ModelSummary):
    """A :class:`~lightning.pytorch.callbacks.ModelSummary` printing modules and parameter counts only."""

    @staticmethod
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs: Any,
    ) -> None:
        rank_zero_info("\n" + parameter_summary(summary_data, total_parameters, trainable_parameters, model_size))


def parameter_summary(
    summary_data: list[tuple[str, list[str]]], total_parameters: int, trainable_parameters: int, model_size: float
) -> str:
    """The summary's text: one row per module, then the totals."""
    columns = [(name, [str(value) for value in values]) for name, values in summary_data if name not in DROPPED]
    widths = [max([len(name), *(len(value) for value in values)]) for name, values in columns]
    rows = [[name for name, _ in columns], *zip(*(values for _, values in columns), strict=True)]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-" * max(len(line) for line in lines))
    lines += [
        f"Trainable params: {get_human_readable_count(trainable_parameters).strip()}",
        f"Non-trainable params: {get_human_readable_count(total_parameters - trainable_parameters).strip()}",
        f"Total params: {get_human_readable_count(total_parameters).strip()}",
        f"Total estimated model params size (MB): {get_formatted_model_size(model_size).strip()}",
    ]
    return "\n".join(lines)
