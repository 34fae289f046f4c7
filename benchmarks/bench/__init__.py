"""Speed and memory, measured side by side on one machine: ``python -m iquitos_lightning bench``.

One module per measurement (env steps/s, training throughput against Stable-Baselines3, memory
against replay capacity, env-worker scaling, the twin simulator's slot) and :mod:`.run` to run them
all and print one table. Speed goals are read from the ratios it prints, never asserted by tests:
timings on a shared machine are noisy, so every comparison runs both sides in the same process,
interleaved in rounds, and reports the median of the per-round ratios.
"""
