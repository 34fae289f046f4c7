"""Every CUDA path of the project measured in one command: ``python -m iquitos_lightning gpu-check``.

:mod:`.run` plans and runs the checks and writes the report (:mod:`.report`); each measurement runs in a child
process of its own (:mod:`.tasks`); :mod:`.update_step`, :mod:`.whole_fits` and :mod:`.device_twin_check` are the
update-step cells, the whole fits against the CPU profiles and the twin on the training device. It reuses the
bench's measurements of the twin and of memory (:mod:`benchmarks.bench`).
"""
