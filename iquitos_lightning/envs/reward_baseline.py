"""A training reward measured against a reference controller: the objective's reward minus what the uncontrolled
controller (BESS idle, every EV at full power from plug-in; ``uncontrolled``) or the rule-based controller
(``rule``) earns at the same hour of the same year.

Why: most of an hour's reward is the mall's load and the sun, which no action changes. On the ``thesis`` reward the per-
step reward has a spread of 0.080 on the default year, the part a battery controller changes (its reward minus the
uncontrolled one, hour by hour) 0.028-0.040; what separates the rule-based controller from the constant "take over every
surplus and load" action (-695.95 against -703.50 a year) is a few hundredths a day, which a critic whose targets swing
with the weather does not resolve (measured: docs/experiments.md, 2026-11-26). With this baseline the targets hold only
what the agent's actions did.

The best policy is unchanged: the series subtracted is computed once, before training, from the year alone (the
uncontrolled controller's own run from hour 0), never from the agent's actions, so it shifts the return of every policy
from a given start by the same amount. Evaluation always bills the raw objective (the recording twin and CityLearn
refuse a baseline), so every table reads as before. The uncontrolled controller is the ``fleet`` layout's action (0,
+1): the BESS idles and every socket charges at the top of its band, as
:class:`~iquitos_lightning.control.references.UncontrolledController` does per socket.

``rule``: the same with the rule-based controller's run (control/fleet_rule.py, in the ``fleet`` layout). Why a second
baseline: the uncontrolled one leaves in the targets everything a battery does (0.028-0.040 a step on thesis), and the
thesis agents must resolve, inside that, what the rule does differently from "take over every surplus and load", ~0.002
a decision; measured against the rule, a policy near the rule earns near 0 at every hour and what is left is where it
acts otherwise. A staggered training episode starts mid-year with a battery charge of its own, not the rule's run's: the
series still does not depend on the agent's actions, so the best policy stays the same.

Each year's run is a one-year twin of that year, so it scores the year on the year's own reward scales (the maximum mall
load sets two of them), while a training twin scores every year on the evaluated year's scales. On the site year itself
the uncontrolled action then earns exactly 0; on a training year almost 0 (default site, thesis, year 2030: -0.0019 +-
0.0018 a step, against the 0.028-0.040 spread of what a controller changes). Still a fixed series, so the best policy is
unchanged; the committed tables were trained with it as it is.

The runs are made above the env, by control/training_references.py, and handed to the twin as a table
(envs/reference_tables.py): the env runs no controller.
"""

from __future__ import annotations

NO_BASELINE = "none"  # the objective's reward as it is
UNCONTROLLED = "uncontrolled"  # minus the uncontrolled controller's reward at the same hour of the same year
RULE = "rule"  # minus the rule-based controller's reward at the same hour of the same year
REWARD_BASELINES = (NO_BASELINE, UNCONTROLLED, RULE)


def check_reward_baseline(reward_baseline: str) -> str:
    if reward_baseline not in REWARD_BASELINES:
        raise ValueError(f"env.training.reward_baseline must be one of {REWARD_BASELINES}, got {reward_baseline!r}")
    return reward_baseline
