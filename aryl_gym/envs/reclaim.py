"""The reclaim environment ``aryl_gym/ArylReclaim-v1`` (SPEC 6; paper section 4).

When inference needs ``n`` loaned servers back in a round, the agent picks them **one per
sub-step** among the loaned servers (masked: loaned and not yet picked). After the n-th pick
the round runs: the servers return (elastic jobs that keep ``>= w_min`` workers scale in, other
jobs on them are preempted), and the allocation is decided by a reference policy (``allocator``,
Aryl by default) as in a native run. Rounds without a reclaim are run without the agent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aryl_gym.config import ScenarioConfig, load_scenario
from aryl_gym.envs.allocation import check_reset_options, episode_seed
from aryl_gym.envs.observation import F_CLUSTER, ObservationBuilder, fit_tables
from aryl_gym.envs.reward import RewardTracker, parse_weights
from aryl_gym.scenario import make_episode
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import ClusterView, Decision

SERVER_FEATURES: tuple[str, ...] = (
    "loaned",  # 1 when on loan (a candidate)
    "picked",  # 1 when already picked this round
    "busy",  # busy GPUs / capacity
    "base",  # GPUs of base workers / capacity
    "flex",  # GPUs of flexible workers / capacity
    "jobs",  # jobs with workers on it / 8, clipped
    "preempt_cost",  # jobs preempted if it were taken now, given the picks so far / 8, clipped
    "flex_only",  # 1 when it holds only flexible workers (or nothing): no preemption
)
F_SERVER = len(SERVER_FEATURES)


class _Proxy:
    """The allocator as the simulator sees it, with the agent's picks as its reclaim rule."""

    def __init__(self, policy: Any):
        self.inner = policy
        self.name = policy.name
        self.uses_loaning = policy.uses_loaning
        self.placement = policy.placement
        self.picks: list[int] | None = None

    @property
    def event_driven(self) -> bool:
        return bool(self.inner.event_driven)

    def reset(self, seed: int | None = None) -> None:
        self.inner.reset(seed)

    def decide(self, view: ClusterView) -> Decision:
        return self.inner.decide(view)

    def reclaim(self, view: ClusterView, n: int) -> Sequence[int] | None:
        picks, self.picks = self.picks, None
        return picks


