"""Command-line peeking for ``python -m aryl_gym.train.zoo``: the zoo (``rl_zoo3.train``) parses
the arguments itself, but ``--algo`` must be known before, to register ``ppo_mask``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def peek_algo(args: Sequence[str], default: str = "ppo") -> str:
    """The value of ``--algo`` in ``args`` (the zoo's default ``ppo`` when absent); every other
    argument is left to the zoo."""
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--algo", default=default)
    known, _ = peek.parse_known_args(list(args))
    return str(known.algo)
