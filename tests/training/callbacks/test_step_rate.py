"""StepRate: window-averaged frames/s, updates/s and ETA from the module's counters, with a batches/s fallback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from callbacks_testkit import STEPS_PER_EPISODE, TinyRegression, TinyRLModule, logged_rows, make_trainer

from iquitos_lightning.callbacks import StepRate
from iquitos_lightning.training.callbacks.step_rate import CounterSample, eta_seconds, format_duration, window_rates


def test_rl_module_logs_frames_updates_episodes_and_finite_eta(tmp_path: Path) -> None:
    step_rate = StepRate(log_every_n_steps=5, window=8)
    module = TinyRLModule(frame_budget=10_000, batch_size=8)
    trainer = make_trainer(tmp_path, [step_rate], max_steps=20)
    trainer.fit(module)

    rows = [row for row in logged_rows(trainer) if "speed/frames_per_s" in row]
    assert len(rows) == 20 // 5
    last = rows[-1]
    assert last["progress/frames_done"] == module.frames_done == 20 * 8
    assert last["progress/updates_done"] == module.updates_done == 20
    assert last["progress/episodes_done"] == module.episodes_done == 20 // STEPS_PER_EPISODE
    assert last["progress/last_episode_return"] == module.last_episode_return
    for row in rows:
        assert row["speed/frames_per_s"] > 0 and row["speed/updates_per_s"] > 0
        # Both rates share one window, so their ratio is the frames per update exactly, whatever the speed.
        assert row["speed/frames_per_s"] / row["speed/updates_per_s"] == pytest.approx(8)
        assert math.isfinite(row["progress/eta_s"]) and row["progress/eta_s"] > 0
    assert step_rate.eta_s == pytest.approx((10_000 - 160) / step_rate.rates.frames_per_s)  # type: ignore[union-attr]


def test_plain_module_falls_back_to_batches_per_second_and_max_steps(tmp_path: Path) -> None:
    step_rate = StepRate(log_every_n_steps=4)
    trainer = make_trainer(tmp_path, [step_rate], max_steps=12)
    trainer.fit(TinyRegression())

    rows = [row for row in logged_rows(trainer) if "speed/batches_per_s" in row]
    assert len(rows) == 12 // 4
    assert all(row["speed/batches_per_s"] > 0 for row in rows)
    assert not any(key.startswith(("speed/frames", "speed/updates", "progress/frames")) for row in rows for key in row)
    assert rows[0]["progress/eta_s"] > 0  # 4 of 12 steps done
    assert rows[-1]["progress/eta_s"] == 0  # max_steps reached


def test_window_rates_between_two_samples() -> None:
    oldest = CounterSample(time_s=10.0, batches=0, global_step=0, frames=1_000, updates=10)
    newest = CounterSample(time_s=12.0, batches=4, global_step=12, frames=3_000, updates=30)
    rates = window_rates(oldest, newest)
    assert rates is not None
    assert (rates.batches_per_s, rates.steps_per_s, rates.frames_per_s, rates.updates_per_s) == (2, 6, 1_000, 10)
    assert window_rates(newest, newest) is None
    no_frames = window_rates(CounterSample(0.0, 0, 0), CounterSample(1.0, 5, 5))
    assert no_frames is not None and no_frames.frames_per_s is None and no_frames.updates_per_s is None


def test_eta_cases() -> None:
    assert eta_seconds(1_000, 11_000, 100.0) == 100.0
    assert eta_seconds(11_000, 11_000, 100.0) == 0.0
    assert eta_seconds(1_000, None, 100.0) is None
    assert eta_seconds(1_000, 11_000, None) is None
    assert eta_seconds(1_000, 11_000, 0.0) == math.inf


def test_durations_read_as_clock_times() -> None:
    assert format_duration(3723) == "1:02:03"
    assert format_duration(2 * 86_400 + 5) == "2d 0:00:05"
    assert format_duration(None) == "-"
    assert format_duration(math.inf) == "-"


def test_window_must_hold_two_samples() -> None:
    with pytest.raises(ValueError):
        StepRate(window=1)


def test_the_window_restarts_at_the_first_update_and_warm_up_shows_no_eta(tmp_path: Path) -> None:
    """SAC's random warm-up collects 10x faster than training runs: its batches must not set the ETA."""
    step_rate = StepRate(window=8)
    warm_up = [CounterSample(time_s=t, batches=t, global_step=0, frames=1_000 * t, updates=0) for t in range(4)]
    for sample in warm_up:
        step_rate.add_sample(sample)
    training = CounterSample(time_s=14.0, batches=4, global_step=25, frames=4_100, updates=25)
    step_rate.add_sample(training)
    rates = window_rates(step_rate._samples[0], step_rate._samples[-1])
    assert rates is not None and rates.frames_per_s == pytest.approx(100)  # 1,100 frames in 11 s, not 4,100 in 14
    # a real fit whose module has not updated yet: fps is logged, the ETA is not
    module = TinyRLModule(frame_budget=10_000, batch_size=8)
    module.after_update = lambda frames, reward: setattr(module, "frames_done", module.frames_done + frames)
    trainer = make_trainer(tmp_path, [StepRate(log_every_n_steps=5, window=8)], max_steps=10)
    trainer.fit(module)
    rows = [row for row in logged_rows(trainer) if "speed/frames_per_s" in row]
    assert rows and all(row["speed/frames_per_s"] > 0 and "progress/eta_s" not in row for row in rows)
