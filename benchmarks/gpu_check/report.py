"""The ``gpu-check`` report as Markdown: one table per section, read top to bottom in a minute.

Why apart from the measurements: the JSON is the record, this is what a person reads (and what
docs/performance.md quotes), and a pure function of the JSON can be tested on any machine.
"""

from __future__ import annotations

from typing import Any


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "**NO**"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _skipped(section: Any) -> str | None:
    return section.get("skipped") if isinstance(section, dict) else None


def device_section(device: dict[str, Any]) -> str:
    rows = []
    for view, seen in device["views"].items():
        info = seen["device"]
        for algorithm, choice in seen["choices"].items():
            if "refused" in choice:
                rows.append([view, info["name"], algorithm.upper(), "refused: " + choice["refused"][:120], "", "", ""])
                continue
            settings = choice["settings"]
            batch = settings.get("model.batch_size", settings.get("model.minibatch_size", "-"))
            switches = [name for name in ("compile", "cuda_graphs") if settings.get(f"model.speed.{name}")]
            rows.append(
                [
                    view,
                    f"{info['name']} ({info['total_gib']:.1f} GiB, {info['free_gib']:.1f} free)",
                    algorithm.upper(),
                    choice["class"],
                    f"{settings['trainer.precision']}, {'+'.join(switches) or 'eager'}",
                    f"{settings['model.hidden_sizes']} / {batch}",
                    f"{choice['estimate_gib']:.2f}",
                ]
            )
    header = ["view", "device", "agent", "profile class", "precision, switches", "hidden / batch", "estimate GiB"]
    return "## Device and auto profile\n\n" + _table(header, rows)


def profiles_section(profiles: Any, cap_gib: float) -> str:
    title = f"## Training profiles under the {cap_gib:g} GiB cap (short fits)\n\n"
    if why := _skipped(profiles):
        return title + f"Skipped: {why}.\n"
    rows = []
    for row in profiles:
        if "error" in row:
            rows.append([row["name"], "failed: " + row["error"][:160]] + [""] * 8)
            continue
        monitor = row.get("monitor_vs_torch") or {}
        rows.append(
            [
                row["config"],
                f"{row['algorithm'].upper()} {row['precision']}",
                f"{row['hidden_sizes']} / {row['batch']}",
                _number(row["peak_allocated_gib"]),
                _number(row["peak_reserved_gib"]),
                _number(row["estimate_gib"]),
                f"{_number(row.get('under_estimate'))} / {_number(row.get('under_cap'))}",
                _number(row["frames_per_s"], 0),
                _number(row["updates_per_s"], 0),
                f"{_number(row.get('monitor_matches_torch'))} ({_number(monitor.get('monitor_peak_gb'), 3)} vs "
                f"{_number(monitor.get('torch_peak_gb'), 3)} GiB peak)",
            ]
        )
    header = ["profile", "agent", "hidden / batch", "peak alloc GiB", "peak reserved GiB", "estimate GiB",
              "under estimate / cap", "frames/s", "updates/s", "VRAMMonitor = torch"]  # fmt: skip
    return title + _table(header, rows)


def whole_fits_section(fits: Any) -> str:
    title = "## Whole fits: each GPU profile against its CPU profile (one fit at a time)\n\n"
    if why := _skipped(fits):
        return title + f"Skipped: {why}.\n"
    rows = []
    for row in fits:
        if "error" in row:
            rows.append([row["profile"], row["variant"], "failed: " + row["error"][:160], "", "", "", ""])
            continue
        rows.append(
            [
                row["profile"],
                row["variant"],
                row.get("precision", "-"),
                _number(row.get("frames_per_s"), 0),
                _number(row.get("updates_per_s"), 1),
                f"{row['x_cpu']:.2f}x" if row.get("x_cpu") is not None else "-",
                _number(row.get("peak_reserved_gib")),
            ]
        )
    header = ["GPU profile", "fit", "precision", "frames/s", "updates/s", "x CPU profile", "peak reserved GiB"]
    return title + _table(header, rows)


