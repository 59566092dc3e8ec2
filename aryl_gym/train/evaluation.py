"""Running agents through the environment and heuristics natively, on fixed seeds.

* :func:`~aryl_gym.rollout.run_agent` (the one rollout loop, :mod:`aryl_gym.rollout`) plays one
  episode of an object with an SB3-style ``predict`` through the env, passing the env's action
  masks when the agent accepts them, and returns the final
  :class:`~aryl_gym.metrics.EpisodeResult` (from the last ``info``).
* :func:`run_reference` runs a reference policy natively on the simulator
  (``make_episode(scenario, seed).simulator().run(make_policy(name))``); :func:`run_agent` resets
  the env with ``options={"episode_seed": seed}``, which draws exactly that episode, so the two
  are comparable seed by seed (a plain ``reset(seed=s)`` draws the trace seed from the env's
  ``np_random`` instead).
* :func:`summarize` / :func:`ratios` give the ``compare``-style JSON.

No torch here: the agent object brings its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.metrics import EpisodeResult
from aryl_gym.metrics import names as metric_names
from aryl_gym.metrics import view as metric_view
from aryl_gym.rollout import (  # noqa: F401  (the rollout loop lives in aryl_gym.rollout)
    INVALID_KEYS,
    RESULT_KEYS,
    env_action_masks,
    invalid_from_info,
    play,
    result_from_info,
    run_agent,
    run_agent_batch,
)
from aryl_gym.scenario import make_episode

#: figures averaged over evaluation episodes (aryl_gym.metrics.METRICS, view "train")
KEY_METRICS = metric_names("train")
#: figures compared as ratios to a baseline (view "console")
RATIO_METRICS = metric_names("console")


class RandomMaskedAgent:
    """Uniformly random *valid* actions (SPEC 3 "Random") through the env: a masked action
    drawn with its own seeded generator. Discrete masks pick one allowed action; MultiDiscrete
    masks (flattened per slot, ``nvec`` given) pick one allowed level per slot."""

    def __init__(self, seed: int = 0, nvec: Sequence[int] | None = None):
        self.rng = np.random.default_rng(seed)
        self.nvec = list(nvec) if nvec is not None else None

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = False, action_masks: np.ndarray | None = None):
        if action_masks is None:
            action_masks = np.asarray(observation["action_mask"]) > 0.5
        m = np.asarray(action_masks, dtype=bool)
        batched = m.ndim == 2
        rows = m if batched else m[None]
        out = [self._one(r) for r in rows]
        return (np.asarray(out) if batched else out[0]), state

    def _one(self, m: np.ndarray) -> Any:
        if self.nvec is None:
            return int(self.rng.choice(np.flatnonzero(m)))
        acts, off = [], 0
        for n in self.nvec:
            acts.append(int(self.rng.choice(np.flatnonzero(m[off:off + n]))))
            off += n
        return np.asarray(acts)


def run_reference(
    name: str, scenario: Any, seed: int, data_root: str | None = None
) -> EpisodeResult:
    """A reference heuristic natively on the simulator (the same episode as ``reset(seed)``)."""

    sim = make_episode(scenario, seed, data_root=data_root).simulator()
    return sim.run(make_policy(name))


def mean_metrics(results: Iterable[EpisodeResult], keys: Sequence[str] = KEY_METRICS) -> dict[str, float]:
    """Mean of each key over episodes (NaN-aware: episodes without the figure are skipped)."""
    rs = list(results)
    out: dict[str, float] = {}
    for k in keys:
        vals = [float(getattr(r, k)) for r in rs if getattr(r, k) is not None]
        vals = [v for v in vals if math.isfinite(v)]
        out[k] = float(np.mean(vals)) if vals else float("nan")
    return out


def rows_for(policy: str, results: Iterable[EpisodeResult]) -> list[dict[str, Any]]:
    """``compare``-style rows: the policy label, the seed, then every metric."""
    rows = []
    for r in results:
        d = r.to_dict()
        d.pop("policy", None)
        seed = d.pop("seed", None)
        rows.append({"policy": policy, "seed": seed, **d})
    return rows


def ratios(
    by_policy: Mapping[str, Sequence[EpisodeResult]],
    baseline: str,
    keys: Sequence[str] = RATIO_METRICS,
) -> dict[str, dict[str, float | None]]:
    """For each policy, mean(metric) / mean(baseline's metric) over the same seeds: those where
    both have a finite value (was: each mean over its own episodes, so a figure missing on one
    seed compared different seeds).

    A ratio below 1 on a time metric means the policy is faster than the baseline.
    """
    if baseline not in by_policy:
        return {}

    def values(rs: Sequence[EpisodeResult], k: str) -> dict[Any, float]:
        seeds = [r.seed for r in rs]
        # by seed; by position when the seeds cannot pair (missing or repeated)
        keyed = None not in seeds and len(set(seeds)) == len(seeds)
        out: dict[Any, float] = {}
        for i, r in enumerate(rs):
            v = getattr(r, k)
            if v is not None and math.isfinite(float(v)):
                out[r.seed if keyed else i] = float(v)
        return out

    out: dict[str, dict[str, float | None]] = {}
    for name, rs in by_policy.items():
        out[name] = {}
        for k in keys:
            mine, ref = values(rs, k), values(by_policy[baseline], k)
            both = [s for s in mine if s in ref]
            a = float(np.mean([mine[s] for s in both])) if both else float("nan")
            b = float(np.mean([ref[s] for s in both])) if both else float("nan")
            out[name][k] = a / b if b and math.isfinite(a) and math.isfinite(b) else None
    return out


#: every figure of an evaluation logged to TensorBoard (metric view "tensorboard") -> its tag
CLUSTER_TAGS: dict[str, str] = {m.name: m.tag or m.name for m in metric_view("tensorboard")}
#: the references' figures logged beside the agent's (console view, in seconds)
REFERENCE_FIGURES = tuple(m.name for m in metric_view("console") if m.unit == "s")


def eval_row(
    out: Sequence[tuple[EpisodeResult, float, int]],
    timesteps: int,
    references: Mapping[str, Mapping[str, float]],
    emit: Any,
) -> tuple[dict[str, float], dict[str, float]]:
    """One evaluation's row (``eval.csv``) and mean figures, from the episodes ``out`` of
    :func:`run_agent_batch` played by the model of step ``timesteps``; ``emit(tag, value)`` logs
    each scalar (``eval/...``; SB3's logger or a TensorBoard writer). ``references``: each
    reference policy's mean figures on the same seeds. Shared by the SB3 callback and the RLlib
    evaluation, so both write the same columns."""
    results = [r for r, _, _ in out]
    m = mean_metrics(results)
    row: dict[str, float] = {"timesteps": float(timesteps)}
    for field, tag in CLUSTER_TAGS.items():
        row[field] = v = m.get(field, float("nan"))
        if math.isfinite(v):
            emit(f"eval/{tag}", v)
    row["mean_reward"] = float(np.mean([t for _, t, _ in out]))
    emit("eval/mean_reward", row["mean_reward"])
    emit("eval/episode_steps", sum(n for _, _, n in out) / max(len(out), 1))
    # episodes ended by the simulator's thrash rule (an argmax cycle of preempt and regrant)
    emit("eval/thrashing_episodes", float(sum(bool(r.thrashing) for r in results)))
    for name, ref in references.items():
        key = name.replace("-", "_")
        for field in REFERENCE_FIGURES:
            rv = ref.get(field)
            if rv is not None and math.isfinite(rv):
                emit(f"eval/{key}_{field}", rv)
        row[f"{key}_avg_jct"] = ref.get("avg_jct", float("nan"))
        r_jct = ref.get("avg_jct")
        if r_jct and math.isfinite(r_jct) and math.isfinite(m["avg_jct"]):
            row[f"jct_ratio_to_{key}"] = m["avg_jct"] / r_jct
            emit(f"eval/jct_ratio_to_{key}", row[f"jct_ratio_to_{key}"])
    return row, m


def is_new_best(m: Mapping[str, float], best: float) -> bool:
    """Whether an evaluation's mean figures make a new best model: a lower average JCT than
    ``best`` with every job of every episode finished (an episode ended early counts its jobs
    censored at the end, a lower bound, so it is never "best")."""
    return math.isfinite(m["avg_jct"]) and not m.get("jobs_unfinished", 0.0) > 0 and m["avg_jct"] < best