class ArylReclaimEnv(gym.Env):
    """Choose which loaned inference servers to return.

    ## Description
    The loan controller (paper section 4) returns servers to inference when its demand rises;
    every training worker on a returned server leaves it. This env asks for those servers one per
    step (a decision point is a round with a reclaim; n picks make n steps). The allocation is
    done by ``allocator`` (a policy name, default ``"aryl"``) exactly as in a native run.

    ## Observation Space
    ``Dict`` of float32 ``Box(0, 1)``: ``servers`` (inference servers, 8) with
    :data:`SERVER_FEATURES`; ``cluster`` (15,) as in ``Aryl-v1``; ``reclaim`` (2,) = servers
    still to pick / inference servers, picks made / inference servers; ``action_mask``.

    ## Action Space
    ``Discrete(inference servers)``: index of the inference server to return. Masked: loaned and
    not picked yet. An invalid pick is a no-op counted in ``info["invalid"]``.

    ## Rewards
    As ``Aryl-v1`` (:mod:`aryl_gym.envs.reward`), default ``"jct+preemption"`` weights
    ``{"jct": 1, "preemption": 1}``; non-final picks of a round get the components of zero time.

    ## Episode End
    Terminated when all jobs are done; truncated at ``max_steps``, the horizon or a stall. An
    episode in which no reclaim ever happens has one step (any action) that ends it.

    ## Arguments
    ``scenario`` ("tiny"), ``allocator`` ("aryl"), ``reward``, ``reward_scale``,
    ``invalid_penalty``, ``max_steps``, ``jobs``, ``data_root``, ``stall_hours``, ``render_mode``.

    ## Version History
    * v0: first version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | Path | ScenarioConfig = "tiny",
        allocator: str = "aryl",
        reward: str | dict[str, float] | None = None,
        reward_scale: float = 3600.0,
        invalid_penalty: float = 0.0,
        max_steps: int | None = None,
        jobs: Sequence[JobSpec] | None = None,
        data_root: str | None = None,
        stall_hours: float = 48.0,
        render_mode: str | None = None,
    ):
        from aryl_gym.agents import make_policy, policy_names

        self.config = scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario)
        if allocator not in policy_names():
            # Aryl may be absent in a partial checkout: fall back to a loaning-free baseline
            # would make reclaims impossible, so insist on a known name.
            raise ValueError(f"unknown allocator {allocator!r}; known: {', '.join(policy_names())}")
        pol = make_policy(allocator)
        if not pol.uses_loaning:
            raise ValueError(f"allocator {allocator!r} does not use loaning, so nothing is ever reclaimed")
        self.allocator = allocator
        self.proxy = _Proxy(pol)
        self.weights = parse_weights(reward or {"jct": 1.0, "preemption": 1.0}, invalid_penalty)
        self.reward_scale = float(reward_scale)
        self.max_steps = max_steps
        self.fixed_jobs = list(jobs) if jobs is not None else None
        self.data_root = data_root
        self.stall_hours = float(stall_hours)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        self.render_mode = render_mode
        c = self.config.cluster
        self.n_train = c.train_servers
        self.n_inf = max(c.inf_servers, 1)
        self.action_space = spaces.Discrete(self.n_inf)
        self.observation_space = spaces.Dict(
            {
                "servers": spaces.Box(0.0, 1.0, (self.n_inf, F_SERVER), np.float32),
                "cluster": spaces.Box(0.0, 1.0, (F_CLUSTER,), np.float32),
                "reclaim": spaces.Box(0.0, 1.0, (2,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (self.n_inf,), np.float32),
            }
        )
        self._builder = ObservationBuilder(self.config, 1, 1)
        self.sim: Simulator | None = None

    # ------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = check_reset_options(options, ("episode_seed", "jobs"))
        super().reset(seed=seed)
        ep_seed = episode_seed(self.np_random, options)
        jobs = options.get("jobs", self.fixed_jobs)
        ep = make_episode(self.config, int(ep_seed), jobs=jobs, data_root=self.data_root)
        sim = ep.simulator()
        self.sim = sim
        self.proxy.reset(sim.seed)
        sim.begin(self.proxy)
        self._builder.begin(sim)
        self.steps = 0
        self.invalid_total = 0
        self._idle_since: float | None = None
        self._wall0 = time.perf_counter()
        self._finished = False
        self._tracker = RewardTracker(sim, self.weights, self.reward_scale)
        self.picks: list[int] = []
        self.need = 0
        self._advance()
        return self._obs(), self._info({}, 0)

    def _ended(self) -> bool:
        sim = self.sim
        assert sim is not None
        return sim.done or sim.horizon_reached() or sim.stalled

    def _reclaims_needed(self) -> int:
        sim = self.sim
        assert sim is not None
        loanable = sim.loan.loanable(sim.now) if sim.uses_loaning else 0
        return max(int(np.count_nonzero(sim.srv_loaned)) - loanable, 0)

    def _advance(self) -> None:
        """Run rounds until one needs a reclaim (stop before it) or the episode ends."""
        sim = self.sim
        assert sim is not None
        while not self._ended():
            if self.picks and len(self.picks) >= self.need:
                self.proxy.picks = list(self.picks)
                self.picks, self.need = [], 0
            elif self._reclaims_needed() > 0:
                self.need = self._reclaims_needed()
                return
            sim.step(self.proxy)
            self._stall_check()

    def _stall_check(self) -> None:
        sim = self.sim
        assert sim is not None
        if not sim._running and sim._next_arrival >= sim.n_jobs and sim._queued:
            self._idle_since = sim.now if self._idle_since is None else self._idle_since
            if sim.now - self._idle_since > self.stall_hours * 3600.0:
                sim.stalled = True
        else:
            self._idle_since = None

    def action_masks(self) -> np.ndarray:
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before action_masks()")
        if self.need == 0:
            return np.ones(self.n_inf, dtype=bool)  # nothing to pick: any action ends the episode
        m = sim.srv_loaned[self.n_train :].copy()
        for s in self.picks:
            m[s - self.n_train] = False
        return m

    def step(self, action):
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if self._finished:
            raise RuntimeError("the episode has ended; call reset()")
        sim = self.sim
        invalid = 0
        if self.need > 0:
            try:
                a = int(np.asarray(action).reshape(-1)[0]) if np.size(action) == 1 else -1
            except (TypeError, ValueError, OverflowError):
                a = -1
            mask = self.action_masks()
            if 0 <= a < self.n_inf and mask[a]:
                self.picks.append(self.n_train + a)
                if len(self.picks) >= self.need:
                    self._advance()
            else:
                invalid = 1
        self.steps += 1
        self.invalid_total += invalid
        reward, comp = self._tracker.step(invalid, len(sim._queued))
        terminated = sim.done
        truncated = not terminated and (
            self.need == 0  # ended without a pending reclaim (horizon, stall, or no reclaim)
            or (self.max_steps is not None and self.steps >= self.max_steps)
            or sim.horizon_reached()
            or sim.stalled
        )
        info = self._info(comp, invalid)
        if terminated or truncated:
            from aryl_gym.metrics import episode_result

            self._finished = True
            res = episode_result(sim, f"reclaim-env:{self.allocator}", 0.0)
            res.decision_ms_mean = res.decision_ms_max = 0.0  # timing is not deterministic
            info["episode_result"] = res
            info["episode_metrics"] = res.to_dict()
        return self._obs(), float(reward), bool(terminated), bool(truncated), info

    # ------------------------------------------------------------------------------------------
    def _obs(self) -> dict[str, np.ndarray]:
        sim = self.sim
        assert sim is not None
        e = np.zeros(0, dtype=np.int64)
        _, cluster, _ = self._builder.build(sim, e, e, e, fit_tables(sim))
        S = np.zeros((self.n_inf, F_SERVER), dtype=np.float32)
        picked = set(self.picks)
        removed: dict[int, int] = {}
        for s in self.picks:
            for j, k in sim.srv_jobs[s].items():
                removed[j] = removed.get(j, 0) + k
        for i in range(self.n_inf):
            s = self.n_train + i
            cap = float(sim.srv_cap[s])
            S[i, 0] = sim.srv_loaned[s]
            S[i, 1] = s in picked
            S[i, 2] = (cap - sim.srv_free[s]) / cap if sim.srv_loaned[s] else 0.0
            S[i, 3] = sim.srv_base_gpus[s] / cap
            S[i, 4] = sim.srv_flex_gpus[s] / cap
            on = sim.srv_jobs[s]
            S[i, 5] = min(len(on) / 8.0, 1.0)
            cost = 0
            if s not in picked:
                for j, k in on.items():
                    r0 = removed.get(j, 0)
                    before = r0 > 0 and not (sim.elastic[j] and sim.workers[j] - r0 >= sim.w_min[j])
                    after = not (sim.elastic[j] and sim.workers[j] - r0 - k >= sim.w_min[j])
                    cost += int(after and not before)
            S[i, 6] = min(cost / 8.0, 1.0)
            S[i, 7] = sim.srv_base_gpus[s] == 0
        rc = np.array(
            [max(self.need - len(self.picks), 0) / self.n_inf, len(self.picks) / self.n_inf],
            dtype=np.float32,
        )
        return {
            "servers": S,
            "cluster": cluster,
            "reclaim": np.clip(rc, 0.0, 1.0),
            "action_mask": self.action_masks().astype(np.float32),
        }

    def _info(self, comp: dict[str, float], invalid: int) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        return {
            "time": sim.now,
            "to_pick": max(self.need - len(self.picks), 0),
            "picks": np.array(self.picks + [-1] * (self.n_inf - len(self.picks)), dtype=np.int64),
            "invalid": invalid,
            "invalid_total": self.invalid_total,
            "reward_components": comp,
        }

    def render(self):
        if self.render_mode is None or self.sim is None:
            return None
        from aryl_gym.envs.render import render_ansi, render_rgb

        return render_ansi(self.sim) if self.render_mode == "ansi" else render_rgb(self.sim)
