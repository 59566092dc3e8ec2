"""Evolution strategies on a learned agent's action head (es.py).

    # 40 iterations: 8 antithetic pairs on 4 fresh training-world episodes each, 2 processes
    python experiments/10-evolution-strategies/es_finetune.py --agent ppo-v1-kickstart --iterations 40 --workers 2 --out /tmp/ppo-es.zip
    # then, paired on fresh seeds (the raw policies, or drop --undeployed for the shield)
    python scripts/eval_v1.py --agent es=/tmp/ppo-es.zip --undeployed es --agent raw=ppo-v1-kickstart \\
        --undeployed raw --loads 0.9,1.3 --seeds 6700-6759 --against raw

Writes ``OUT`` (the model with the tuned head), its config beside it (``.yaml``, so
``eval_v1.py`` and ``aryl-gym evaluate`` play it as the agent it came from), ``OUT``'s
``.csv`` (one row per iteration: the learning curve on that iteration's fresh episodes) and
``.thetas.npy`` (the head after every iteration; ``--from-iteration K --thetas FILE`` writes
``OUT`` as the agent with the head after iteration K).
The log: README.md beside this file.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
from pathlib import Path


def _int_at_least(lo: int, name: str):  # noqa: ANN202
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{name} must be >= {lo}, got {v}")
        return v

    return parse


def _positive_float(name: str):  # noqa: ANN202
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (v > 0 and v < float("inf")):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number > 0, got {text!r}")
        return v

    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", default="ppo-v1-kickstart", help="a shipped name or a model path (a set-policy agent)")
    ap.add_argument("--out", required=True, type=Path, help="the tuned model (.zip)")
    ap.add_argument("--iterations", type=_int_at_least(1, "--iterations"), default=40)
    ap.add_argument("--pairs", type=_int_at_least(1, "--pairs"), default=8, help="antithetic pairs per iteration")
    ap.add_argument("--traces", type=_int_at_least(1, "--traces"), default=4,
                    help="fresh training-world episodes per iteration (shared by every candidate)")
    ap.add_argument("--sigma", type=_positive_float("--sigma"), default=0.02)
    ap.add_argument("--lr", type=_positive_float("--lr"), default=0.003, help="Adam step size")
    ap.add_argument("--seed", type=_int_at_least(0, "--seed"), default=0, help="seed of the directions")
    ap.add_argument("--first-seed", type=_int_at_least(0, "--first-seed"), default=50000,
                    help="episode seed of iteration 0's first trace (iteration i: first + i * traces ...)")
    ap.add_argument("--workers", type=_int_at_least(1, "--workers"), default=1)
    ap.add_argument("--from-iteration", type=_int_at_least(1, "--from-iteration"), default=None,
                    help="no training: write OUT as --agent with the head after this iteration of an "
                         "earlier run (its --thetas file)")
    ap.add_argument("--thetas", type=Path, default=None,
                    help="with --from-iteration: the earlier run's .thetas.npy (default: OUT's)")
    a = ap.parse_args(argv)
    if a.out.suffix != ".zip":
        ap.error(f"--out {a.out}: give a .zip path (the model; its config goes beside it as .yaml)")

    import numpy as np
    from aryl_gym.agents.learned import load_agent, resolve_agent_path
    from es import (
        ESSettings,
        RolloutEnvFactory,
        es_finetune,
        head_vector,
        set_head_vector,
    )

    try:
        agent = load_agent(a.agent)
        head_vector(agent.model.policy)
        factory = RolloutEnvFactory.for_agent(agent)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        ap.error(f"--agent {a.agent}: {exc}")
    model_path, cfg_path, _ = resolve_agent_path(a.agent)
    thetas_path = a.out.with_suffix(".thetas.npy")
    a.out.parent.mkdir(parents=True, exist_ok=True)

    def save(theta: np.ndarray) -> None:
        set_head_vector(agent.model.policy, theta)
        agent.model.save(a.out)
        if cfg_path is not None:
            shutil.copyfile(cfg_path, a.out.with_suffix(".yaml"))

    if a.from_iteration is not None:
        src = a.thetas or thetas_path
        if not src.is_file():
            ap.error(f"--from-iteration: {src} not found (run without it first, or give --thetas)")
        try:
            saved = np.load(src)
        except (OSError, ValueError) as exc:
            ap.error(f"--thetas {src}: not a head history of --agent {a.agent} ({exc})")
        if a.from_iteration > len(saved):
            ap.error(f"--from-iteration {a.from_iteration}: {src} holds {len(saved)} iterations")
        try:
            save(saved[a.from_iteration - 1])
        except ValueError as exc:
            ap.error(f"--thetas {src}: not a head history of --agent {a.agent} ({exc})")
        print(f"head after iteration {a.from_iteration} -> {a.out}")
        return 0
    if a.thetas is not None:
        ap.error("--thetas goes with --from-iteration")

    settings = ESSettings(iterations=a.iterations, pairs=a.pairs, traces=a.traces, sigma=a.sigma,
                          learning_rate=a.lr, seed=a.seed, first_episode_seed=a.first_seed)
    thetas: list[np.ndarray] = []
    csv_path = a.out.with_suffix(".csv")
    fields = ["iteration", "first_seed", "ratio_to_start", "best_ratio", "differing", "thrashing",
              "theta_thrashing", "step_norm", "seconds"]
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(fields)

    def on_iteration(row, theta) -> None:  # noqa: ANN001
        thetas.append(np.asarray(theta, dtype=np.float64).copy())
        np.save(thetas_path, np.stack(thetas))
        with csv_path.open("a", newline="") as fh:
            csv.writer(fh).writerow([row.iteration + 1, row.seeds[0], row.ratio_to_start, row.best_ratio,
                                     row.differing, row.thrashing, row.theta_thrashing, row.step_norm,
                                     round(row.seconds, 1)])

    rows = es_finetune(agent.model, factory, settings, workers=a.workers, model_path=str(model_path),
                       log=lambda s: print(s, file=sys.stderr, flush=True), on_iteration=on_iteration)
    save(thetas[-1])
    r = np.array([x.ratio_to_start for x in rows])
    half = r[len(r) // 2 :]
    half = half[np.isfinite(half)]
    print(f"{len(rows)} iterations; theta / start on the fresh episodes of the last half: "
          f"{float(np.exp(np.log(half).mean())):.4f} (geometric mean) -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
