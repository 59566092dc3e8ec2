#!/usr/bin/env python
"""Thin wrapper: ``python scripts/train.py ARGS`` = ``aryl-gym train ARGS``."""

import sys

from aryl_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
