"""The option names a jsonargparse parser knows, for a one-line error's "did you mean" and ``class_options``.

Why: argparse keeps a parser's options in ``parser._actions`` and has no public list of them; jsonargparse's parsers
are argparse parsers. tests/test_cli.py checks the names (an unknown option's suggestion, PPO's options).
"""

from __future__ import annotations

import argparse

from iquitos_lightning.fastpath.pins import require


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """The last dotted part of every option's destination (``model.init_args.lr`` -> ``lr``), sorted, once each."""
    require(parser, ["_actions"], library="jsonargparse", override=__name__)
    return sorted({action.dest.rsplit(".", 1)[-1] for action in parser._actions})
