"""Input-driven variance reduction: the ``jct`` reward against the same trace's mean.

Most of the variance of the ``jct`` return comes from the arrival sequence (the *input*), not
from the agent (Mao et al., ICLR 2019, "Variance Reduction for Reinforcement Learning in
Input-Driven Environments"; the method behind Decima). Their remedy: several rollouts on one
input sequence, and a baseline computed from the returns on that same sequence.

Here, groups of training envs share episode seeds (:class:`aryl_gym.train.fast.PairedSeeds`,
``pair_group`` in a training config), so every trace is played by several rollouts, and
:class:`TraceMeanJCTReward` takes the baseline from the runs already finished on the trace. The
env's reward over a step from ``t0`` to ``t1`` is ``-(A(t1) - A(t0)) / scale`` with ``A(t)`` the
job time accrued by ``t``. At reset the wrapper fixes a baseline ``B(t)``: the mean over the
trace's pool of finished runs of their accrued job time ``A_k(t)`` (closed form from their finish
times, :func:`aryl_gym.train.wrappers.accrued`); and adds ``+(B(t1) - B(t0)) / scale`` per step
(at termination the baseline's job time still to come). The pool of a trace starts with one
native run of a reference heuristic (``reference``, Aryl by default) and receives every finished
training episode on that trace (the most recent ``pool_size`` are kept). The added term depends
on the trace and on time only, never on the agent's actions, so the optimal policy is unchanged;
an undiscounted episode return is ``(mean total JCT of the pool at reset - the agent's total
JCT) / scale`` (times the reward's ``jct`` weight, which the added term carries; a reward
without a ``jct`` component is refused): positive when the agent beats its recent runs on the
same arrivals.

The pool is shared by the envs of one process (``DummyVecEnv`` / ``ArylVecEnv``), keyed by the
episode seed and the world (:mod:`aryl_gym.train.worlds`); subprocess envs each keep their own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.train.wrappers import accrued, jct_weight, sim_env

#: trace key -> (submit times, [finish times of each finished run]); shared in the process
_POOLS: OrderedDict[Any, tuple[np.ndarray, list[np.ndarray]]] = OrderedDict()
MAX_TRACES = 512


def trace_key(env: gym.Env) -> Any:
    u = sim_env(env)
    world = getattr(u, "world", None)
    seed = u.episode.seed
    if seed is None:  # the env draws every episode from a seed; an unseeded one has no key
        raise TypeError("trace_mean reward: the episode has no seed")
    return (int(seed), tuple(sorted(world.items())) if world else None)


class TraceMeanJCTReward(gym.Wrapper):
    """``jct`` reward relative to the mean of earlier finished runs on the same trace."""

    def __init__(self, env: gym.Env, reference: str = "aryl", pool_size: int = 8):
        super().__init__(env)

        make_policy(reference)  # unknown names fail here, listing the known ones
        if isinstance(getattr(env.unwrapped, "weights", None), dict):  # at once (a run's preflight builds one env)
            jct_weight(sim_env(env), "pair_baseline='trace_mean'")
        self.reference = reference
        self.pool_size = int(pool_size)
        self._key: Any = None
        self._submit = np.zeros(0)
        self._finish = np.zeros(0)  # the pool's finish times, concatenated
        self._runs = 1

    def _pool(self) -> tuple[np.ndarray, list[np.ndarray]]:
        key = self._key
        if key in _POOLS:
            _POOLS.move_to_end(key)
            return _POOLS[key]
        sim = sim_env(self.env).episode.simulator()
        sim.run(make_policy(self.reference))
        entry = (sim.submit.copy(), [sim.finish.copy()])
        _POOLS[key] = entry
        while len(_POOLS) > MAX_TRACES:
            _POOLS.popitem(last=False)
        return entry

    def baseline(self, t: float) -> float:
        """``B(t)``: the pool's mean accrued job time at ``t`` (seconds)."""
        return accrued(self._sub_rep, self._finish, t) / self._runs

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self._w = jct_weight(sim_env(self.env), "pair_baseline='trace_mean'")
        self._key = trace_key(self.env)
        submit, runs = self._pool()
        self._runs = len(runs)
        self._sub_rep = np.tile(submit, self._runs)
        self._finish = np.concatenate(runs)
        self._t = float(sim_env(self.env).sim.now)
        self._b = self.baseline(self._t)
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        u = sim_env(self.env)
        t1 = float(u.sim.now)
        b1 = self.baseline(t1)
        if terminated and not np.isnan(self._finish).any():
            b1 = self.baseline(np.inf)  # the baseline runs' job time still to come counts now
        bonus = self._w * (b1 - self._b) / float(u.reward_scale)  # weighted as the env's jct
        self._t, self._b = t1, b1
        comp = dict(info.get("reward_components") or {})
        comp["trace_baseline"] = bonus
        info["reward_components"] = comp
        if terminated:
            finish = u.sim.finish
            if not np.isnan(finish).any():
                submit, runs = _POOLS.setdefault(self._key, (u.sim.submit.copy(), []))
                runs.append(finish.copy())
                del runs[: max(len(runs) - self.pool_size, 0)]
        return obs, float(reward) + bonus, terminated, truncated, info
