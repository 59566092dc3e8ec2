#!/usr/bin/env python3
"""Seeds a suite needs to separate a 3% difference: ``python scripts/seed_study.py --help``.

Runs the scenario for every seed and entrant (rows in ``--out``, resumable), then prints the
paired seed-to-seed spread of log(JCT ratio) per entrant pair and n = (1.96 sd / log 1.03)^2
(see :mod:`aryl_gym.leaderboard.seed_study` and docs/leaderboard.md).
"""

import sys

from aryl_gym.leaderboard.seed_study import main

if __name__ == "__main__":
    sys.exit(main())
