"""The rollout loop: an agent with an SB3-style ``predict`` playing episodes through a Gymnasium
env. Used by ``aryl-gym evaluate``, training's periodic evaluation
(:mod:`aryl_gym.train.evaluation`), the episode runner (:mod:`aryl_gym.episodes`), the
reclaim suite, and, through its per-step callback (like SB3's ``evaluate_policy``), by whatever
records the steps: demonstrations (``aryl-gym demos``, :mod:`aryl_gym.train.bc`), DAgger's
student states (:mod:`aryl_gym.train.dagger`) and ``scripts/check_equality.py``. No torch here:
the agent object brings its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aryl_gym.envs.options import check_max_steps, check_seed
from aryl_gym.metrics import EpisodeResult

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


def _masks_of(env: Any) -> np.ndarray:
    """The env's action masks; an env without ``action_masks()`` cannot serve a masked agent."""
    m = env_action_masks(env)
    if m is None:
        raise ValueError(f"{env!r} has no action_masks(), but the agent's predict takes action_masks")
    return m


def _split_prediction(out: Any, agent: Any) -> tuple[Any, Any]:
    """``(action, state)`` from what ``agent.predict`` returned: a tuple (or list) of two, as
    SB3's ``predict`` returns. Anything else is a ValueError naming it (was: a bare action of
    two entries was unpacked as ``action, state = action``, so the env got the first entry as
    the whole action; a bare int or a 3-tuple failed in the unpacking)."""
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return out[0], out[1]
    what = (f"an array of shape {np.shape(out)}" if isinstance(out, np.ndarray)
            else f"a {type(out).__name__} of length {len(out)}" if isinstance(out, (tuple, list))
            else f"{out!r}")
    raise ValueError(
        f"{type(agent).__name__}.predict must return (action, state) as SB3's predict does, got "
        f"{what}; return e.g. (action, None)"
    )


def _accepts_masks(predict: Callable[..., Any]) -> bool:
    try:
        return "action_masks" in inspect.signature(predict).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


class ActAgent:
    """A plain function as an agent for :func:`play`: ``act(env, obs)``, or with ``masks=True``
    ``act(obs, action_masks)`` (the masks :func:`play` read for the agent)."""

    def __init__(self, env: Any, act: Callable[..., Any], masks: bool = False):
        self.env, self.act, self.masks = env, act, masks
        if masks:
            self.predict = self._predict_masked  # type: ignore[method-assign]

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[Any, Any]:
        return self.act(self.env, observation), state

    def _predict_masked(self, observation: Any, state: Any = None, episode_start: Any = None,
                        deterministic: bool = True, action_masks: Any = None) -> tuple[Any, Any]:
        return self.act(observation, action_masks), state


@dataclass
class Step:
    """One step of :func:`play`, handed to its ``on_step`` callback after ``env.step``."""

    #: steps before this one in the episode
    index: int
    #: the observation the action was chosen on (before ``obs_transform``) and the next one
    obs: Any
    next_obs: Any
    #: the env's action masks at ``obs`` (when the agent takes masks or ``play(masks=True)``)
    mask: np.ndarray | None
    action: Any
    reward: Any
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@dataclass
class Rollout:
    """The end of one episode played by :func:`play`."""

    info: dict[str, Any]
    total_reward: float
    steps: int
    terminated: bool
    truncated: bool


