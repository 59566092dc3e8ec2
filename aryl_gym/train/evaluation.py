"""Running agents through the environment and heuristics natively, on fixed seeds.

* :func:`run_agent` plays one episode of an object with an SB3-style ``predict`` through the env,
  passing the env's action masks when the agent accepts them, and returns the final
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

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from aryl_gym.metrics import EpisodeResult

#: figures logged and tabulated for every episode (SPEC 5 subset)
KEY_METRICS = (
    "avg_jct",
    "median_jct",
    "p95_jct",
    "avg_queue_time",
    "p95_queue_time",
    "combined_usage",
    "train_util",
    "preemptions",
    "preemption_ratio",
    "mean_slowdown",
    "jobs_completed",
    "jobs_unfinished",
)

#: keys of the final ``info`` that may carry the episode's result (the env's choice first)
RESULT_KEYS = ("episode_result", "result", "final_result")
#: keys of ``info`` that may carry the episode's count of invalid actions
INVALID_KEYS = ("invalid_total", "invalid_actions", "invalid_actions_total")


def result_from_info(info: Mapping[str, Any] | None) -> EpisodeResult | None:
    """The :class:`EpisodeResult` carried by a final ``info`` (object or dict), else ``None``."""
    if not info:
        return None
    for k in RESULT_KEYS:
        v = info.get(k)
        if v is None:
            continue
        if isinstance(v, EpisodeResult):
            return v
        if isinstance(v, Mapping):
            return EpisodeResult.from_dict(dict(v))
    return None


def invalid_from_info(info: Mapping[str, Any] | None) -> float | None:
    """Invalid actions counted by the env in this episode, if it reports them."""
    if not info:
        return None
    for k in INVALID_KEYS:
        v = info.get(k)
        if isinstance(v, (int, float, np.integer, np.floating)):
            return float(v)
    return None


def env_action_masks(env: Any) -> np.ndarray | None:
    """``env.action_masks()`` if the env (or what it wraps) offers it."""
    e = env
    for _ in range(16):
        fn = getattr(e, "action_masks", None)
        if callable(fn):
            return np.asarray(fn(), dtype=bool)
        if not hasattr(e, "env"):
            break
        e = e.env
    fn = getattr(getattr(env, "unwrapped", None), "action_masks", None)
    return np.asarray(fn(), dtype=bool) if callable(fn) else None


def _accepts_masks(predict: Callable[..., Any]) -> bool:
    try:
        return "action_masks" in inspect.signature(predict).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


def run_agent(
    agent: Any,
    env: Any,
    seed: int,
    deterministic: bool = True,
    obs_transform: Callable[[Any], Any] | None = None,
    max_steps: int | None = None,
) -> tuple[EpisodeResult, float, int]:
    """One episode of ``agent`` through ``env`` from ``reset(seed=seed)``.

    Returns ``(result, episode return, env steps)``. ``obs_transform`` maps raw observations to
    what the agent expects (e.g. a VecNormalize's ``normalize_obs``).
    """
    use_masks = _accepts_masks(agent.predict)
    # ``episode_seed`` makes the env draw exactly ``make_episode(scenario, seed)`` (the episode
    # the native references run on); ``seed`` alone would draw a trace seed from np_random.
    obs, info = env.reset(seed=int(seed), options={"episode_seed": int(seed)})
    total = 0.0
    steps = 0
    state = None
    start = np.ones((1,), dtype=bool)
    while True:
        o = obs_transform(obs) if obs_transform is not None else obs
        kw: dict[str, Any] = {"state": state, "episode_start": start, "deterministic": deterministic}
        if use_masks:
            kw["action_masks"] = env_action_masks(env)
        action, state = agent.predict(o, **kw)
        start = np.zeros((1,), dtype=bool)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        if terminated or truncated or (max_steps is not None and steps >= max_steps):
            break
    res = result_from_info(info)
    if res is None:
        raise RuntimeError(
            "the env's final info carries no EpisodeResult (looked for "
            f"{', '.join(RESULT_KEYS)}); the env must put it in the last step's info"
        )
    return res, total, steps


def run_agent_batch(
    agent: Any,
    envs: Sequence[Any],
    seeds: Sequence[int],
    deterministic: bool = True,
    obs_transform: Callable[[Any], Any] | None = None,
) -> list[tuple[EpisodeResult, float, int]]:
    """:func:`run_agent` on several seeds at once: ``envs[i]`` plays ``seeds[i]``; the agent is
    asked once per step for all unfinished episodes (one batched forward pass), which is what
    makes periodic evaluation affordable. Recurrent state is not supported here (use
    :func:`run_agent`). Results come back in seed order and equal :func:`run_agent`'s for a
    deterministic agent."""
    if len(envs) != len(seeds):
        raise ValueError(f"{len(envs)} envs for {len(seeds)} seeds; give one env per seed")
    use_masks = _accepts_masks(agent.predict)
    n = len(seeds)
    obs: list[Any] = [None] * n
    for i, (e, s) in enumerate(zip(envs, seeds)):
        obs[i], _ = e.reset(seed=int(s), options={"episode_seed": int(s)})
    totals = [0.0] * n
    steps = [0] * n
    results: list[EpisodeResult | None] = [None] * n
    active = list(range(n))
    while active:
        o = [obs[i] for i in active]
        if isinstance(o[0], Mapping):
            batch: Any = {k: np.stack([x[k] for x in o]) for k in o[0]}
        else:
            batch = np.stack(o)
        if obs_transform is not None:
            batch = obs_transform(batch)
        kw: dict[str, Any] = {"deterministic": deterministic}
        if use_masks:
            kw["action_masks"] = np.stack([env_action_masks(envs[i]) for i in active])
        actions, _ = agent.predict(batch, **kw)
        still = []
        for a, i in zip(actions, active):
            obs[i], r, term, trunc, info = envs[i].step(a)
            totals[i] += float(r)
            steps[i] += 1
            if term or trunc:
                results[i] = result_from_info(info)
                if results[i] is None:
                    raise RuntimeError("the env's final info carries no EpisodeResult")
            else:
                still.append(i)
        active = still
    return [(r, t, k) for r, t, k in zip(results, totals, steps)]  # type: ignore[misc]


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
    from aryl_gym.agents import make_policy
    from aryl_gym.scenario import make_episode

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
    keys: Sequence[str] = ("avg_jct", "p95_jct", "avg_queue_time", "combined_usage"),
) -> dict[str, dict[str, float | None]]:
    """For each policy, mean(metric) / mean(baseline's metric) over the same seeds.

    A ratio below 1 on a time metric means the policy is faster than the baseline.
    """
    if baseline not in by_policy:
        return {}
    base = mean_metrics(by_policy[baseline], keys)
    out: dict[str, dict[str, float | None]] = {}
    for name, rs in by_policy.items():
        m = mean_metrics(rs, keys)
        out[name] = {
            k: (m[k] / base[k] if base[k] and math.isfinite(base[k]) and math.isfinite(m[k]) else None)
            for k in keys
        }
    return out
