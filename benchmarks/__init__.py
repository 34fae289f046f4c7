"""The project's instruments: what measures the product, kept beside it (``iquitos_lightning`` never imports them,
except its command line for the two commands that run them).

- :mod:`benchmarks.bench`: ``python -m iquitos_lightning bench``, speed and memory side by side on one machine;
- :mod:`benchmarks.gpu_check`: ``python -m iquitos_lightning gpu-check``, every CUDA path measured in one command;
- ``benchmarks/gpu-check-scripts/``: the scripts each GPU measurement in ``results/gpu-check/`` ran, kept as run;
- scripts run from the checkout: ``suite_time.py`` (the test suite against a measure of the machine, or against
  another revision: ``python benchmarks/suite_time.py --against REV``) with its per-test CPU plugin
  ``per_test_cpu.py``, ``process_exit.py`` (the command line's exit), ``bench_speed.py`` (the update step's
  fast-path switches) and ``twin_speed.py`` (the twin against CityLearn).

The suite timers import each other by module name (``import per_test_cpu``): run as scripts, their folder is on
``sys.path``, and ``suite_time.py --per-test`` loads the plugin into a test run by that name.
"""