def play(
    agent: Any,
    env: Any,
    seed: int | None = None,
    options: Mapping[str, Any] | None = None,
    deterministic: bool = True,
    obs_transform: Callable[[Any], Any] | None = None,
    max_steps: int | None = None,
    after_reset: Callable[[Any], None] | None = None,
    on_step: Callable[[Step], None] | None = None,
    masks: bool = False,
    on_reset: Callable[[Any, dict[str, Any]], None] | None = None,
) -> Rollout:
    """The rollout loop: ``reset(seed, options)``, then ``predict`` / ``step`` until the episode
    ends (or ``max_steps``); ``on_step(step)`` sees every :class:`Step` after ``env.step``, with
    the action masks the agent saw (``masks=True``: read them for it even when the agent does not
    take them, before ``predict``).

    ``agent.predict(obs, state=, episode_start=, deterministic=[, action_masks=])`` is SB3's
    signature; the env's action masks are passed when ``predict`` accepts ``action_masks``.
    ``on_reset(obs, info)`` sees the reset's observation and info (a dataset keeps both).
    ``obs_transform`` maps raw observations to what the agent expects (e.g. a VecNormalize's
    ``normalize_obs``); ``after_reset(env)`` runs once after the reset (checks on the episode).
    """
    max_steps = check_max_steps(max_steps)  # the env's own rule (was: 0 or -1 played one step)
    use_masks = _accepts_masks(agent.predict)
    obs, info = env.reset(seed=seed, options=dict(options) if options is not None else None)
    if on_reset is not None:
        on_reset(obs, info)
    if after_reset is not None:
        after_reset(env)
    total = 0.0
    steps = 0
    state = None
    start = np.ones((1,), dtype=bool)
    terminated = truncated = False
    while True:
        o = obs_transform(obs) if obs_transform is not None else obs
        kw: dict[str, Any] = {"state": state, "episode_start": start, "deterministic": deterministic}
        mask = env_action_masks(env) if use_masks or masks else None
        if use_masks:
            kw["action_masks"] = mask
        action, state = _split_prediction(agent.predict(o, **kw), agent)
        start = np.zeros((1,), dtype=bool)
        before = obs
        obs, reward, terminated, truncated, info = env.step(action)
        if on_step is not None:
            on_step(Step(steps, before, obs, mask, action, reward, bool(terminated), bool(truncated), info))
        total += float(reward)
        steps += 1
        if terminated or truncated or (max_steps is not None and steps >= max_steps):
            break
    return Rollout(dict(info), total, steps, bool(terminated), bool(truncated))


def run_agent(
    agent: Any,
    env: Any,
    seed: int,
    deterministic: bool = True,
    obs_transform: Callable[[Any], Any] | None = None,
    max_steps: int | None = None,
    after_reset: Callable[[Any], None] | None = None,
) -> tuple[EpisodeResult, float, int]:
    """One episode of ``agent`` through ``env`` from ``reset(seed=seed)`` (:func:`play`).

    Returns ``(result, episode return, env steps)``; the result is the
    :class:`~aryl_gym.metrics.EpisodeResult` of the final ``info``. ``seed`` is an integer >= 0;
    an episode that ``max_steps`` cuts before it ends has no result (a RuntimeError): give the
    env ``max_steps=N`` instead, which truncates it with one.
    """
    seed = check_seed(seed)
    # ``episode_seed`` makes the env draw exactly ``make_episode(scenario, seed)`` (the episode
    # the native references run on); ``seed`` alone would draw a trace seed from np_random.
    ro = play(agent, env, seed=seed, options={"episode_seed": seed},
              deterministic=deterministic, obs_transform=obs_transform, max_steps=max_steps,
              after_reset=after_reset)
    res = result_from_info(ro.info)
    if res is None and not (ro.terminated or ro.truncated):
        # was: "the env must put it in the last step's info", about an episode that had not ended
        raise RuntimeError(
            f"run_agent stopped after max_steps={max_steps} steps, before the episode ended, so "
            "there is no EpisodeResult; raise max_steps, or give the env max_steps=N (it "
            "truncates the episode with a result)"
        )
    if res is None:
        raise RuntimeError(
            "the env's final info carries no EpisodeResult (looked for "
            f"{', '.join(RESULT_KEYS)}); the env must put it in the last step's info"
        )
    return res, ro.total_reward, ro.steps


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
    :func:`run_agent`): a ``predict`` that returns a state is a ValueError. ``predict`` must
    return one action per observation of the batch (a ValueError otherwise). Results come back in
    seed order and equal :func:`run_agent`'s for a deterministic agent."""
    if len(envs) != len(seeds):
        raise ValueError(f"{len(envs)} envs for {len(seeds)} seeds; give one env per seed")
    seeds = [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
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
            kw["action_masks"] = np.stack([_masks_of(envs[i]) for i in active])
        actions, state = _split_prediction(agent.predict(batch, **kw), agent)
        # was: a state was dropped (a recurrent agent acted with a fresh memory every step), and
        # zip() paired the actions with the envs, so too few actions left the last episodes
        # unplayed with None results and too many were ignored
        if state is not None:
            raise ValueError(
                f"{type(agent).__name__}.predict returned a recurrent state, which run_agent_batch "
                "does not carry between steps; play a recurrent agent with run_agent"
            )
        if np.ndim(actions) == 0 or isinstance(actions, (str, bytes, Mapping)) or len(actions) != len(active):
            got = f"{len(actions)} actions" if np.ndim(actions) and not isinstance(actions, (str, bytes)) else repr(actions)
            raise ValueError(
                f"{type(agent).__name__}.predict got a batch of {len(active)} observations and returned "
                f"{got}; it must return one action per observation (an array with a leading "
                f"dimension of {len(active)})"
            )
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
