"""The paired table of the single-file PPO against the SB3 ppo-v1 recipe (``compare.sh``).

``python experiments/13-single-file-ppo/paired.py OUT``: reads ``OUT/single/seed*/eval.json``
(examples/ppo_mask.py --eval-seeds) and ``OUT/sb3/*/evaluate.json`` (aryl-gym evaluate --json,
native ``aryl`` beside it) and prints, per training seed and pooled, the mean avg JCT and the
per-episode-seed ratios with 95% t intervals on the log ratios (aryl_gym.stats.paired_ratio_ci).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from aryl_gym.stats import paired_ratio_ci


def main(out: Path) -> None:
    single: dict[int, dict[int, float]] = {}
    for f in sorted(out.glob("single/seed*/eval.json")):
        s = int(f.parent.name.removeprefix("seed"))
        single[s] = {int(r["seed"]): float(r["avg_jct"]) for r in json.loads(f.read_text())["rows"]}
    sb3: dict[int, dict[int, float]] = {}
    aryl: dict[int, float] = {}
    for f in sorted(out.glob("sb3/*/evaluate.json")):
        s = json.loads((f.parent / "args.json").read_text())["seed"]
        rows = json.loads(f.read_text())["rows"]
        sb3[int(s)] = {int(r["seed"]): float(r["avg_jct"]) for r in rows if r["policy"] != "aryl"}
        aryl.update({int(r["seed"]): float(r["avg_jct"]) for r in rows if r["policy"] == "aryl"})
    train_seeds = sorted(set(single) & set(sb3))
    eval_seeds = sorted(aryl)

    def line(name: str, num: dict[int, float], den: dict[int, float]) -> str:
        st = paired_ratio_ci({e: num[e] / den[e] for e in eval_seeds})
        return f"{name}: {st.mean:.3f} [{st.lo:.3f}, {st.hi:.3f}] (n={st.n})"

    for s in train_seeds:
        print(f"training seed {s}: single-file {np.mean(list(single[s].values())):,.0f} s, "
              f"sb3 {np.mean(list(sb3[s].values())):,.0f} s, aryl {np.mean(list(aryl.values())):,.0f} s")
        print("  " + line("single-file / sb3", single[s], sb3[s]))
        print("  " + line("single-file / aryl", single[s], aryl))
        print("  " + line("sb3 / aryl", sb3[s], aryl))
    # pooled over training seeds: each method's mean over its runs, per episode seed
    pm = {e: float(np.mean([single[s][e] for s in train_seeds])) for e in eval_seeds}
    qm = {e: float(np.mean([sb3[s][e] for s in train_seeds])) for e in eval_seeds}
    print(f"pooled over training seeds {train_seeds}:")
    for name, num, den in (("single-file / sb3", pm, qm), ("single-file / aryl", pm, aryl), ("sb3 / aryl", qm, aryl)):
        print("  " + line(name, num, den))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/single-file-ppo"))
