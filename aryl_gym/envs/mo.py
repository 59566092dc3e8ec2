"""The multi-objective view ``aryl_gym/ArylMO-v2`` (and ``aryl_gym/ArylMO-v1``, World v1).

The allocation env (:class:`~aryl_gym.envs.allocation.ArylEnv`) with a **vector reward**, in
MO-Gymnasium's API: ``step()`` returns a numpy vector with one entry per objective, and the env
has a ``reward_space`` (a Gymnasium ``Box``), so MO-Gymnasium's wrappers and algorithms take it
as one of their own (``mo_gymnasium.wrappers.LinearReward(env, weight=...)`` scalarises it).
Nothing here imports MO-Gymnasium: the API is a numpy vector and an attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from aryl_gym.config import ScenarioConfig
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.options import EnvOptions
from aryl_gym.envs.reward import component_names

#: the default objectives: job completion time, preemptions, use of loaned inference GPUs
DEFAULT_OBJECTIVES: tuple[str, ...] = ("jct", "preemption", "loan_usage")

#: the sign each built-in component always has (the reward space's bounds); others are unbounded
_NONPOSITIVE = frozenset({"jct", "queue", "preemption", "invalid"})
_NONNEGATIVE = frozenset({"usage", "loan_usage"})


def check_objectives(objectives: object, weights: dict[str, float]) -> tuple[str, ...]:
    """``objectives`` (names of reward components, or ``"a+b"``) as a tuple; a ValueError names
    what is wrong: not a name or a sequence of names, an unknown or repeated name, or a
    component that the scalar reward weights (``weights``, from ``reward`` and
    ``invalid_penalty``) left out, since the weighted sum of the vector would then not be the
    scalar reward."""
    if isinstance(objectives, str):
        names = [n.strip() for n in objectives.split("+")]
        if objectives.strip() and not all(names):
            # was: empty names dropped, so "jct+" or "jct++preemption" were accepted (reward= refuses them)
            raise ValueError(f"objectives {objectives!r}: give component names joined by '+', "
                             "e.g. 'jct+preemption'")
        names = [n for n in names if n]
    elif isinstance(objectives, Sequence) and all(isinstance(n, str) for n in objectives):
        names = [n.strip() for n in objectives]
    else:
        raise ValueError(
            f"objectives must be reward component names, e.g. {list(DEFAULT_OBJECTIVES)}, got {objectives!r}"
        )
    if not names:
        raise ValueError(f"objectives must name at least one reward component, e.g. {list(DEFAULT_OBJECTIVES)}")
    known = component_names()
    for n in names:
        if n not in known:
            raise ValueError(f"unknown objective {n!r}; reward components: {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ValueError(f"objectives must not repeat a name, got {names}")
    left_out = [k for k, w in weights.items() if w and k not in names]
    if left_out:
        k = left_out[0]
        raise ValueError(
            f"the scalar reward weights {k!r} ({weights[k]:g}) but objectives {names} leave it out: "
            f"add {k!r} to objectives, or drop it from reward (invalid_penalty weights 'invalid')"
        )
    return tuple(names)


class ArylMOEnv(ArylEnv):
    """The allocation env with a vector reward (MO-Gymnasium's API).

    ## Description
    The allocation problem of ``aryl_gym/Aryl-v2`` (:class:`~aryl_gym.envs.allocation.ArylEnv`),
    unchanged: the same episodes, observations, actions, masks and episode ends. Only the
    reward differs: a vector with one named reward component per objective.

    ## Observation Space
    As ``Aryl-v2``.

    ## Action Space
    As ``Aryl-v2`` (``action_mode``).

    ## Rewards
    ``step()`` returns a float64 vector: entry ``i`` is the unweighted reward component
    ``objectives[i]`` of the step (:mod:`aryl_gym.envs.reward`; the same values as
    ``info["reward_components"]``). By default ``("jct", "preemption", "loan_usage")``:
    ``-(jobs in system, integrated over the step) / reward_scale``, ``-(preemptions in the
    step)``, ``+(GPU-seconds of loaned inference servers used by training) / (all GPUs x
    reward_scale)``. ``reward_space`` is a ``Box`` over them (``-inf..0`` for components that
    are never positive, ``0..inf`` for the usages). ``reward_weights`` holds the weights of
    the scalar reward that ``Aryl-v2`` would return with the same ``reward`` and
    ``invalid_penalty``: ``reward_weights @ vector`` is that scalar (to rounding: the scalar sums
    its terms in the registry's order and adds an early-end charge after the sum), which
    ``info["scalar_reward"]`` also holds, exactly as ``Aryl-v2`` returns it.

    ## Episode End
    As ``Aryl-v2``.

    ## Arguments
    Every argument of ``Aryl-v2`` (:class:`~aryl_gym.envs.options.EnvOptions`) and
    ``objectives``: reward component names (a sequence or ``"a+b"``), default
    :data:`DEFAULT_OBJECTIVES`. Every component the scalar reward weights must be an objective
    (else ``ValueError``), so that the weights reproduce it.

    ## Version History
    * v2 (``aryl_gym/ArylMO-v2``) and v1 (``aryl_gym/ArylMO-v1``): first version, on the worlds
      of ``Aryl-v2`` and ``Aryl-v1``.

    ## Example
    ``docs/env.md``, "Multi-objective view".
    """

    def __init__(
        self,
        options: EnvOptions | str | Path | ScenarioConfig | None = None,
        /,
        objectives: str | Sequence[str] = DEFAULT_OBJECTIVES,
        **kwargs: Any,
    ):
        super().__init__(options, **kwargs)
        self.objectives = check_objectives(objectives, self.weights)
        lo = [-np.inf if k not in _NONNEGATIVE else 0.0 for k in self.objectives]
        hi = [np.inf if k not in _NONPOSITIVE else 0.0 for k in self.objectives]
        self.reward_space = spaces.Box(np.array(lo), np.array(hi), (len(self.objectives),), np.float64)
        #: the scalar reward's weights, one per objective (MO-Gymnasium's ``LinearReward`` weight)
        self.reward_weights = np.array([self.weights[k] for k in self.objectives], dtype=np.float64)
        self.reward_weights.flags.writeable = False

    def step(self, action):  # type: ignore[override]
        obs, scalar, terminated, truncated, info = super().step(action)
        comp = info["reward_components"]
        vector = np.array([comp[k] for k in self.objectives], dtype=np.float64)
        info["scalar_reward"] = scalar
        return obs, vector, terminated, truncated, info

    def scalarize(self, vector: np.ndarray, weights: np.ndarray | None = None) -> float:
        """``sum_i weights[i] * vector[i]`` in objective order, plain float64 arithmetic (default
        weights: :attr:`reward_weights`)."""
        n = len(self.objectives)
        arrays = []
        for name, x in (("vector", vector), ("weights", self.reward_weights if weights is None else weights)):
            a = np.asarray(x)
            if a.dtype.kind not in "iuf":
                # was: strings parsed ("1" was 1.0), bools taken as 0/1
                raise ValueError(f"scalarize: {name} must hold numbers, got dtype {a.dtype} ({x!r})")
            a = a.astype(np.float64, copy=False)
            if a.shape != (n,):
                # was: zip() paired what it could, so a vector or weights of another length gave
                # a sum over the first entries without a word
                raise ValueError(f"scalarize: {name} must have one entry per objective "
                                 f"({', '.join(self.objectives)}), shape ({n},), got shape {a.shape}")
            if not np.isfinite(a).all():
                # was: a NaN or infinite weight (or entry) gave a NaN or infinite sum without a word
                raise ValueError(f"scalarize: {name} must be finite, got {a.tolist()}")
            arrays.append(a)
        v, w = arrays
        total = 0.0
        for wi, vi in zip(w.tolist(), v.tolist()):
            if wi:
                total += wi * vi
        return total
