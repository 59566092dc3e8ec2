"""Command-line options of ``python -m aryl_gym.train.bc`` (recording demonstrations for
behaviour cloning); the recording itself is :func:`aryl_gym.train.bc.main`."""

from __future__ import annotations

import argparse

from aryl_gym.commands._common import int_arg, out_arg, seed_arg


def bc_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``python -m aryl_gym.train.bc``."""
    p = argparse.ArgumentParser(prog="python -m aryl_gym.train.bc", description=description)
    p.add_argument("--config", default="maskable_ppo")
    p.add_argument("--scenario", default="testbed")
    p.add_argument("--episodes", type=int_arg, default=48)
    p.add_argument("--seed", type=seed_arg, default=0, help="episode seeds seed .. seed+episodes-1")
    p.add_argument("--out", type=out_arg, required=True)
    p.add_argument("--policy", default="sjf-grant",
                   help="demonstrator: sjf-grant (default) or a reference policy name acting "
                        "through the env on its full state (aryl_gym.envs.predict.HeuristicPredictor)")
    return p
