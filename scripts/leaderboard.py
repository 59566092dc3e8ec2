#!/usr/bin/env python3
"""Thin wrapper: ``python scripts/leaderboard.py ARGS`` == ``aryl-gym leaderboard ARGS``."""

import sys

from aryl_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["leaderboard", *sys.argv[1:]]))