def update_section(update: dict[str, Any]) -> str:
    sizes = update["sizes"]
    title = (
        f"## Update step at Iquitos size (532 obs, 129 actions; {sizes['hidden_sizes']}, batch {sizes['batch_size']};"
        " timed one at a time)\n\n"
    )
    rows = []
    for row in update["rows"]:
        if "error" in row:
            rows.append([row["algorithm"].upper(), row["precision"], row["switches"], "failed: " + row["error"][:160],
                         "", "", ""])  # fmt: skip
            continue
        rows.append(
            [
                row["algorithm"].upper(),
                row["precision"],
                row["switches"] + ("" if row["switches_run"] == row["switches"] else f" (ran {row['switches_run']})"),
                _number(row["updates_per_s"], 1),
                _number(row["losses_finite"]),
                _number(row.get("difference_to_eager"), 5),
                _number(row.get("matches_eager")),
            ]
        )
    header = ["agent", "precision", "switches", "updates/s", "losses finite", "rel. diff. to eager", "matches eager"]
    text = title + _table(header, rows)
    best = update.get("fastest_matching") or {}
    if best:
        text += (
            "\nFastest with finite losses that match eager: "
            + "; ".join(
                f"{algorithm.upper()} {row['precision']} {row['switches']} ({row['updates_per_s']:.0f} updates/s)"
                for algorithm, row in best.items()
            )
            + ".\n"
        )
    for note in update.get("not_run", []):
        text += f"\nNot run: {note}.\n"
    return text


def oom_section(oom: Any) -> str:
    title = "## Out-of-memory drill\n\n"
    if why := _skipped(oom):
        return title + f"Skipped: {why}.\n"
    rows = [
        [
            name,
            _number(row.get("passed")),
            f"{row.get('exit_status')} (expected {row.get('expected_exit_status')})",
            _number(row.get("emergency_checkpoint")),
            row.get("message", row.get("error", ""))[:200],
        ]  # fmt: skip
        for name, row in oom.items()
    ]
    return title + _table(["drill", "passed", "exit status", "emergency checkpoint", "message"], rows)


def buffer_section(buffer: Any) -> str:
    title = "## Replay buffer capacity against VRAM (SAC, buffer in host RAM)\n\n"
    if why := _skipped(buffer):
        return title + f"Skipped: {why}.\n"
    rows = [
        [
            f"{row['capacity']:,}",
            _number(row.get("peak_vram_mib"), 1),
            _number(row.get("peak_rss_mib"), 0),
            _number(row.get("buffer_full_size_mib"), 0),
            row.get("error", ""),
        ]  # fmt: skip
        for row in buffer["rows"]
    ]
    header = ["capacity", "peak VRAM MiB", "peak RSS MiB", "full buffer MiB", "error"]
    return title + _table(header, rows) + f"\nVRAM flat: {_number(buffer.get('vram_flat'))}.\n"


