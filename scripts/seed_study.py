#!/usr/bin/env python3
"""Thin wrapper: ``python scripts/seed_study.py ...`` == ``aryl-gym seed-study ...``.

Seeds a suite needs to separate a 3% difference (see :mod:`aryl_gym.leaderboard.seed_study` and
docs/leaderboard.md).
"""

import sys

from aryl_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["seed-study", *sys.argv[1:]]))
