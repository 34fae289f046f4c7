"""Suite-wide settings: W&B never reaches the network from a test.

Tests run with ``WANDB_MODE=disabled`` (no W&B process per run, faster); the tests of tracking itself
set ``offline`` with ``monkeypatch``. Online mode without a network would hang ~90 s (measured with wandb 0.31).
"""

import os

os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"
