"""``aryl-gym policies``: list the reference policies."""

from __future__ import annotations

import argparse

NAME = "policies"
HELP = "list the registered policy names"


def add_arguments(p: argparse.ArgumentParser) -> None:
    return None


def run(args: argparse.Namespace) -> int:
    from aryl_gym.agents import make_policy, policy_names

    for name in policy_names():
        doc = (type(make_policy(name)).__doc__ or "").strip().splitlines()
        print(f"{name:16s} {doc[0] if doc else ''}")
    return 0
