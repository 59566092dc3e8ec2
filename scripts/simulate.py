#!/usr/bin/env python3
"""Thin wrapper: ``python scripts/simulate.py ...`` == ``aryl-gym simulate ...``."""

import sys

from aryl_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["simulate", *sys.argv[1:]]))
