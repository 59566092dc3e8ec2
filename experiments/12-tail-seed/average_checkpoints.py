"""Average the policy weights of several checkpoints of one training run (stochastic weight
averaging after the fact).

    # every checkpoint of the run from 600k to 1M steps
    python experiments/12-tail-seed/average_checkpoints.py runs/RUN --from 600000 --to 1000000 --out /tmp/avg.zip
    # or named checkpoint files
    python experiments/12-tail-seed/average_checkpoints.py a.zip b.zip c.zip --out /tmp/avg.zip
    python scripts/eval_v1.py --agent avg=/tmp/avg.zip --agent ppo-v1 --loads 0.9,1.3 --seeds ... --against aryl,ppo-v1

The checkpoints (``RUN/checkpoints/rl_model_<steps>_steps.zip``, written with ``aryl-gym train
--checkpoint-freq``) must share one network: the same parameter names and shapes, else an error
names the first that differs. Every floating-point tensor of the policy's ``state_dict`` becomes
the mean over the checkpoints (in float64, then cast back); other tensors come from the last
one, which also gives the rest of the saved model. The run's ``config.yaml`` is copied beside
``OUT`` as ``.yaml``, so ``load_agent``, ``eval_v1.py`` and ``aryl-gym evaluate`` play the
average as the agent the run trained. The log: README.md beside this file.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import Any

_STEPS = re.compile(r"rl_model_(\d+)_steps\.zip$")


def run_checkpoints(run: Path, lo: int, hi: int, every: int | None = None) -> list[Path]:
    """The run's checkpoints with ``lo <= steps <= hi`` (and ``(steps - lo) % every == 0`` when
    ``every`` is given), in step order."""
    folder = run / "checkpoints"
    if not folder.is_dir():
        raise ValueError(f"{run}: no checkpoints/ folder (train with --checkpoint-freq N)")
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _STEPS.search(p.name)))
    out = [p for s, p in found if lo <= s <= hi and (every is None or (s - lo) % every == 0)]
    if not out:
        have = ", ".join(str(s) for s, _ in found) or "none"
        raise ValueError(f"{run}: no checkpoint between {lo} and {hi} steps (it has: {have})")
    return out


def average_state_dicts(dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of every floating-point tensor over ``dicts`` (same keys and shapes); other
    tensors from the last dict."""
    if not dicts:
        raise ValueError("nothing to average")
    last = dicts[-1]
    for i, d in enumerate(dicts):
        if d.keys() != last.keys():
            diff = sorted(set(d) ^ set(last))[0]
            raise ValueError(f"checkpoint {i} has a different network: parameter {diff!r} is not in both")
        for k, v in d.items():
            if tuple(v.shape) != tuple(last[k].shape):
                raise ValueError(f"checkpoint {i} has a different network: {k!r} is {tuple(v.shape)}, "
                                 f"not {tuple(last[k].shape)}")
    out = {}
    for k, v in last.items():
        if v.is_floating_point():
            out[k] = (sum(d[k].double() for d in dicts) / len(dicts)).to(v.dtype)
        else:
            out[k] = v.clone()
    return out


def _config_for(paths: list[Path]) -> Path | None:
    for p in (paths[-1].with_suffix(".yaml"), paths[-1].parent / "config.yaml", paths[-1].parent.parent / "config.yaml"):
        if p.exists():
            return p
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="+", type=Path, help="a run folder (with --from/--to) or checkpoint .zip files")
    p.add_argument("--from", dest="lo", type=int, default=None, help="first step count (run folder)")
    p.add_argument("--to", dest="hi", type=int, default=None, help="last step count (run folder)")
    p.add_argument("--every", type=int, default=None, help="only every N steps from --from")
    p.add_argument("--out", type=Path, required=True, help="the averaged model (.zip)")
    a = p.parse_args(argv)
    if a.out.suffix != ".zip":
        p.error(f"--out {a.out}: give a .zip path (the model; its config goes beside it as .yaml)")
    if a.every is not None and a.every < 1:
        p.error("--every must be >= 1")
    try:
        if len(a.inputs) == 1 and a.inputs[0].is_dir():
            if a.lo is None or a.hi is None:
                p.error("a run folder needs --from and --to (step counts)")
            paths = run_checkpoints(a.inputs[0], a.lo, a.hi, a.every)
        else:
            if a.lo is not None or a.hi is not None or a.every is not None:
                p.error("--from/--to/--every select from a run folder; give one folder, or only .zip files")
            missing = [str(x) for x in a.inputs if not x.is_file()]
            if missing:
                raise ValueError(f"no such checkpoint file: {missing[0]}")
            paths = list(a.inputs)
        import yaml

        from aryl_gym.train.config import algo_class

        cfg = _config_for(paths)
        algo = str((yaml.safe_load(cfg.read_text()) or {}).get("algo", "maskable_ppo")) if cfg else "maskable_ppo"
        cls: Any = algo_class(algo)
        models = [cls.load(str(x), device="cpu") for x in paths]
        avg = average_state_dicts([m.policy.state_dict() for m in models])
        model = models[-1]
        model.policy.load_state_dict(avg)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        model.save(str(a.out))
        if cfg is not None:
            shutil.copyfile(cfg, a.out.with_suffix(".yaml"))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) into {a.out}"
          + (f"; config {a.out.with_suffix('.yaml')}" if cfg is not None else "; no config found beside them"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