def device_twin_section(section: Any) -> str:
    """The training twin on the training device: the twin's frames/s against num_envs, then the profiles' fits."""
    # lazy: the table's layout is the bench's (bench/twin.py), which a report of another section never needs
    from benchmarks.bench.twin import scaling_cells

    title = "## The twin on the training device (`env.backend.device: training`)\n\n"
    if why := _skipped(section):
        return title + f"Skipped: {why}.\n"
    twin = section["twin"]
    text = title
    if "skipped" in twin:
        text += f"Twin frames/s vs num_envs: skipped ({twin['skipped']}).\n"
    elif "error" in twin:
        text += f"Twin frames/s vs num_envs: failed: {twin['error'][:300]}\n"
    else:
        years = twin.get("years")
        text += (
            f"Training twin frames/s vs num_envs ({twin['site']}, the card's problem"
            f"{', training years ' + ', '.join(map(str, years)) if years else ''}; TorchRL `Collector`, random policy, "
            f"rollouts stored on the twin's device; at least {twin['seconds']:g} s a row"
            + (f"; CUDA under the {twin['cap_gib']:g} GiB cap" if twin.get("cap_gib") else "")
            + "):\n\n"
        )
        header, body = scaling_cells(twin["rows"])
        text += _table(header, body)
    fits = section["fits"]
    if why := _skipped(fits):
        text += f"\nFits: skipped: {why}.\n"
    else:
        rows = []
        for row in fits:
            if "error" in row:
                rows.append([row["profile"], "failed: " + row["error"][:160]] + [""] * 8)
                continue
            stopped = row.get("stopped_by_time_at_frames")
            budget = row.get("budget")
            frames = f"{row.get('frames_done', 0):,}"
            if budget:
                frames += f" of {budget:,}" + (" (stopped by time)" if stopped else "")
            else:
                frames += f" (stopped {row['stop_after_s']:g} s after the first rollout)"
            bill = row.get("bill_pen")
            rows.append(
                [
                    row["profile"],
                    row.get("precision", "-"),
                    frames,
                    _number(row.get("frames_per_s"), 0),
                    _number(row.get("frames_per_fit_s"), 0),
                    _number(row.get("wall_s"), 0),
                    _number(row.get("process_wall_s"), 0),
                    f"{_number(row.get('peak_allocated_gib'))} / {_number(row.get('peak_reserved_gib'))}",
                    f"{bill:,.0f}" if bill is not None else row.get("bill_error", "-"),
                ]
            )
        header = ["profile", "precision", "frames", "frames/s (after 1st rollout)", "frames/s (whole fit)",
                  "fit wall s", "process wall s (setup, fit, test)", "peak VRAM alloc / reserved GiB",
                  "dev-year bill PEN"]  # fmt: skip
        text += (
            "\nFits with `--model.init_args.env.backend.device training`, one at a time; no evaluation during the fit "
            "(`--trainer.limit_val_batches 0`), then the final test of the final policy on the twin over the "
            "development year (the bill). The capped fits are speed figures: their bills are of policies trained for "
            "seconds.\n\n" + _table(header, rows)
        )
    return text + verdict_line(section.get("verdict") or {})


def verdict_line(verdict: dict[str, Any]) -> str:
    """The device-twin section's verdicts as one sentence (empty without any)."""
    parts = []
    if "fastest_cuda" in verdict:
        best = verdict["fastest_cuda"]
        parts.append(f"fastest CUDA size {best['num_envs']:,} envs at {best['frames_per_s']:,.0f} frames/s")
        parts.append(f"largest CUDA size run {verdict['largest_cuda_num_envs']:,}")
    if "fastest_cuda_over_fastest_cpu" in verdict:
        parts.append(f"fastest CUDA row over the fastest CPU row {verdict['fastest_cuda_over_fastest_cpu']:.2f}x")
    if "whole_ppo_frames_per_s" in verdict:
        met = "met" if verdict["whole_ppo_goal_met"] else "not met"
        parts.append(f"whole PPO fit {verdict['whole_ppo_frames_per_s']:,.0f} frames/s (goal 150,000 over the whole "
                     f"budget: {met})")  # fmt: skip
    return "\n" + "; ".join(parts) + ".\n" if parts else ""


def markdown_report(report: dict[str, Any]) -> str:
    versions = ", ".join(f"{name} {version}" for name, version in report["versions"].items() if version)
    head = f"# gpu-check: {report.get('gpu', 'no CUDA device')}\n\n{versions}; wall time {report['wall_s']:.0f} s.\n\n"
    return "\n".join(
        [
            head,
            device_section(report["device"]),
            profiles_section(report["profiles"], report["cap_gib"]),
            whole_fits_section(report.get("whole_fits", {"skipped": "not in this report"})),
            device_twin_section(report.get("device_twin", {"skipped": "not in this report"})),
            update_section(report["update_step"]),
            oom_section(report["oom_drill"]),
            buffer_section(report["buffer"]),
        ]
    )
