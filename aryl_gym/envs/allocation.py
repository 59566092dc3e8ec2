"""The allocation environment ``aryl_gym/Aryl-v2`` (and ``aryl_gym/Aryl-v1``, World v1; SPEC 6).

The agent is the cluster scheduler of the paper (section 5): at each decision point it sets the
worker counts of the jobs in a window; the simulator (:mod:`aryl_gym.sim.engine`) does the rest
exactly as for the reference policies.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from aryl_gym.agents import make_policy
from aryl_gym.agents.base import BasePolicy
from aryl_gym.config import ScenarioConfig, load_scenario
from aryl_gym.envs.actions import make_codec
from aryl_gym.envs.damping import FlapDamping, parse_flap_damping
from aryl_gym.envs.obs_v1 import ObservationV1, extend_space
from aryl_gym.envs.observation import (
    F_CLUSTER,
    F_JOB,
    F_OUTSIDE,
    ObservationBuilder,
    WindowIndex,
    base_rates,
    fit_lists,
)
from aryl_gym.envs.options import RENDER_MODES, EnvOptions, ReclaimFn, check_jobs, resolve_reclaim
from aryl_gym.envs.render import render_ansi, render_rgb
from aryl_gym.envs.reward import RewardTracker, accrued, parse_weights
from aryl_gym.metrics import episode_result
from aryl_gym.scenario import (
    Episode,
    _seed_streams,
    fresh_future,
    make_episode,
    warn_if_seeds_may_be_empty,
)
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobSpec, JobState
from aryl_gym.sim.placement import grow_job, plan
from aryl_gym.sim.view import TRAIN, ClusterView, Decision, PlacementOptions, PlacementReport
from aryl_gym.world_versions import in_world

#: Aryl's placement options (paper 5.3): elastic jobs prefer loaned servers, flexible grouping.
ARYL_PLACEMENT = PlacementOptions(elastic_prefer_inference=True, group_flexible=True)


class EnvPolicy(BasePolicy):
    """The agent as the simulator sees it: a policy like any other (SPEC 3), whose decisions come
    from the env's actions. ``event_driven`` is switched off while the cluster is *stalled*
    (nothing running, nothing left to arrive, jobs queued) so that every round of a stall is a
    decision point instead of being fast-forwarded forever."""

    name = "env"

    def __init__(self, uses_loaning: bool, placement: PlacementOptions, reclaim_fn: ReclaimFn | None):
        self.uses_loaning = uses_loaning
        self.placement = placement
        self.reclaim_fn = reclaim_fn
        self.sim: Simulator | None = None

    @property  # type: ignore[override]
    def event_driven(self) -> bool:
        sim = self.sim
        if sim is None:
            return True
        return not sim.idle_with_queue

    def decide(self, view: ClusterView) -> Decision:  # pragma: no cover - the env decides
        raise RuntimeError("the env policy's decisions come from env.step()")

    def reclaim(self, view: ClusterView, n: int) -> Sequence[int] | None:
        return self.reclaim_fn(view, n) if self.reclaim_fn is not None else None



_RUNNING_STATE = int(JobState.RUNNING)

#: the keys ``ArylEnv.reset(options=...)`` accepts
RESET_OPTIONS: tuple[str, ...] = (
    "episode_seed", "jobs", "trace", "trace_format", "trace_map", "trace_options"
)


def check_reset_options(options: Any, allowed: Sequence[str]) -> dict[str, Any]:
    """``options`` as a dict; anything but a mapping with known keys is a ValueError."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"reset(options=...) must be a dict, got {type(options).__name__}")
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise ValueError(
            f"reset(options=...): unknown key {unknown[0]!r}; allowed keys: {', '.join(allowed)}"
        )
    check_jobs(options.get("jobs"), "reset(options={'jobs': ...})")
    topt = options.get("trace_options")
    if topt is not None and not isinstance(topt, dict):
        raise ValueError(f"reset(options={{'trace_options': ...}}) must be a dict, got {topt!r}")
    return dict(options)


def episode_seed(np_random: np.random.Generator, options: dict[str, Any]) -> int:
    """The episode to draw: ``options["episode_seed"]`` (exactly ``make_episode(scenario, s)``),
    else a seed from the env's own generator only (SPEC 6). A seed that is not an integer in
    ``[0, 2**63)`` is a ValueError (a float such as 1.5 is never rounded)."""
    seed = options.get("episode_seed")
    if seed is None:
        return int(np_random.integers(0, 2**31 - 1))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(
            f"reset(options={{'episode_seed': ...}}) must be an integer >= 0, got {seed!r} "
            f"({type(seed).__name__}); pass e.g. int(seed)"
        )
    if not 0 <= int(seed) < 2**63:
        raise ValueError(f"reset(options={{'episode_seed': ...}}) must be in [0, 2**63), got {seed}")
    return int(seed)


