"""The paired table of the single-file PPO against the SB3 ppo-v1 recipe (``compare.sh``).

``python experiments/13-single-file-ppo/paired.py OUT``: reads ``OUT/single/seed*/eval.json``
(examples/ppo_mask.py --eval-seeds) and ``OUT/sb3/*/evaluate.json`` (aryl-gym evaluate --json,
native ``aryl`` beside it) and prints, per training seed and pooled, the mean avg JCT and the
per-episode-seed ratios with 95% t intervals on the log ratios (aryl_gym.stats.paired_ratio_ci).

``avg_jct`` covers finished jobs only: an episode that the thrash or stall rule ended early
looks cheap. So the table also gives the **charged** avg JCT: with ``early_end: charge`` and the
``jct`` reward the undiscounted return is minus the job time of the episode, FIFO finishing the
jobs left at an early end, over ``reward_scale``; ``-return x reward_scale / jobs_total`` equals
``avg_jct`` on every episode that finished its jobs (checked here) and bills the others. For
the SB3 models the return comes from replaying them here (the deployed env of their config,
``run_agent``: the same episodes and actions as ``aryl-gym evaluate``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from aryl_gym.stats import paired_ratio_ci

SCALE = 36000.0  # reward_scale of both runs' env (compare.sh, maskable_ppo_scratch.yaml)


def charged(ret: float, jobs_total: float) -> float:
    return -ret * SCALE / jobs_total


def sb3_charged(run: Path, seeds: list[int]) -> tuple[dict[int, float], dict[int, int]]:
    """``{seed: charged avg JCT}`` and ``{seed: jobs unfinished}`` of a run's final model."""
    from aryl_gym.agents.learned import load_agent

    from aryl_gym.rollout import run_agent

    agent = load_agent(run / "model.zip")
    env = agent.make_env(scenario="testbed")
    out, unf = {}, {}
    for s in seeds:
        res, ret, _ = run_agent(agent, env, s)
        out[s] = charged(ret, res.jobs_total)
        unf[s] = int(res.jobs_unfinished)
        if res.jobs_unfinished == 0:
            assert abs(out[s] - res.avg_jct) < 1e-6 * res.avg_jct, (s, out[s], res.avg_jct)
    env.close()
    return out, unf


def main(out: Path) -> None:
    seeds = list(range(2000, 2010))
    for f in sorted(out.glob("single/seed*/eval.json")):
        rows = json.loads(f.read_text())["rows"]
        ch = {int(r["seed"]): charged(r["return"], r["jobs_total"]) for r in rows}
        for r in rows:
            if r["jobs_unfinished"] == 0:
                assert abs(ch[int(r["seed"])] - r["avg_jct"]) < 1e-6 * r["avg_jct"]
        unf = {int(r["seed"]): int(r["jobs_unfinished"]) for r in rows}
        print(f"{f.parent.name} single-file: charged mean {np.mean(list(ch.values())):,.0f} s; "
              f"episodes with unfinished jobs {[s for s, u in unf.items() if u]}")
        _CHARGED[("single", int(f.parent.name.removeprefix("seed")))] = ch
    for run in sorted(p.parent for p in out.glob("sb3/*/evaluate.json")):
        s = int(json.loads((run / "args.json").read_text())["args"]["seed"])
        ch, unf = sb3_charged(run, seeds)
        print(f"seed{s} sb3: charged mean {np.mean(list(ch.values())):,.0f} s; "
              f"episodes with unfinished jobs {[e for e, u in unf.items() if u]}")
        _CHARGED[("sb3", s)] = ch
    table(out)


_CHARGED: dict[tuple[str, int], dict[int, float]] = {}


def table(out: Path) -> None:
    single: dict[int, dict[int, float]] = {}
    for f in sorted(out.glob("single/seed*/eval.json")):
        s = int(f.parent.name.removeprefix("seed"))
        single[s] = {int(r["seed"]): float(r["avg_jct"]) for r in json.loads(f.read_text())["rows"]}
    sb3: dict[int, dict[int, float]] = {}
    aryl: dict[int, float] = {}
    for f in sorted(out.glob("sb3/*/evaluate.json")):
        s = json.loads((f.parent / "args.json").read_text())["args"]["seed"]
        rows = json.loads(f.read_text())["rows"]
        sb3[int(s)] = {int(r["seed"]): float(r["avg_jct"]) for r in rows if r["policy"] == "model"}
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
    print(f"avg JCT of finished jobs, pooled over training seeds {train_seeds}:")
    for name, num, den in (("single-file / sb3", pm, qm), ("single-file / aryl", pm, aryl), ("sb3 / aryl", qm, aryl)):
        print("  " + line(name, num, den))
    pc = {e: float(np.mean([_CHARGED[("single", s)][e] for s in train_seeds])) for e in eval_seeds}
    qc = {e: float(np.mean([_CHARGED[("sb3", s)][e] for s in train_seeds])) for e in eval_seeds}
    print(f"charged avg JCT (early ends billed), pooled over training seeds {train_seeds}: "
          f"single-file {np.mean(list(pc.values())):,.0f} s, sb3 {np.mean(list(qc.values())):,.0f} s, "
          f"aryl {np.mean(list(aryl.values())):,.0f} s")
    for name, num, den in (("single-file / sb3", pc, qc), ("single-file / aryl", pc, aryl), ("sb3 / aryl", qc, aryl)):
        print("  " + line(name, num, den))
    for s in train_seeds:
        print(f"  seed {s}: " + line("single-file / sb3", _CHARGED[("single", s)], _CHARGED[("sb3", s)]))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/single-file-ppo"))
