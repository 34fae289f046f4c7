#!/usr/bin/env bash
# Install a bundle from scripts/wheelhouse.sh with no network and no compilation, over this machine's own torch.
#   bash scripts/install-offline.sh WHEELHOUSE [TARGET]      (TARGET default: .offline-site)
# then: export PYTHONPATH=TARGET:$PYTHONPATH   (the script prints the line). PYTHON=... picks the interpreter.
set -euo pipefail
wheelhouse=${1:?usage: install-offline.sh WHEELHOUSE [TARGET]}
target=${2:-.offline-site}
python_bin=${PYTHON:-python3}
[ -f "$wheelhouse/requirements.txt" ] || { echo "install-offline.sh: $wheelhouse has no requirements.txt (made by scripts/wheelhouse.sh)" >&2; exit 2; }
"$python_bin" -c "import torch" 2>/dev/null || { echo "install-offline.sh: $python_bin has no torch: install the machine's PyTorch build first (the bundle never carries torch)" >&2; exit 2; }
wheels=()
while read -r wheel; do [ -n "$wheel" ] && wheels+=("$wheelhouse/$wheel"); done < "$wheelhouse/requirements.txt"
# --no-index: never the network; --no-deps: exactly the bundle (its MANIFEST says why each wheel is there);
# --only-binary: nothing compiled here.
"$python_bin" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --only-binary=:all: \
  --no-compile --no-cache-dir --upgrade --target "$target" "${wheels[@]}"
PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}" "$python_bin" -c "
import torch, lightning, torchrl, tensordict, gymnasium, jsonargparse, citylearn.citylearn, iquitos_lightning
print(f'install-offline.sh: ready: torch {torch.__version__} (CUDA: {torch.cuda.is_available()}), torchrl {torchrl.__version__}')"
echo "install-offline.sh: export PYTHONPATH=$target\${PYTHONPATH:+:\$PYTHONPATH}"
