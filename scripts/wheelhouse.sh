#!/usr/bin/env bash
# Offline bundle: the pinned wheels (all but torch) for another machine's Python, e.g. a GPU node with no network.
#   bash scripts/wheelhouse.sh --python 3.12 --out wheelhouse-gpu --without pvlib,wandb \
#        --have scripts/targets/cuda-image.txt --max-mib 60
# then, on the target: bash scripts/install-offline.sh wheelhouse-gpu   (see scripts/wheelhouse.py for the options)
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=.venv/bin/python
[ -x "$python_bin" ] || python_bin=python3  # needs pip and `packaging`, which .venv has
exec "$python_bin" scripts/wheelhouse.py "$@"
