"""Training-only wrappers around the allocation env.

:class:`ReferenceJCTReward` subtracts a reference policy's job time from the ``jct`` reward, a
variance reduction for policy-gradient training [ours]. The env's default reward over a step from
``t0`` to ``t1`` is ``-(A(t1) - A(t0)) / scale`` with ``A(t)`` the job time accrued by ``t``
(sum over submitted jobs of ``min(finish, t) - submit``). Most of its variance comes from the
trace (arrivals), not from the agent. The wrapper runs ``reference`` natively on the *same*
episode at reset (one simulator run, about 0.1-0.3 s on testbed), and adds
``+(A_ref(t1) - A_ref(t0)) / scale``, where ``A_ref`` is computed in closed form from the
reference's finish times. The added term depends on time only, not on the agent's actions, (at
termination the reference's job time still to come is added), so an undiscounted episode return
becomes ``(total JCT of reference - total JCT of agent) / scale`` (times the reward's ``jct``
weight, which the added term carries too; a reward without a ``jct`` component is refused)
and the optimal policy is unchanged; per-step it cancels the trace's load swings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import gymnasium as gym
import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.envs.reward import accrued

if TYPE_CHECKING:
    from aryl_gym.scenario import Episode
    from aryl_gym.sim.engine import Simulator


class SimEnv(Protocol):
    """What the reward wrappers read from the unwrapped env after ``reset()``: an aryl env, or a
    :class:`aryl_gym.train.worlds.WorldSampler`, which forwards to the env playing."""

    episode: Episode
    sim: Simulator
    reward_scale: float
    weights: dict[str, float]


def sim_env(env: gym.Env[Any, Any]) -> SimEnv:
    """``env.unwrapped``, typed as the aryl env the wrappers read."""
    return cast(SimEnv, env.unwrapped)


def jct_weight(u: SimEnv, what: str) -> float:
    """The weight of the env's ``jct`` reward component, which a term added to it carries too;
    a reward without one is a ValueError naming ``what`` (the wrapper's setting)."""
    w = float(u.weights.get("jct", 0.0))
    if not w:
        raise ValueError(
            f"{what} makes the jct reward relative to a baseline, but the env's reward has no jct "
            f"component (weights {dict(u.weights)}): add jct to the reward, or drop {what.split('=')[0]}"
        )
    return w


class ReferenceJCTReward(gym.Wrapper):
    """Reward relative to a reference heuristic on the same trace (see the module docstring)."""

    def __init__(self, env: gym.Env, reference: str = "sjf"):
        super().__init__(env)

        make_policy(reference)  # unknown names fail here, listing the known ones
        if isinstance(getattr(env.unwrapped, "weights", None), dict):  # at once (a run's preflight builds one env)
            jct_weight(sim_env(env), f"reward_reference={reference!r}")
        self.reference = reference
        self._submit = np.zeros(0)
        self._finish = np.zeros(0)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        u = sim_env(self.env)
        self._w = jct_weight(u, f"reward_reference={self.reference!r}")
        sim = u.episode.simulator()
        sim.run(make_policy(self.reference))
        self._submit = sim.submit.copy()
        self._finish = sim.finish.copy()
        self._t = float(u.sim.now)
        self._a = accrued(self._submit, self._finish, self._t)
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        u = sim_env(self.env)
        t1 = float(u.sim.now)
        a1 = accrued(self._submit, self._finish, t1)
        if terminated:
            # the agent's schedule is complete (every job finished, or the rest charged by the
            # env's early_end="charge"): the reference's remaining job time counts now
            a1 = accrued(self._submit, self._finish, np.inf) if not np.isnan(self._finish).any() else a1
        # weighted as the env weighs its jct component (was: weight 1 whatever the env's, so a
        # reward with jct weight w summed to w x agent's + 1 x reference's job time)
        bonus = self._w * (a1 - self._a) / float(u.reward_scale)
        self._t, self._a = t1, a1
        comp = dict(info.get("reward_components") or {})
        comp["reference_jct"] = bonus
        info["reward_components"] = comp
        return obs, float(reward) + bonus, terminated, truncated, info
