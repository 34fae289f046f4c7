"""The env options that moved: each earlier key, and where it lives now under ``model.init_args.env``.

Why one table: the options went from one flat list into the problem's own fields and three groups (``backend``,
``episodes``, ``training``: envs/env_config.py), and two readers need to know the way from an old key to its new
place. An earlier run's checkpoint stores the flat keys in its hparams
(:meth:`~iquitos_lightning.envs.env_config.EnvConfig.from_mapping` reads them into the groups), and a command line or
config file that still writes one is refused by jsonargparse with only the key's last part, so the CLI's one-line
error (``cli.one_line_parse_error``) names the new place from here instead of guessing a close match (it answered
``did you mean 'num_envs'?`` to ``env.num_envs``).

``backend`` itself was a value (``backend: twin``) and is a group now, the value in ``backend.train``:
:data:`GROUPS_THAT_WERE_VALUES`.
"""

from __future__ import annotations

from collections.abc import Collection

ENV_OPTION = "model.init_args.env"  # where the env's options live on the command line and in a profile
ENV_GROUPS = ("backend", "episodes", "training")  # the env's option groups (envs/env_config.py)

# earlier key (flat on the env's options) -> its place now, relative to ``model.init_args.env``
MOVED_ENV_KEYS: dict[str, str] = {
    "actions": "layout",
    "eval_backend": "backend.evaluate",
    "num_envs": "backend.num_envs",
    "num_workers": "backend.num_workers",
    "compile_twin": "backend.compile",
    "data_root": "backend.data_root",
    "seed": "episodes.seed",
    "eval_seed": "episodes.eval_seed",
    "max_episode_steps": "episodes.max_steps",
    "start": "training.start",
    "episode_hours": "training.episode_hours",
    "start_peak": "training.start_peak",
    "train_site_seeds": "training.train_site_seeds",
    "reward_baseline": "training.reward_baseline",
    "critic_forecasts": "training.critic_forecasts",
    "stored_energy_value": "training.stored_energy_value",
    "shaping_gamma": "training.shaping_gamma",
}

# a key that held a value and is a group now -> where the value lives, relative to ``model.init_args.env``
GROUPS_THAT_WERE_VALUES: dict[str, str] = {"backend": "backend.train"}


def where_it_lives_now(option: str, refused_by: Collection[str]) -> str | None:
    """For an option refused as unknown (``num_envs``, or dotted ``env.num_envs``): the sentence naming its new place,
    ``it moved to model.init_args.env.backend.num_envs (YAML: env: {backend: {num_envs: ...}})``; None when its last
    part is no earlier env key, a dotted option's parent is not the env, or an undotted option was refused by a parser
    other than the env's. ``refused_by``: the option names of the parser that refused it.

    Why the parser: jsonargparse names an unknown option by its last part alone, ``seed`` for
    ``--model.init_args.env.seed`` as for ``--model.init_args.rollout.seed``, and a short key such as ``seed`` or
    ``start`` may be meant for another option; the env's parser is the one whose options hold the env's groups."""
    parent = option.rpartition(".")[0]
    if not parent and not set(ENV_GROUPS) <= set(refused_by):
        return None
    return _moved(option, MOVED_ENV_KEYS, "it")


def where_its_value_lives_now(option: str) -> str | None:
    """For a group given a plain value (``--model.init_args.env.backend twin``, refused by jsonargparse as a config it
    cannot load): the sentence naming where the value lives now; None for any other option."""
    return _moved(option, GROUPS_THAT_WERE_VALUES, "its value")


def _moved(option: str, table: dict[str, str], what: str) -> str | None:
    parent, _, key = option.rpartition(".")
    moved = table.get(key)
    if moved is None or (parent and not parent.endswith("env")):
        return None
    *groups, name = moved.split(".")
    yaml = "".join(f"{{{group}: " for group in groups) + f"{{{name}: ...}}" + "}" * len(groups)
    return f"{what} moved to {ENV_OPTION}.{moved} (YAML: env: {yaml})"
