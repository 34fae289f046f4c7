"""The card profiles learn what they learned before a restructure: weights after their first two rollouts of updates.

Each card profile (``configs/{sac,ppo,a2c}_cpu.yaml``, unchanged but for a budget of two rollouts of updates, no
evaluation, no final test) trains from its seed on the Iquitos site; its weights are held against tensors
committed in ``card_weights/``. A change that is meant to move code, not behaviour (the env's options, the
controllers, the agents' plumbing), must leave them in place. Why a tolerance rather than bits: the same code
gives bit-different floats on CPUs of the same kind (vectorised reductions differ), and PPO's 320 Adam steps carry
such a difference along; on one machine before and after a change the weights are bit-equal
(``python tests/agents/test_card_weights.py --compare DIR`` prints the largest difference).

To record new references after a change that is meant to change learning (and says so in its commit):
``python tests/agents/test_card_weights.py --write``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import torch

from iquitos_lightning.cli import run_lightning_cli

REFERENCES = Path(__file__).with_name("card_weights")

# Frames for two rollouts of updates: PPO 2 x 8,192; A2C 2 x 1,024; SAC's first update comes after its 5,000
# random frames (rounded up to 20 rollouts of 256), then two rollouts of 256 frames, 64 updates each.
TWO_ROLLOUTS_OF_UPDATES = {"ppo_cpu": 16384, "a2c_cpu": 2048, "sac_cpu": 5632}


def weights_after_two_rollouts(profile: str, root: Path) -> dict[str, torch.Tensor]:
    """The state dict of ``configs/<profile>.yaml`` after two rollouts of updates (its ``last.ckpt``)."""
    arguments = [
        "fit", "--config", f"configs/{profile}.yaml", f"--trainer.logger.init_args.save_dir={root}",
        f"--model.init_args.rollout.frame_budget={TWO_ROLLOUTS_OF_UPDATES[profile]}",
        "--model.init_args.rollout.eval_episodes=0", "--tracking.wandb=false",
        "--final_test.backend=null", "--final_test.policy=final", "--report.plots=false",
    ]  # fmt: skip
    assert run_lightning_cli(arguments) == 0
    (checkpoint,) = root.rglob("last.ckpt")
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    return {name: tensor for name, tensor in state.items() if tensor.is_floating_point()}


def largest_difference(state: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    assert state.keys() == reference.keys(), f"parameters differ: {sorted(state.keys() ^ reference.keys())}"
    return max(float((state[name] - reference[name]).abs().max()) for name in reference)


@pytest.mark.slow
def test_each_card_profile_learns_the_committed_weights_in_its_first_two_rollouts(tmp_path: Path) -> None:
    """One test for the three profiles, so one worker builds their shared site years and start-peak references once
    (on a fresh clone ~100 s of CPU, which two xdist workers each paid when the profiles were separate tests)."""
    differences = {}
    for profile in sorted(TWO_ROLLOUTS_OF_UPDATES):
        reference = torch.load(REFERENCES / f"{profile}.pt", weights_only=True)
        differences[profile] = largest_difference(weights_after_two_rollouts(profile, tmp_path / profile), reference)
    assert all(difference < 1e-4 for difference in differences.values()), differences


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the references in card_weights/")
    parser.add_argument(
        "--compare",
        type=Path,
        help="a folder: save this checkout's weights there, or compare "
        "with the weights saved there by an earlier --compare (bit-equal or the largest difference)",
    )
    options = parser.parse_args()
    import tempfile

    for profile in sorted(TWO_ROLLOUTS_OF_UPDATES):
        with tempfile.TemporaryDirectory() as root:
            state = weights_after_two_rollouts(profile, Path(root))
        if options.write:
            REFERENCES.mkdir(exist_ok=True)
            torch.save(state, REFERENCES / f"{profile}.pt")
            print(f"{profile}: {len(state)} tensors written")
        if options.compare is not None:
            saved = options.compare / f"{profile}.pt"
            if saved.exists():
                earlier = torch.load(saved, weights_only=True)
                bit_equal = all(torch.equal(state[name], earlier[name]) for name in earlier)
                print(
                    f"{profile}: {'bit-equal' if bit_equal else 'differs'}, largest difference "
                    f"{largest_difference(state, earlier):.3g}"
                )
            else:
                options.compare.mkdir(parents=True, exist_ok=True)
                torch.save(state, saved)
                print(f"{profile}: saved to {saved}")


if __name__ == "__main__":
    sys.exit(_main())