def accrued_job_time(sim: Simulator, t: float) -> float:
    """``A(t)`` of ``sim``: the sum over jobs submitted by ``t`` of ``min(finish, t) - submit``
    (seconds; an unfinished job counts up to ``t``)."""
    return accrued(sim.submit, sim.finish, t)


#: invalid actions in a row at one simulated time after which an episode is truncated (an agent
#: repeating an invalid action never advances time; docs/env.md)
MAX_INVALID_STREAK = 1000


def plain_seed(seed: object) -> object:
    """A numpy integer seed as a Python int (Gymnasium accepts only the latter); other values
    are left for Gymnasium to accept or reject, but a bool is a ValueError (was: Gymnasium took
    ``seed=True`` as seed 1; the vector env refuses it too)."""
    if isinstance(seed, (bool, np.bool_)):
        raise ValueError(f"reset(seed=...) must be an integer >= 0 or None, got {seed!r}")
    if isinstance(seed, np.integer):
        return int(seed)
    return seed

class ArylEnv(gym.Env):
    """Allocation for GPU training jobs on a training cluster plus loaned inference servers.

    ## Description
    Each scheduling round (paper section 5) the scheduler gives every active job a worker count.
    The env acts only at **decision points**: rounds in which something happened (arrival,
    completion, loan change, or the previous decision changed allocations); eventless rounds are
    fast-forwarded by the simulator exactly as for the reference policies. Inference servers are
    loaned and reclaimed by the loan controller (paper section 4); the servers to reclaim are
    chosen by ``reclaim`` (Aryl's rule by default). A K-job window of the active jobs is exposed
    (:mod:`aryl_gym.envs.observation` documents its order); jobs outside it keep what they have.

    ## Observation Space
    ``Dict`` of float32 ``Box(0, 1)``: ``jobs`` (K, 17), ``cluster`` (15,), ``outside`` (6,),
    ``action_mask`` (mask size of the mode). Feature names:
    :data:`aryl_gym.envs.observation.JOB_FEATURES` and friends.

    ## Action Space
    ``action_mode="targets"``: ``MultiDiscrete([max_workers + 1] * K)``;
    ``"sequential"``: ``Discrete(2K + 1)`` (grant, release, commit); ``"priority"``:
    ``Box(-1, 1, (K,))``. Rules in :mod:`aryl_gym.envs.actions`. ``action_masks()`` returns the
    boolean mask (MaskablePPO). Invalid actions are no-ops counted in ``info["invalid"]``.

    ## Rewards
    Named components in ``info["reward_components"]`` weighted by ``reward``; the default
    ``"jct"`` is ``-(jobs in system) x elapsed / reward_scale``, summing to ``-total JCT /
    reward_scale`` over a finished episode (:mod:`aryl_gym.envs.reward`).

    ## Episode End
    Terminated when every job of the trace is done. Truncated at ``max_steps`` env steps, at the
    scenario's horizon, or by the stall and thrash rules (``stall_hours``). With
    ``early_end="charge"`` an end by those two rules is terminated instead, and the last
    ``jct`` reward pays for what the reference policy ``end_fallback`` ("fifo") needs to finish
    every job from there (``info["end_charge"]``; docs/env.md). The final
    ``info`` holds ``episode_result`` (:class:`~aryl_gym.metrics.EpisodeResult`) and
    ``episode_metrics`` (its ``to_dict()``).

    ## Arguments
    Keyword arguments (or one :class:`~aryl_gym.envs.options.EnvOptions`, which documents and
    checks each of them): ``scenario`` (``"tiny"``), ``action_mode`` (``"targets"``),
    ``window`` K (16), ``reward`` (``"jct"``), ``reward_scale`` (3600 s), ``invalid_penalty``,
    ``max_steps``, ``max_workers``, ``allow_preempt``, ``release``, ``uses_loaning``,
    ``placement``, ``reclaim`` (``"aryl"``), ``jobs``, ``trace``, ``trace_format``,
    ``trace_map``, ``trace_options``, ``data_root``, ``stall_hours`` (6 h), ``thrash_sustained``,
    ``render_mode``,
    ``window_order``, ``observation``, ``flap_damping``, ``early_end``, ``end_fallback``,
    ``backfill``, ``stall_guard``, ``preempt_guard``, ``world_version`` (set by the id). An unknown name is a TypeError listing the
    valid ones. ``reset(options=...)`` accepts ``jobs``, ``trace``, ``trace_format``,
    ``trace_map``, ``trace_options`` and ``episode_seed``.

    ## Version History
    (docs/env.md, "Version history", has the details; the versioning rule is stated there.)

    * v2 (``aryl_gym/Aryl-v2``, the default): World v2's knobs on the shipped scenarios; spaces,
      rewards, action modes and arguments as in v1.
    * v1 (``aryl_gym/Aryl-v1``, kept: it draws World v1): World v1 (elastic jobs request
      ``w_min`` and grow to ``w_max``, bursty arrivals; ``priority`` starts a job at ``w_req``).
      Under this id, before the versioning rule: the thrash rule (ends an episode spent mostly
      in relaunch overheads) changed such episodes; options off by default were added
      (``observation="v1"``, ``flap_damping``, ``early_end``/``end_fallback``, ``backfill``;
      with them off every episode is as before).
    * v0 (no longer registered; ``gym.make`` names ``-v1``): first version; ``window_order`` and
      ``info["elapsed"]`` were added and the default ``stall_hours`` went from 48 to 6 under it.

    ## Example
    See ``docs/env.md`` (a test executes it).
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, options: EnvOptions | str | Path | ScenarioConfig | None = None, /, **kwargs: Any):
        if options is not None and not isinstance(options, EnvOptions):
            if "scenario" in kwargs:
                # was: the keyword won without a word (ArylEnv("tiny", scenario="testbed") played testbed)
                raise TypeError(f"scenario given twice: positionally ({options!r}) and as scenario="
                                f"{kwargs['scenario']!r}; give one")
            kwargs = {"scenario": options, **kwargs}  # the scenario given positionally
            options = None
        opts = self.options = EnvOptions.from_kwargs(options, **kwargs)
        scenario = opts.scenario
        max_workers = opts.max_workers
        self.world_version = opts.world_version
        self.backfill = opts.backfill
        self.early_end, self.end_fallback = opts.early_end, opts.end_fallback
        self.flap_damping = parse_flap_damping(opts.flap_damping)
        self.config = in_world(
            scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario), self.world_version
        )
        warn_if_seeds_may_be_empty(self.config)  # a tiny generated workload: some seeds draw no job
        self.action_mode = opts.action_mode
        self.k = opts.window
        c = self.config.cluster
        if max_workers is None:
            max_workers = int(self.config.workload.max_job_gpus or c.train_gpus)
            max_workers = max(1, min(max_workers, c.train_gpus))
        self.max_workers = int(max_workers)
        self.weights = parse_weights(opts.reward, opts.invalid_penalty)
        self.reward_scale = opts.reward_scale
        self.max_steps = opts.max_steps
        self.allow_preempt = opts.allow_preempt
        placement = opts.placement
        # EnvOptions turns a mapping (the JSON form of an env spec) into PlacementOptions
        assert placement is None or isinstance(placement, PlacementOptions)
        self.placement: PlacementOptions = placement if placement is not None else ARYL_PLACEMENT
        self._reclaim_spec = opts.reclaim
        self.policy = EnvPolicy(opts.uses_loaning, self.placement, resolve_reclaim(opts.reclaim))
        self.fixed_jobs = None if opts.jobs is None else list(opts.jobs)
        self.trace = opts.trace
        self.trace_format = opts.trace_format
        self.trace_map = opts.trace_map
        self.trace_options = dict(opts.trace_options or {})
        self.data_root = opts.data_root
        self.stall_hours = opts.stall_hours
        self.thrash_sustained = opts.thrash_sustained
        self.stall_guard = opts.stall_guard
        self.preempt_guard = opts.preempt_guard
        self.window_order = opts.window_order
        self.window_fit = opts.window_fit
        self._base_rates: list[float] | None = None  # window_order="pred_time" key, per episode
        self.render_mode = opts.render_mode
        self.codec = make_codec(opts.action_mode, self.k, self.max_workers, self.allow_preempt, opts.release)
        self.action_space = self.codec.space
        self.observation_space = spaces.Dict(
            {
                "jobs": spaces.Box(0.0, 1.0, (self.k, F_JOB), np.float32),
                "cluster": spaces.Box(0.0, 1.0, (F_CLUSTER,), np.float32),
                "outside": spaces.Box(0.0, 1.0, (F_OUTSIDE,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (self.codec.mask_size,), np.float32),
            }
        )
        self._obs_builder = ObservationBuilder(self.config, self.k, self.max_workers)
        # observation="v1" adds jobs_v1 and cluster_v1 (aryl_gym.envs.obs_v1)
        self.observation_version = opts.observation
        self._obs_v1 = ObservationV1(self.config, self.k) if opts.observation == "v1" else None
        if self._obs_v1 is not None:
            self.observation_space = extend_space(self.observation_space, self.k)
        self._obs_shapes: list[tuple[str, tuple[int, ...]]] | None = None
        self._obs_keys = ("jobs", "cluster", "outside", "action_mask") + (
            ("jobs_v1", "cluster_v1") if self._obs_v1 is not None else ()
        )
        self._pad_list = [-1] * self.k
        self.sim: Simulator | None = None
        self._wpad = np.full(self.k, -1, dtype=np.int64)
        self.window = self._wpad[:0]
        self._damping: FlapDamping | None = None
        #: jobs whose releases the masks refuse at this decision point (``flap_damping``)
        self.damped: set[int] | frozenset[int] = frozenset()
        self._windex: WindowIndex | None = None  # the active jobs in the window's orders
        self._n_q = 0  # queued jobs in this round's window
        self._base_obs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # this round's
        self.episode_count = 0
        self.backfilled = 0
        self.decision_point = 0  # decision points reached in this episode
        self.substep = 0  # sub-steps inside the current decision point (sequential)
        #: ``None`` (the default), or a test ``gate(sim)`` asked before each round is opened: when
        #: it says True the env stops there, :attr:`held`, before the round's loan phase (the
        #: two-agent view, :mod:`aryl_gym.envs.multiagent`, lets its reclaim agent pick then;
        #: :meth:`act`, :meth:`resume`, :meth:`finish`)
        self.round_gate: Callable[[Simulator], bool] | None = None
        self.held = False
        self._pending: tuple[float, Decision | None, int, PlacementReport | None] | None = None

    # -- configuration ------------------------------------------------------------------------
    def set_reclaim(self, reclaim: str | ReclaimFn | None) -> None:
        """Change the reclaim rule (takes effect from the next round)."""
        self._reclaim_spec = reclaim
        self.policy.reclaim_fn = resolve_reclaim(reclaim)

    # -- episode ------------------------------------------------------------------------------
    def _episode_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The reset options that choose the episode's jobs, checked before anything changes
        (a trace key given as None unsets the env's value; ``jobs: None`` is not given)."""
        given = [k for k in ("trace_format", "trace_map", "trace_options") if options.get(k) is not None]
        if options.get("jobs") is not None and (options.get("trace") is not None or given):
            # was: the jobs were played and the trace options ignored
            raise ValueError(
                f"reset(options=...) gives both jobs and "
                f"{('trace' if options.get('trace') is not None else given[0])}; "
                "give a trace file or a list of JobSpec, not both"
            )
        trace = options.get("trace")
        if trace is not None and (not isinstance(trace, (str, Path)) or not str(trace)):
            # was: "" (or any false value) played the scenario's generated workload
            raise ValueError(f"reset(options={{'trace': ...}}) must be a trace file path, got {trace!r}")
        if given and not options.get("trace", self.trace):
            # was: ignored, so the episode came from the generator (the constructor refuses it)
            raise ValueError(
                f"reset(options={{'{given[0]}': ...}}) applies to a trace file, and neither the "
                "options nor the env give one (add 'trace': PATH, or drop it)"
            )
        return options

    def _draw_jobs(self, options: dict[str, Any], ep_seed: int = 0) -> list[JobSpec] | None:
        """The episode's jobs: ``options`` (checked by :meth:`_episode_options`) over the env's."""
        if options.get("jobs") is not None:
            return list(options["jobs"])
        trace = options.get("trace", self.trace)
        if trace:
            try:
                # an optional dependency: its absence is handled here
                from aryl_gym.workload.traces import load_trace
            except ModuleNotFoundError as exc:  # pragma: no cover - module from another issue
                raise ValueError(
                    "loading a trace file needs aryl_gym.workload.traces; pass jobs= instead"
                ) from exc
            fmt = options.get("trace_format", self.trace_format)
            if not fmt:
                raise ValueError(
                    f"trace {trace!r} needs trace_format (philly, pollux, gavel or csv)"
                )
            jobs, _report = load_trace(
                trace,
                fmt,
                map=options.get("trace_map", self.trace_map),
                cluster=self.config,
                # the mapping draws follow the episode seed, as make_episode's job stream
                rng=_seed_streams(int(ep_seed))[0],
                data_root=self.data_root,
                **dict(options.get("trace_options", self.trace_options) or {}),
            )
            return list(jobs)
        return self.fixed_jobs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = self._episode_options(check_reset_options(options, RESET_OPTIONS))
        super().reset(seed=plain_seed(seed))  # type: ignore[arg-type]
        ep_seed = episode_seed(self.np_random, options)
        jobs = self._draw_jobs(options, int(ep_seed))
        ep = make_episode(self.config, int(ep_seed), jobs=jobs, data_root=self.data_root)
        self.episode = ep
        sim = ep.simulator()
        self.sim = sim
        self.policy.sim = sim
        self.policy.reset(sim.seed)
        sim.begin(self.policy)
        self._obs_builder.begin(sim)
        if self._obs_v1 is not None:
            self._obs_v1.begin(sim)
        self._base_rates = base_rates(sim) if self.window_order == "pred_time" else None
        self._index_jobs(sim)
        self._damping = FlapDamping(self.flap_damping, len(sim.jobs), self.stall_hours) if self.flap_damping is not None else None
        self.damped = frozenset()
        if hasattr(self.codec, "begin_episode"):
            self.codec.begin_episode(self)
        self.episode_count += 1
        self.steps = 0
        self.decision_point = 0
        self.invalid_total = 0
        self.invalid_streak = 0  # invalid actions in a row at one simulated time
        self.backfilled = 0  # jobs started by backfill=True this episode
        self._finished = False
        self._pending = None
        self._rules_at: float | None = None  # when the stall and thrash rules last said no
        self._wall0 = time.perf_counter()
        self._tracker = RewardTracker(sim, self.weights, self.reward_scale)
        self._advance_to_decision()
        if self.held:  # round_gate stopped before the first decision point: nothing to observe yet
            spaces_ = self.observation_space.spaces  # type: ignore[attr-defined]
            return {k: np.zeros(sp.shape, sp.dtype) for k, sp in spaces_.items()}, self._info({}, 0, None)
        return self._obs(), self._info({}, 0, None)

    def replace_future(
        self, future: Sequence[JobSpec], utilization: np.ndarray | None = None
    ) -> int:
        """Swap the jobs still to arrive (and the inference series after now) at this decision
        point: :meth:`Simulator.replace_future` (returns the number of jobs kept), with the
        env's per-job tables rebuilt. The
        episode goes on as if it had been drawn with the spliced trace and series; call it on a
        ``copy.deepcopy`` of the env to play one state on several futures."""
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before replace_future()")
        k = sim.replace_future(future, utilization)
        self._rebind_jobs()
        return k

    def resample_future(self, seed: int) -> int:
        """Replace the future by the one drawn for ``seed`` (:func:`aryl_gym.scenario.fresh_future`:
        the jobs of that seed's episode submitted after now, and its inference series); returns
        the number of new jobs. The same state and seed give the same future."""
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before resample_future()")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        jobs, util = fresh_future(sim, int(seed), self.data_root)
        self.replace_future(jobs, util)
        return len(jobs)

    def _rebind_jobs(self) -> None:
        """Rebuild what the env keeps per job after the trace's future changed."""
        sim = self.sim
        assert sim is not None
        self.episode = Episode(sim.config, list(sim.jobs), sim.loan.util, sim.seed)
        self._obs_builder.begin(sim)
        if self._obs_v1 is not None:
            self._obs_v1.begin(sim)
        if self._base_rates is not None:
            self._base_rates = base_rates(sim)
        self._index_jobs(sim)
        self._base_obs = None  # the observation counts the trace's jobs (done_fraction)
        self._rules_at = None  # the stall rule reads the jobs still to arrive
        if self._damping is not None:
            self._damping.grow(sim.n_jobs)
        if hasattr(self.codec, "begin_episode"):
            self.codec.begin_episode(self)
        self._tracker.rebind()

    def _index_jobs(self, sim: Simulator) -> None:
        """(Re)build the window index of the active jobs and record the simulator's job events
        from now on (the index follows them at each decision point)."""
        b = self._obs_builder
        self._windex = WindowIndex(sim, b.elastic, self._base_rates, b.inv_wmax, self.window_fit)
        sim.job_events = []

    @property
    def _q_out(self) -> list[int]:
        """The queued jobs outside this round's window, in the window's order."""
        return self._windex.queued_outside(self._n_q) if self._windex is not None else []

    def _ended(self) -> bool:
        sim = self.sim
        assert sim is not None
        return sim.done or sim.horizon_reached()

    def _advance_to_decision(self) -> None:
        """Run rounds until one needs a decision (a decision point) or the episode ends."""
        sim = self.sim
        assert sim is not None
        pol = self.policy
        gate = self.round_gate
        self.held = False
        while not self._ended():
            if gate is not None and gate(sim):
                self.held = True  # stopped before this round opens (round_gate)
                return
            if sim.open_round(pol):
                self._new_round()
                return
            sim.close_round(pol, None)
        self._new_round()

    def _new_round(self) -> None:
        sim = self.sim
        assert sim is not None
        wx = self._windex
        assert wx is not None
        ev = sim.job_events
        if ev:
            done = wx.update(sim, ev)
            ev.clear()
            if done:
                self._tracker.hint_done(done)
        self.fits = fit_lists(sim)  # (train, loaned): workers of g GPUs that fit, by g
        w, self._n_q, self._n_r = wx.window(self.k, self.fits)
        self._base_obs = None
        # the window's ids padded with -1 to K (info["window"]) and the window itself (a view)
        n = len(w)
        self._wpad = np.array(w + self._pad_list[n:] if n < self.k else w, dtype=np.int64)
        win = self.window = self._wpad[:n]
        # The window's dynamic state as lists (ids, state, workers, pool); the simulator does not
        # change until the next commit, so the codec and the observation share this snapshot.
        if w:
            self._wsnap = (w, sim.state[win].tolist(), sim.workers[win].tolist(), sim.pool[win].tolist())
        else:
            self._wsnap = (w, w, w, w)
        self.decision_point += 1
        self.substep = 0
        if self._damping is not None:
            self.damped = d = self._damping.active(sim.now, sim.overhead_gs, sim.alloc_gs)
            if d and any(j in d for j, st in zip(w, self._wsnap[1]) if st == _RUNNING_STATE):
                self._damping.refused += 1
        self.codec.begin_round(self)

    def _commit(self, decision: Decision):
        sim = self.sim
        assert sim is not None
        # The agent thinks outside the env: env results carry 0 decision times and 0 wall time
        # (deterministic info; measure speed with aryl_gym.bench_env).
        if self.backfill and sim.n_queued > self._n_q:
            decision = self._backfilled(decision)
        damp = self._damping
        if damp is not None:  # backfilled starts count as the agent's grants (docs/env.md)
            now = sim.now
            before = {int(j): int(sim.workers[j]) for j in decision.targets}
        report = sim.close_round(self.policy, decision, 0.0).report
        if damp is not None:  # the agent's changes of this round, as placed (reclaims are not the agent's)
            for j, w in before.items():
                if j in report.invalid:
                    continue
                t = report.unplaced[j][1] if j in report.unplaced else int(decision.targets[j])
                if t != w:
                    damp.change(j, 1 if t > w else -1, now)
        self._advance_to_decision()
        return report

    def _backfilled(self, decision: Decision) -> Decision:
        """``decision`` with queued jobs from outside the window started in what it leaves free
        (``backfill=True``): in the window's order, each at its requested size ``w_req`` when
        the placement engine can place it in full after the agent's targets and the jobs
        already added (one pool, the engine's pool order), and only while the whole decision
        still places every target in full. The agent's own targets are never cut."""
        sim = self.sim
        assert sim is not None
        opts = self.placement
        p = plan(sim, decision, opts)
        if not p.fully_placed:  # the agent's decision is short already: leave it as it is
            return decision
        st = p.after
        free = int(st.srv_free[st.usable_mask(TRAIN)].sum()) + int(st.srv_free[st.srv_loaned].sum())
        extra: dict[int, int] = {}
        pools: dict[int, int] = {}
        g_list = st.g_list
        for j in self._q_out:
            j = int(j)
            g = g_list[j]
            w = int(sim.jobs[j].w_req)
            if w * g > free:
                continue
            if not any(st.fits(pool, g) >= w for pool in st.allowed_pools(j)):
                continue
            if grow_job(st, j, w, opts, None, False, True, PlacementReport()):
                extra[j] = w
                pools[j] = int(st.pool[j])
                free -= w * g
                if free <= 0:
                    break
        while extra:
            # the engine places every growth of a decision by worker size first, so a larger
            # backfilled job could take room the agent's targets got above: verify, shed the last
            merged = Decision(targets={**decision.targets, **extra}, pools={**decision.pools, **pools},
                              order=list(decision.order or []) + list(extra), speedup=decision.speedup)
            if plan(sim, merged, opts).fully_placed:
                self.backfilled += len(extra)
                return merged
            last = next(reversed(extra))
            del extra[last], pools[last]
        return decision

    def step(self, action):
        reward, terminated, truncated, info = self._step_core(action)
        return self._obs(), reward, terminated, truncated, info

    def _step_core(self, action) -> tuple[float, bool, bool, dict[str, Any]]:
        """:meth:`step` without building the observation (a vector env writes it into its
        stacked arrays with :meth:`_write_obs`)."""
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if self._finished:
            raise RuntimeError("the episode has ended; call reset()")
        if self.held or self._pending is not None:
            raise RuntimeError("an action given to act() is not finished: resume() / finish() it first")
        return self._finish_step(*self._act(action))

    def _act(self, action) -> tuple[float, Decision | None, int, PlacementReport | None]:
        """Decode ``action``; when it commits, place it and run to the next decision point."""
        sim = self.sim
        assert sim is not None
        t0 = sim.now
        decision, invalid = self.codec.decode(self, action)
        report = None
        if decision is not None:
            report = self._commit(decision)
        else:
            self.substep += 1
        return t0, decision, invalid, report

    # -- stepping in parts (the two-agent view, aryl_gym.envs.multiagent) ------------------------
    def act(self, action) -> bool:
        """The first part of :meth:`step`: decode ``action`` and, when it commits, run the
        simulator to the next decision point, or stop before a round that :attr:`round_gate`
        holds. Returns :attr:`held`; then :meth:`resume` (after what the gate waited for), and
        :meth:`finish` once not held. ``act`` then ``finish`` is exactly :meth:`step` without
        the observation."""
        if self.sim is None:
            raise RuntimeError("call reset() before act()")
        if self._finished:
            raise RuntimeError("the episode has ended; call reset()")
        if self.held or self._pending is not None:
            raise RuntimeError("the previous action is not finished: resume() / finish() it first")
        self._pending = self._act(action)
        return self.held

    def resume(self) -> bool:
        """Go on from a round that :attr:`round_gate` held (it must now let that round open) to
        the next decision point or the next held round; returns :attr:`held`."""
        if not self.held:
            raise RuntimeError("resume(): the env is not held")
        self._advance_to_decision()
        return self.held

    @property
    def pending(self) -> bool:
        """An action was :meth:`act`-ed and not yet :meth:`finish`-ed."""
        return self._pending is not None

    def finish(self) -> tuple[float, bool, bool, dict[str, Any]]:
        """The rest of :meth:`step` for the action given to :meth:`act` (reward, episode end,
        info): what :meth:`step` returns but the observation (:meth:`observation`)."""
        if self._pending is None or self.held:
            raise RuntimeError("finish(): no action to finish, or the env is held (resume() first)")
        pending, self._pending = self._pending, None
        return self._finish_step(*pending)

    def observation(self) -> dict[str, np.ndarray]:
        """The observation at the current decision point (what :meth:`step` returns)."""
        return self._obs()

    def _finish_step(self, t0: float, decision: Decision | None, invalid: int,
                     report: PlacementReport | None) -> tuple[float, bool, bool, dict[str, Any]]:
        sim = self.sim
        assert sim is not None
        self.steps += 1
        self.invalid_total += invalid
        # an agent that repeats an invalid action never moves the clock: counted, and the
        # episode ends (truncated) after MAX_INVALID_STREAK of them in a row (docs/env.md)
        self.invalid_streak = self.invalid_streak + 1 if invalid and decision is None and sim.now == t0 else 0
        reward, comp = self._tracker.step(invalid, sim.n_queued)
        terminated = sim.done
        truncated = False
        rule = None
        if not terminated:
            if self.max_steps is not None and self.steps >= self.max_steps or sim.horizon_reached():
                truncated = True
            elif self.invalid_streak >= MAX_INVALID_STREAK:
                truncated = True
            elif sim.now == self._rules_at:
                pass  # a sub-step: both rules said no at this very time already (same state)
            elif sim.check_stall(self.stall_hours):
                rule = "stall"
            elif sim.check_thrash(self.stall_hours, self.thrash_sustained):
                rule = "thrash"
            else:
                self._rules_at = sim.now
        charge = None
        if rule is not None:
            if self.early_end == "charge":
                # the episode's account is closed: the fallback finishes the jobs, the jct
                # component pays for them now, and nothing is left to bootstrap
                charge = self._end_charge(rule)
                reward += self._tracker.charge(charge["job_seconds"], comp)
                terminated = True
            else:
                truncated = True
        info = self._info(comp, invalid, report)
        if self.invalid_streak >= MAX_INVALID_STREAK:
            info["invalid_streak"] = self.invalid_streak
        if charge is not None:
            info["end_charge"] = charge
        info["elapsed"] = sim.now - t0  # simulated seconds this step covered (0 for a sub-step)
        if terminated or truncated:
            self._finished = True
            res = self.episode_result()
            info["episode_result"] = res
            info["episode_metrics"] = res.to_dict()
            if self._damping is not None:
                info["damping"] = self.damping_stats
            if self.backfill:
                info["backfilled"] = self.backfilled
        return float(reward), bool(terminated), bool(truncated), info

    def _end_charge(self, rule: str) -> dict[str, Any]:
        """What the rest of the episode costs when ``end_fallback`` takes over now: a copy of
        the simulator is played to the end by that reference policy natively (every job still
        in the system and every job still to arrive), and the job time it accrues after now is
        returned (``job_seconds``) with the rule that ended the episode and the fallback's
        name. The env's own simulator is left as it is (the episode result stays the agent's)."""

        sim = self.sim
        assert sim is not None
        a0 = accrued_job_time(sim, sim.now)
        twin = copy.deepcopy(sim)
        pol = make_policy(self.end_fallback)
        pol.reset(twin.seed)
        # the env stands at a decision point (its round is open): the fallback takes that
        # decision at once (an event-driven policy would otherwise wait for the next event)
        twin.close_round(pol, pol.decide(twin.view))
        stalled = False
        while not twin.done and not twin.horizon_reached():
            twin.step(pol)
            if twin.check_stall(self.stall_hours):  # the thrash rule would see the agent's overheads
                stalled = True
                break
        return {"rule": rule, "fallback": self.end_fallback, "job_seconds": accrued_job_time(twin, twin.now) - a0,
                "fallback_finished": bool(twin.done), "fallback_stalled": stalled, "end_time": float(twin.now)}

    @property
    def damping_stats(self) -> dict[str, int] | None:
        """This episode's flap damping so far, None when off: ``flaps`` (reversals of a job's
        workers by the agent), ``suppressions`` (times a job became suppressed), ``engaged``
        (1 once the shield engaged) and ``refused`` (decision points at which the shield
        refused the releases of at least one running window job)."""
        d = self._damping
        if d is None:
            return None
        return {"flaps": d.flaps, "suppressions": d.suppressions, "engaged": int(d.engaged),
                "refused": d.refused}

    def episode_result(self):
        """The :class:`~aryl_gym.metrics.EpisodeResult` of the episode so far."""

        assert self.sim is not None
        return episode_result(self.sim, policy_name=f"env:{self.action_mode}", wall_s=0.0)

    # -- observation, mask, info --------------------------------------------------------------
    def action_masks(self) -> np.ndarray:
        """Boolean mask of allowed actions (flattened ``K x L`` in ``targets`` mode)."""
        if self.sim is None:
            raise RuntimeError("call reset() before action_masks()")
        return self.codec.mask(self).copy()

    def _obs(self) -> dict[str, np.ndarray]:
        # keys in the order they always had (jobs, cluster, outside, action_mask, then v1's)
        shapes = self._obs_shapes
        if shapes is None:
            spaces_ = self.observation_space.spaces  # type: ignore[attr-defined]
            shapes = self._obs_shapes = [(k, spaces_[k].shape) for k in self._obs_keys]
        empty, f32 = np.empty, np.float32
        out = {k: empty(shape, dtype=f32) for k, shape in shapes}
        self._write_obs(out)
        return out

    def _write_obs(self, out: Mapping[str, np.ndarray]) -> None:
        """Write the observation into ``out`` (writable float32 arrays of the spaces' shapes,
        e.g. rows of a vector env's stacked buffers)."""
        sim = self.sim
        assert sim is not None
        base = self._base_obs
        if base is None:  # once per decision point: the simulator does not move until a commit
            wx = self._windex
            assert wx is not None
            o = wx.outside(self._wsnap[0], self._n_q, self._n_r)
            base = self._base_obs = self._obs_builder.build_indexed(sim, self._wsnap, o, self.fits)
        jobs, cluster = out["jobs"], out["cluster"]
        jobs[...] = base[0]
        cluster[...] = base[1]
        out["outside"][...] = base[2]
        target = self.codec.target_feature(self)
        n = len(self.window)
        if target is not None and n:  # tentative targets (sequential): the "target" column
            jobs[:n, 15] = np.minimum(target[:n] / float(self.max_workers), 1.0)
        free = self.codec.tentative_free(self)
        if free is not None:
            cluster[14] = min(free / self._obs_builder.total_gpus, 1.0)
        out["action_mask"][...] = self.codec.mask(self)
        if self._obs_v1 is not None:
            self._obs_v1.write(self, out)

    def _window_padded(self) -> np.ndarray:
        """The window's job ids, padded with -1 to K (fixed shape for vector envs)."""
        w = self.window
        if w.base is self._wpad:  # this round's window: its padded form is ready
            return self._wpad.copy()
        out = np.full(self.k, -1, dtype=np.int64)
        out[: len(w)] = w
        return out

    def _info(self, comp: dict[str, float], invalid: int, report) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        info: dict[str, Any] = {
            "time": sim.now,
            "decision_point": self.decision_point,
            "substep": self.substep,
            "invalid": invalid,
            "invalid_total": self.invalid_total,
            "queued": sim.n_queued,
            "running": sim.n_running,
            "done": sim.done_count,
            "reward_components": comp,
            "window": self._window_padded(),
        }
        if report is not None:
            info["unplaced"] = len(report.unplaced)
        return info

    # -- rendering ----------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            return None
        if self.sim is None:
            # was: None, without a word, for a render mode that promises a text or an image
            # (gym.make's order check raises; the raw env and the two-agent view did not)
            raise RuntimeError("call reset() before render()")

        if self.render_mode == "ansi":
            return render_ansi(self.sim, self.window)
        return render_rgb(self.sim)

    def close(self) -> None:
        return None
