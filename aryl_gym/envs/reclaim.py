"""The reclaim environment ``aryl_gym/ArylReclaim-v1`` (SPEC 6; paper section 4).

When inference needs ``n`` loaned servers back in a round, the agent picks them **one per
sub-step** among the loaned servers (masked: loaned and not yet picked). After the n-th pick
the round runs: the servers return (elastic jobs that keep ``>= w_min`` workers scale in, other
jobs on them are preempted), and the allocation is decided by a reference policy (``allocator``,
Aryl by default) as in a native run. Rounds without a reclaim are run without the agent.

With ``snapshots=PATH`` (a ``.npz`` of :mod:`aryl_gym.reclaim_snapshots`, or a list of
snapshots) an episode is instead **one reclaim event** drawn from the file: the agent picks the
``n`` servers, each pick is rewarded ``-(jobs it newly preempts)``, and the episode ends after
the ``n``-th pick. The return is minus the preempted jobs, which the exact optimum
(:func:`aryl_gym.agents.reclaim.milp_reclaim`) bounds: an optimality gap (``aryl-gym
leaderboard --suite reclaim``).
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aryl_gym.agents import make_policy, policy_names
from aryl_gym.agents.reclaim import instance_from_view, milp_reclaim, reclaim_preemptions
from aryl_gym.config import ScenarioConfig, load_scenario
from aryl_gym.envs.actions import discrete_action
from aryl_gym.envs.allocation import (
    MAX_INVALID_STREAK,
    check_reset_options,
    episode_seed,
    plain_seed,
)
from aryl_gym.envs.observation import F_CLUSTER, ObservationBuilder, fit_tables
from aryl_gym.envs.options import (
    check_flag,
    check_jobs,
    check_max_steps,
    check_reward_scale,
    is_int,
)
from aryl_gym.envs.render import render_ansi, render_rgb
from aryl_gym.envs.reward import RewardTracker, parse_weights
from aryl_gym.metrics import episode_result
from aryl_gym.reclaim_features import F_CONTEXT_V1, F_SERVER_V1, ReclaimState
from aryl_gym.reclaim_snapshots import Snapshot, load_snapshots
from aryl_gym.scenario import make_episode, warn_if_seeds_may_be_empty
from aryl_gym.sim.engine import STALL_HOURS, Simulator, check_stall_hours
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import ClusterView, Decision
from aryl_gym.world_versions import CURRENT as CURRENT_WORLD
from aryl_gym.world_versions import check_world, in_world

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
#: the most action slots ``max_servers`` may ask for in snapshot mode (as ``MAX_WORKERS`` for Aryl-v2)
MAX_SERVERS = 4096
#: observation versions of the reclaim env: ``"v1"`` adds ``servers_v1`` and ``reclaim_v1``
#: (:mod:`aryl_gym.reclaim_features`)
RECLAIM_OBSERVATIONS: tuple[str, ...] = ("v0", "v1")


def check_reclaim_observation(observation: object) -> str:
    """``observation`` as a known version name; anything else is a ValueError naming them."""
    if not isinstance(observation, str) or observation not in RECLAIM_OBSERVATIONS:
        raise ValueError(f"observation must be one of {', '.join(RECLAIM_OBSERVATIONS)}, got {observation!r}")
    return observation


def reclaim_observation_v1(sim: Simulator, n_train: int, n_inf: int, picks: Sequence[int],
                           need: int) -> dict[str, np.ndarray]:
    """``servers_v1`` (``n_inf`` rows, :data:`~aryl_gym.reclaim_features.SERVER_FEATURES_V1`)
    and ``reclaim_v1`` of the live simulator's pending reclaim (zeros when nothing is to be
    picked): the event as :class:`~aryl_gym.reclaim_features.ReclaimState` sees it, with the
    ``picks`` made so far."""
    S = np.zeros((n_inf, F_SERVER_V1), dtype=np.float32)
    C = np.zeros(F_CONTEXT_V1, dtype=np.float32)
    if need > 0:
        inst = instance_from_view(sim.view)
        loaned = sorted(inst.loaned)
        caps = [int(sim.srv_cap[s]) for s in loaned]
        state = ReclaimState(inst, min(need, len(loaned)), caps)
        slot = {s: i for i, s in enumerate(state.servers)}
        for s in picks:
            if s in slot and not state.picked[slot[s]]:
                state.pick(slot[s])
        rows, C = state.features_v1()
        S[[s - n_train for s in state.servers]] = rows
    return {"servers_v1": S, "reclaim_v1": C}


def reclaim_mask(sim: Simulator, n_train: int, n_inf: int, picks: Sequence[int], need: int) -> np.ndarray:
    """The reclaim agent's action mask over the inference servers: loaned and not picked yet
    (all True when nothing is to be picked)."""
    if need == 0:
        return np.ones(n_inf, dtype=bool)
    m = sim.srv_loaned[n_train:].copy()
    for s in picks:
        m[s - n_train] = False
    return m


def reclaim_observation(
    sim: Simulator,
    builder: ObservationBuilder,
    n_train: int,
    n_inf: int,
    picks: Sequence[int],
    need: int,
    mask: np.ndarray,
) -> dict[str, np.ndarray]:
    """The reclaim agent's observation (``ArylReclaim-v2``'s, also the reclaim seat's of the
    two-agent view): ``servers`` (:data:`SERVER_FEATURES` of the ``n_inf`` inference servers
    after the first ``n_train`` servers), ``cluster`` (``builder``'s cluster features),
    ``reclaim`` (servers still to pick, picks made; / ``n_inf``) and ``action_mask``."""
    e = np.zeros(0, dtype=np.int64)
    _, cluster, _ = builder.build(sim, e, e, e, fit_tables(sim))
    S = np.zeros((n_inf, F_SERVER), dtype=np.float32)
    picked = set(picks)
    removed: dict[int, int] = {}
    for s in picks:
        for j, k in sim.srv_jobs[s].items():
            removed[j] = removed.get(j, 0) + k
    # n_inf is at least 1 (the spaces need a slot) but a scenario may have no inference server:
    # the slots past the simulator's servers stay zero (was: an IndexError at reset with
    # cluster.inf_servers 0)
    for i in range(min(n_inf, len(sim.srv_cap) - n_train)):
        s = n_train + i
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
        [max(need - len(picks), 0) / n_inf, len(picks) / n_inf],
        dtype=np.float32,
    )
    return {
        "servers": S,
        "cluster": cluster,
        "reclaim": np.clip(rc, 0.0, 1.0),
        "action_mask": mask.astype(np.float32),
    }


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
    not picked yet. An invalid pick is a no-op counted in ``info["invalid"]``; after
    :data:`~aryl_gym.envs.allocation.MAX_INVALID_STREAK` (1,000) in a row the episode is
    truncated, with ``info["invalid_streak"]`` set.

    ## Rewards
    As ``Aryl-v1`` (:mod:`aryl_gym.envs.reward`), default ``"jct+preemption"`` weights
    ``{"jct": 1, "preemption": 1}``; non-final picks of a round get the components of zero time.

    ## Episode End
    Terminated when all jobs are done; truncated at ``max_steps``, the horizon or a stall (the
    simulator's stall rule, :meth:`~aryl_gym.sim.engine.Simulator.check_stall`). An
    episode in which no reclaim ever happens has one step (any action) that ends it.

    ## Snapshot mode
    ``snapshots=PATH`` (or a list of :class:`~aryl_gym.reclaim_snapshots.Snapshot`): each episode
    is one saved reclaim event, the one at ``options["index"]`` or else drawn uniformly with the
    env's generator. The loaned servers, sorted by id, take slots ``0..L-1`` of an action space
    ``Discrete(max_servers)`` (default: the most loaned servers of any snapshot); ``cluster`` is
    all zeros (a snapshot holds no cluster-wide state); the reward of a pick is minus the jobs it
    newly preempts (``invalid_penalty`` for an invalid pick); terminated after the ``n``-th pick.
    ``info["preemptions"]`` counts the episode's preempted jobs, ``info["index"]`` the snapshot;
    with ``optimum=True`` the last step's info also holds ``optimal_preemptions``.

    ## Arguments
    ``scenario`` ("tiny"), ``allocator`` ("aryl"), ``reward``, ``reward_scale``,
    ``invalid_penalty``, ``max_steps``, ``jobs``, ``data_root``, ``stall_hours`` (6 h,
    :data:`~aryl_gym.sim.engine.STALL_HOURS`), ``render_mode``,
    ``snapshots``, ``max_servers``, ``optimum``, ``observation`` (``"v0"``; ``"v1"`` adds
    ``servers_v1`` and ``reclaim_v1``).

    ## Version History
    * v0: first version.
    * snapshot mode (``snapshots=``): episodes of one saved reclaim event.
    * the default ``stall_hours`` is the simulator's one stall default, 6 h (was 48 h; only
      truncation of stalled episodes changes).
    * ``observation="v1"`` (off by default): ``servers_v1`` and ``reclaim_v1``.
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
        stall_hours: float = STALL_HOURS,
        render_mode: str | None = None,
        snapshots: str | Path | Sequence[Any] | None = None,
        max_servers: int | None = None,
        optimum: bool = False,
        world_version: str = CURRENT_WORLD,
        observation: str = "v0",
        **unknown: Any,
    ):
        if unknown:
            names = [n for n in inspect.signature(ArylReclaimEnv.__init__).parameters if n not in ("self", "unknown")]
            raise TypeError(f"unknown env option {next(iter(unknown))!r}; options: {', '.join(names)} "
                            "(docs/env.md, 'Arguments of ArylReclaim-v2')")
        self.world_version = check_world(world_version, "world_version")
        self.observation_version = check_reclaim_observation(observation)
        self.snaps: list[Any] | None = None
        if snapshots is None and (max_servers is not None or optimum):
            # was: accepted and ignored (both belong to the snapshot mode)
            raise ValueError("max_servers and optimum belong to the snapshot mode; give snapshots=PATH "
                             "(or drop them)")
        if snapshots is not None:
            # the simulator mode's options: a snapshot holds its own event (was: accepted and
            # ignored, even a bad value such as stall_hours=-1 or allocator="nope")
            given = {"scenario": scenario, "allocator": allocator, "reward": reward, "reward_scale": reward_scale,
                     "jobs": jobs, "data_root": data_root, "stall_hours": stall_hours}
            defaults = inspect.signature(ArylReclaimEnv.__init__).parameters
            for name, value in given.items():
                d = defaults[name].default
                if not (value is d or (type(value) is type(d) and value == d)):
                    raise ValueError(
                        f"{name} applies to the simulator mode; the snapshot mode (snapshots=...) plays "
                        f"saved reclaim events and ignores it, got {name}={value!r} (drop it, or drop snapshots)"
                    )
            self._init_snapshots(snapshots, max_servers, invalid_penalty, max_steps, optimum, render_mode)
            return

        if not isinstance(scenario, (str, os.PathLike, ScenarioConfig)):
            # was: loaded as str(scenario), so 5 or None was "unknown scenario '5'" / "'None'"
            raise ValueError(f"scenario must be a scenario name, a YAML path (str or pathlib.Path) or a "
                             f"ScenarioConfig, got {scenario!r} ({type(scenario).__name__})")
        self.config = in_world(
            scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario), self.world_version
        )
        warn_if_seeds_may_be_empty(self.config)  # a tiny generated workload: some seeds draw no job
        if allocator not in policy_names():
            # Aryl may be absent in a partial checkout: fall back to a loaning-free baseline
            # would make reclaims impossible, so insist on a known name.
            raise ValueError(f"unknown allocator {allocator!r}; known: {', '.join(policy_names())}")
        pol = make_policy(allocator)
        if not pol.uses_loaning:
            raise ValueError(f"allocator {allocator!r} does not use loaning, so nothing is ever reclaimed")
        self.allocator = allocator
        self.proxy = _Proxy(pol)
        # was: ``reward or {...}``, so reward="" or {} gave the default weights without a word
        # (the allocation env refuses both)
        self.weights = parse_weights({"jct": 1.0, "preemption": 1.0} if reward is None else reward, invalid_penalty)
        self.reward_scale = check_reward_scale(reward_scale)
        self.max_steps = check_max_steps(max_steps)
        self.fixed_jobs = check_jobs(jobs)
        if data_root is not None and not isinstance(data_root, (str, os.PathLike)):
            # was: accepted (Aryl-v2 refuses it), and failed (or not) deep inside a load at reset
            raise ValueError(f"data_root must be a folder path (str or pathlib.Path) or None, got {data_root!r}")
        self.data_root = data_root
        self.stall_hours = check_stall_hours(stall_hours)
        if render_mode is not None and (not isinstance(render_mode, str)
                                        or render_mode not in self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        c = self.config.cluster
        self.n_train = c.train_servers
        self.n_inf = max(c.inf_servers, 1)
        self._set_spaces()
        self._builder = ObservationBuilder(self.config, 1, 1)
        self.sim: Simulator | None = None

    def _set_spaces(self) -> None:
        """Action and observation spaces for ``self.n_inf`` loaned-server slots."""
        self.action_space = spaces.Discrete(self.n_inf)
        d: dict[str, spaces.Space[Any]] = {
            "servers": spaces.Box(0.0, 1.0, (self.n_inf, F_SERVER), np.float32),
            "cluster": spaces.Box(0.0, 1.0, (F_CLUSTER,), np.float32),
            "reclaim": spaces.Box(0.0, 1.0, (2,), np.float32),
            "action_mask": spaces.Box(0.0, 1.0, (self.n_inf,), np.float32),
        }
        if self.observation_version == "v1":
            d["servers_v1"] = spaces.Box(0.0, 1.0, (self.n_inf, F_SERVER_V1), np.float32)
            d["reclaim_v1"] = spaces.Box(0.0, 1.0, (F_CONTEXT_V1,), np.float32)
        self.observation_space = spaces.Dict(d)

    # ------------------------------------------------------------------------------------------
    # snapshot mode
    # ------------------------------------------------------------------------------------------
    def _init_snapshots(
        self,
        snapshots: str | Path | Sequence[Any],
        max_servers: int | None,
        invalid_penalty: float,
        max_steps: int | None,
        optimum: bool,
        render_mode: str | None,
    ) -> None:
        snaps: list[Snapshot]
        if isinstance(snapshots, (str, os.PathLike)):
            snaps = load_snapshots(snapshots)
        elif isinstance(snapshots, Sequence) and all(isinstance(sn, Snapshot) for sn in snapshots):
            snaps = [sn for sn in snapshots if isinstance(sn, Snapshot)]
        else:
            # was: a TypeError ("'int' object is not iterable") or an AttributeError from inside
            raise ValueError(f"snapshots must be a .npz path (str or pathlib.Path) or a list of "
                             f"aryl_gym.reclaim_snapshots.Snapshot, got {snapshots!r}")
        snaps = [sn for sn in snaps if sn.n > 0]
        if not snaps:
            raise ValueError(f"snapshots={snapshots!r}: no reclaim event with n >= 1 to play")
        widest = max(sn.servers for sn in snaps)
        if max_servers is None:
            max_servers = widest
        elif not is_int(max_servers):
            # was: 8.7 became 8 without a word and "8" raised a TypeError comparing it
            raise ValueError(f"max_servers must be an integer (the action slots), got {max_servers!r}")
        if max_servers > MAX_SERVERS:
            # was: a MemoryError from numpy (the observation is max_servers x features)
            raise ValueError(f"max_servers={max_servers} is too large (at most {MAX_SERVERS}: the observation "
                             f"and the mask grow with it); the widest snapshot has {widest} loaned servers")
        if max_servers < widest:
            raise ValueError(
                f"max_servers={max_servers} but a snapshot has {widest} loaned servers; raise it"
            )
        if render_mode is not None:
            raise ValueError("snapshot mode has no rendering; use render_mode=None")
        self.snaps = snaps
        self.render_mode = None
        self.n_inf = int(max_servers)
        self.invalid_penalty = parse_weights("jct", invalid_penalty)["invalid"]  # checked
        self.max_steps = check_max_steps(max_steps)
        self.report_optimum = check_flag("optimum", optimum)  # was: bool(), so "no" was True
        self._opt_cache: dict[int, int] = {}
        self.sim = None
        self._set_spaces()

    def _snap_reset(self, options: dict[str, Any]):
        assert self.snaps is not None
        if "index" in options:
            idx = options["index"]
            if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)) or not 0 <= idx < len(self.snaps):
                raise ValueError(f"options['index'] must be an integer in [0, {len(self.snaps)}), got {idx!r}")
            idx = int(idx)
        else:
            idx = int(self.np_random.integers(len(self.snaps)))
        self.index = idx
        self.snap = self.snaps[idx]
        self.state = ReclaimState.from_snapshot(self.snap)
        self.slots = self.state.servers
        self.need = int(self.snap.n)
        self.picks: list[int] = []
        self.steps = 0
        self.invalid_total = 0
        self.invalid_streak = 0
        self.preempted = 0
        self._finished = False
        return self._snap_obs(), self._snap_info(0)

    def _snap_step(self, action):
        if self._finished:
            raise RuntimeError("the episode has ended; call reset()")
        inst = self.snap.inst
        a = discrete_action(action, self.n_inf)
        invalid = 0
        reward = 0.0
        if 0 <= a < len(self.slots) and not self.state.picked[a]:  # the action mask's rule
            self.picks.append(self.slots[a])
            new = self.state.pick(a)
            self.preempted += new
            reward = -float(new)
        else:
            invalid = 1
            reward = -self.invalid_penalty
        self.steps += 1
        self.invalid_total += invalid
        self.invalid_streak = self.invalid_streak + 1 if invalid else 0
        terminated = len(self.picks) >= self.need
        # was: no streak rule, so an agent repeating an invalid pick never ended its episode
        truncated = not terminated and (
            (self.max_steps is not None and self.steps >= self.max_steps)
            or self.invalid_streak >= MAX_INVALID_STREAK
        )
        info = self._snap_info(invalid)
        if self.invalid_streak >= MAX_INVALID_STREAK:
            info["invalid_streak"] = self.invalid_streak
        if terminated or truncated:
            self._finished = True
            metrics: dict[str, Any] = {
                "preemptions": self.preempted,
                "picks": len(self.picks),
                "n": self.need,
                "servers": len(self.slots),
                "invalid_total": self.invalid_total,
            }
            if self.report_optimum:
                if self.index not in self._opt_cache:
                    opt = milp_reclaim(inst, self.need)
                    self._opt_cache[self.index] = reclaim_preemptions(inst, opt)
                metrics["optimal_preemptions"] = self._opt_cache[self.index]
                info["optimal_preemptions"] = self._opt_cache[self.index]
            info["episode_metrics"] = metrics
        return self._snap_obs(), reward, bool(terminated), bool(truncated), info

    def _snap_mask(self) -> np.ndarray:
        m = np.zeros(self.n_inf, dtype=bool)
        m[: len(self.slots)] = ~self.state.picked
        return m

    def _snap_obs(self) -> dict[str, np.ndarray]:
        st = self.state
        L = st.L
        S = np.zeros((self.n_inf, F_SERVER), dtype=np.float32)
        S[:L] = st.features_v0()
        rc = np.array(
            [max(self.need - len(self.picks), 0) / self.n_inf, len(self.picks) / self.n_inf],
            dtype=np.float32,
        )
        obs = {
            "servers": S,
            "cluster": np.zeros(F_CLUSTER, dtype=np.float32),
            "reclaim": np.clip(rc, 0.0, 1.0),
            "action_mask": self._snap_mask().astype(np.float32),
        }
        if self.observation_version == "v1":
            S1 = np.zeros((self.n_inf, F_SERVER_V1), dtype=np.float32)
            S1[:L], obs["reclaim_v1"] = st.features_v1()
            obs["servers_v1"] = S1
        return obs

    def _picks_array(self) -> np.ndarray:
        out = np.full(self.n_inf, -1, dtype=np.int64)
        out[: len(self.state.picks)] = self.state.picks
        return out

    def _snap_info(self, invalid: int) -> dict[str, Any]:
        return {
            "index": self.index,
            "source": self.snap.source,
            "to_pick": max(self.need - len(self.picks), 0),
            "picks": self._picks_array(),
            "preemptions": self.preempted,
            "invalid": invalid,
            "invalid_total": self.invalid_total,
        }

    # ------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        allowed = ("index",) if self.snaps is not None else ("episode_seed", "jobs")
        options = check_reset_options(options, allowed)
        super().reset(seed=plain_seed(seed))  # type: ignore[arg-type]
        if self.snaps is not None:
            return self._snap_reset(options)
        ep_seed = episode_seed(self.np_random, options)
        # was: options.get("jobs", self.fixed_jobs), so {"jobs": None} dropped the env's jobs= for
        # a generated episode (the allocation env keeps them)
        jobs = options["jobs"] if options.get("jobs") is not None else self.fixed_jobs
        ep = make_episode(self.config, int(ep_seed), jobs=jobs, data_root=self.data_root)
        sim = ep.simulator()
        self.sim = sim
        self.proxy.reset(sim.seed)
        sim.begin(self.proxy)
        self._builder.begin(sim)
        self.steps = 0
        self.invalid_total = 0
        self.invalid_streak = 0  # invalid picks in a row (MAX_INVALID_STREAK truncates)
        self._wall0 = time.perf_counter()
        self._finished = False
        self._tracker = RewardTracker(sim, self.weights, self.reward_scale)
        self.picks = []
        self.need = 0
        self._advance()
        return self._obs(), self._info({}, 0)

    def _ended(self) -> bool:
        sim = self.sim
        assert sim is not None
        return sim.done or sim.horizon_reached() or sim.stalled or sim.thrashing

    def _reclaims_needed(self) -> int:
        sim = self.sim
        assert sim is not None
        return sim.reclaims_due()

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
            sim.check_stall(self.stall_hours) or sim.check_thrash(self.stall_hours)

    def action_masks(self) -> np.ndarray:
        if self.snaps is not None:
            if not hasattr(self, "snap"):
                raise RuntimeError("call reset() before action_masks()")
            return self._snap_mask()
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before action_masks()")
        # nothing to pick (need == 0): any action ends the episode
        return reclaim_mask(sim, self.n_train, self.n_inf, self.picks, self.need)

    def step(self, action):
        if self.snaps is not None:
            if not hasattr(self, "snap"):
                raise RuntimeError("call reset() before step()")
            return self._snap_step(action)
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if self._finished:
            raise RuntimeError("the episode has ended; call reset()")
        sim = self.sim
        invalid = 0
        if self.need > 0:
            a = discrete_action(action, self.n_inf)
            mask = self.action_masks()
            if 0 <= a < self.n_inf and mask[a]:
                self.picks.append(self.n_train + a)
                if len(self.picks) >= self.need:
                    self._advance()
            else:
                invalid = 1
        self.steps += 1
        self.invalid_total += invalid
        # an invalid pick does not move the clock: after MAX_INVALID_STREAK of them in a row the
        # episode is truncated, as in the allocation env (was: an agent repeating one never ended)
        self.invalid_streak = self.invalid_streak + 1 if invalid else 0
        reward, comp = self._tracker.step(invalid, sim.n_queued)
        terminated = sim.done
        truncated = not terminated and (
            self.need == 0  # ended without a pending reclaim (horizon, stall, or no reclaim)
            or (self.max_steps is not None and self.steps >= self.max_steps)
            or self.invalid_streak >= MAX_INVALID_STREAK
            or sim.horizon_reached()
            or sim.stalled
            or sim.thrashing
        )
        info = self._info(comp, invalid)
        if self.invalid_streak >= MAX_INVALID_STREAK:
            info["invalid_streak"] = self.invalid_streak
        if terminated or truncated:
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
        obs = reclaim_observation(sim, self._builder, self.n_train, self.n_inf, self.picks, self.need,
                                  self.action_masks())
        if self.observation_version == "v1":
            obs.update(reclaim_observation_v1(sim, self.n_train, self.n_inf, self.picks, self.need))
        return obs

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
        if self.render_mode is None:
            return None
        if self.sim is None:
            # was: None, without a word, for a render mode that promises a text or an image (as
            # the allocation env; docs/env.md, "Rendering")
            raise RuntimeError("call reset() before render()")

        return render_ansi(self.sim) if self.render_mode == "ansi" else render_rgb(self.sim)
