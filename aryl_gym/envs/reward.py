"""Reward components (SPEC 6), named and weighted by config (HighwayEnv style).

Every env step covers the simulated time from one decision point ``t0`` to the next ``t1``
(``t1 == t0`` for a ``sequential`` sub-step that does not commit). Components, each reported
unweighted in ``info["reward_components"]``:

``jct`` (default weight 1)
    ``-(A(t1) - A(t0)) / scale`` where ``A(t)`` is the job time accrued by ``t``: the sum over
    submitted jobs of ``min(finish, t) - submit``. It equals the integral of *jobs in system*
    (submitted, not finished) over ``[t0, t1]`` with exact submit and finish times, so an
    episode that finishes every job sums to exactly ``-(total JCT) / scale``.
``queue``
    ``-(queued jobs after the decision) x (t1 - t0) / scale`` (counts held constant over the
    step: an approximation of the queue-length integral).
``preemption``
    ``-(preemptions during the step)`` (reclaims and decisions).
``usage``
    ``+(GPU-seconds used by training during the step) / (all GPUs x scale)``: busy fraction of
    the cluster times elapsed hours when ``scale`` is 3600.
``slowdown``
    ``-sum over jobs finished in the step of (JCT / lower bound - 1)``.
``invalid``
    ``-(invalid action parts in the step)``; weight 0 unless ``invalid_penalty`` is set.
``loan_usage``
    ``+(GPU-seconds used by training on loaned inference servers during the step) / (all GPUs x
    scale)``: the loaned part of ``usage`` (weight 0 by default; an objective of the
    multi-objective view, :mod:`aryl_gym.envs.mo`).

``scale`` defaults to 3600 s, so ``jct`` is in job-hours.

Each component is a function of a :class:`RewardStep`, registered with :func:`reward_component`
(the built-ins below are registered the same way; docs/extending.md shows a new one).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aryl_gym.metrics import lower_bounds
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobState


@dataclass(slots=True)
class RewardStep:
    """What one env step changed, shared by every component (times in seconds).

    ``accrued``: growth of the accrued job time ``A(t1) - A(t0)``; ``dt``: ``t1 - t0``;
    ``queued_after``: queued jobs after the decision; ``preemptions``: preemptions during the step;
    ``busy_gpu_s``: GPU-seconds used by training during the step (``loan_gpu_s``: the part on
    loaned inference servers); ``total_gpus``: all GPUs;
    ``finished_jct`` / ``finished_bound``: JCTs and lower bounds of the jobs that finished in the
    step; ``invalid``: invalid action parts; ``scale``: the reward scale; ``sim``: the simulator
    after the step (read only).
    """

    accrued: float
    dt: float
    queued_after: int
    preemptions: int
    busy_gpu_s: float
    total_gpus: float
    finished_jct: np.ndarray
    finished_bound: np.ndarray
    invalid: int
    scale: float
    sim: Simulator
    loan_gpu_s: float = 0.0


def accrued(submit: np.ndarray, finish: np.ndarray, t: float) -> float:
    """``A(t)``: job-seconds accrued by time ``t`` (unfinished jobs count until ``t``, jobs not
    yet submitted nothing)."""
    end = np.where(np.isnan(finish), t, np.minimum(finish, t))
    return float(np.clip(end - submit, 0.0, None).sum())


_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False

#: A reward component: the unweighted value of one step.
RewardComponent = Callable[[RewardStep], float]
_REGISTRY: dict[str, RewardComponent] = {}


def reward_component(name: str) -> Callable[[RewardComponent], RewardComponent]:
    """Register a reward component under ``name`` (the one way to add one)::

        @reward_component("idle_gpus")
        def _idle(step: RewardStep) -> float:
            ...

    It is then available as ``reward="idle_gpus"``, ``"jct+idle_gpus"`` or
    ``{"jct": 1, "idle_gpus": 0.1}`` and reported in ``info["reward_components"]``. Register it
    before the env is built (import the module that defines it).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"reward component name must be an identifier, got {name!r}")

    def deco(fn: RewardComponent) -> RewardComponent:
        if name in _REGISTRY:
            raise ValueError(f"reward component {name!r} registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


def component_names() -> tuple[str, ...]:
    """The registered components, built-ins first, in registration order."""
    return tuple(_REGISTRY)


@reward_component("jct")
def _jct(s: RewardStep) -> float:
    return -s.accrued / s.scale


@reward_component("queue")
def _queue(s: RewardStep) -> float:
    return -s.queued_after * s.dt / s.scale


@reward_component("preemption")
def _preemption(s: RewardStep) -> float:
    return -float(s.preemptions)


@reward_component("usage")
def _usage(s: RewardStep) -> float:
    return s.busy_gpu_s / (s.total_gpus * s.scale)


@reward_component("slowdown")
def _slowdown(s: RewardStep) -> float:
    if not len(s.finished_jct):
        return 0.0
    return -float((s.finished_jct / s.finished_bound - 1.0).sum())


@reward_component("invalid")
def _invalid(s: RewardStep) -> float:
    return -float(s.invalid)


@reward_component("loan_usage")
def _loan_usage(s: RewardStep) -> float:
    return s.loan_gpu_s / (s.total_gpus * s.scale)


#: The built-in components (:func:`component_names` also lists registered extras).
COMPONENTS: tuple[str, ...] = component_names()


def parse_weights(reward: str | dict[str, float] | None, invalid_penalty: float) -> dict[str, float]:
    """``"jct"`` or ``{"jct": 1, "preemption": 0.1}`` -> a weight per component (0 for the rest)."""
    if (
        isinstance(invalid_penalty, bool)
        or not isinstance(invalid_penalty, (int, float, np.integer, np.floating))
        or not math.isfinite(float(invalid_penalty))
        or invalid_penalty < 0
    ):
        raise ValueError(
            "invalid_penalty must be a finite number >= 0 (the reward loses it per invalid "
            f"action), got {invalid_penalty!r}"
        )
    if reward is None:
        reward = "jct"
    if isinstance(reward, str):
        names = [r.strip() for r in reward.split("+")]
        if not all(names):  # was: "" and "jct+" accepted ("" a reward of 0 at every step)
            raise ValueError(f"reward {reward!r}: give component names joined by '+', e.g. 'jct' or "
                             "'jct+preemption'")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # was: "jct+jct" read as weight 1
            raise ValueError(f"reward {reward!r}: {twice[0]!r} is named twice; for a weight other than 1 "
                             f"give a dict, e.g. reward={{'{twice[0]}': 2.0}}")
        w = {n: 1.0 for n in names}
    elif isinstance(reward, dict):
        w = {}
        for k, v in reward.items():
            try:
                x = float(v)
            except (TypeError, ValueError):
                x = math.nan
            if isinstance(v, (bool, np.bool_, str, bytes)) or not math.isfinite(x):  # was: np.True_ read as 1
                raise ValueError(
                    f"reward weight {k!r} must be a finite number, got {v!r} "
                    "(e.g. reward={'jct': 1.0, 'preemption': 0.1})"
                )
            w[str(k)] = x
    else:
        raise ValueError(f"reward must be a component name or a dict of weights, got {reward!r}")
    known = component_names()
    for k in w:
        if k not in known:
            raise ValueError(f"unknown reward component {k!r}; known: {', '.join(known)}")
    out = {c: float(w.get(c, 0.0)) for c in known}
    if invalid_penalty and out["invalid"] and out["invalid"] != float(invalid_penalty):
        # was: invalid_penalty replaced the reward's own 'invalid' weight without a word
        raise ValueError(
            f"reward {reward!r} weights 'invalid' ({out['invalid']:g}) and invalid_penalty is "
            f"{invalid_penalty!r}: both set the weight of the 'invalid' component; give it once"
        )
    if invalid_penalty:
        out["invalid"] = float(invalid_penalty)
    if not any(out.values()):  # was: accepted, a reward of 0 at every step
        raise ValueError(f"reward {reward!r}: every weight is 0, so the reward would be 0 at every step; "
                         "give at least one non-zero weight (e.g. reward='jct')")
    return out


class RewardTracker:
    """Keeps the running integrals the components need; one per episode."""

    def __init__(self, sim: Simulator, weights: dict[str, float], scale: float = 3600.0):
        if not scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {scale}")
        self.sim = sim
        self.w = weights
        self.scale = float(scale)
        self._prefix_submit = np.concatenate([[0.0], np.cumsum(sim.submit)]).tolist()
        self._submit = sim.submit.tolist()  # sorted (the trace is sorted by submit time)

        self._lb = lower_bounds(sim, limited=True)  # the paper regime: the reward as before v2 metrics
        self._finish_sum = 0.0  # sum of finish times of done jobs (s)
        self._done_seen = 0
        self._done_mask = np.zeros(sim.n_jobs, dtype=bool)
        self._hint: list[int] = []
        # the step's (reward, components) by (invalid, queued) while the simulator stands still
        self._still: dict[tuple[int, int], tuple[float, dict[str, float]]] = {}
        self.t = sim.now
        self.a = self._accrued(sim.now)
        self.preempt = int(sim.preempt_count.sum())
        self._total_gpus = float(sim.config.cluster.train_gpus + sim.config.cluster.inf_gpus)
        self.busy_gs = sim.acc.train_busy_gs + sim.acc.loan_used_gs
        self.loan_gs = sim.acc.loan_used_gs
        self.total = 0.0
        # the non-zero weights, in the order of ``weights`` (the sum's order)
        self._weighted = [(k, wk) for k, wk in weights.items() if wk]
        # every component is computed and reported (unweighted) in info["reward_components"]
        self._components = [(k, _REGISTRY[k]) for k in weights]

    def rebind(self) -> None:
        """The simulator's future was replaced (:meth:`Simulator.replace_future`): rebuild the
        per-job tables. Jobs still to arrive add nothing to the integrals so far, so the
        running figures carry on."""
        self._still.clear()
        sim = self.sim
        self._prefix_submit = np.concatenate([[0.0], np.cumsum(sim.submit)]).tolist()
        self._submit = sim.submit.tolist()

        self._lb = lower_bounds(sim, limited=True)  # the paper regime: the reward as before v2 metrics
        done = np.zeros(sim.n_jobs, dtype=bool)
        keep = min(len(self._done_mask), sim.n_jobs)
        done[:keep] = self._done_mask[:keep]
        self._done_mask = done

    _NONE = np.zeros(0, dtype=np.int64)

    def hint_done(self, ids: list[int]) -> None:
        """Jobs that may have finished since the last step (the env reads them from the
        simulator's job events): the next step looks at these instead of every job."""
        self._hint.extend(ids)

    def _sync_done(self) -> np.ndarray:
        sim = self.sim
        if sim.done_count == self._done_seen:
            self._hint.clear()
            return self._NONE
        hint, mask = self._hint, self._done_mask
        new = np.array(sorted({j for j in hint if not mask[j]}), dtype=np.int64)
        hint.clear()
        if len(new) != sim.done_count - self._done_seen:  # no (complete) hint: look at every job
            new = np.flatnonzero((sim.state == JobState.DONE) & ~self._done_mask)
        self._done_mask[new] = True
        self._finish_sum += float(sim.finish[new].sum())
        self._done_seen = sim.done_count
        return new

    def _accrued(self, t: float) -> float:
        """A(t) = sum over jobs submitted by t of min(finish, t) - submit (seconds)."""
        m = bisect_right(self._submit, t)  # == np.searchsorted(submit, t, side="right")
        d = self._done_seen
        return (m - d) * t - self._prefix_submit[m] + self._finish_sum

    def step(self, invalid: int, queued_after: int) -> tuple[float, dict[str, float]]:
        """Components for the time from the last call to ``sim.now``; returns (reward, parts)."""
        sim = self.sim
        new_done = self._sync_done()
        t1 = sim.now
        pc = sim.preemptions_total  # == preempt_count.sum()
        acc = sim.acc
        busy = acc.train_busy_gs + acc.loan_used_gs
        still = t1 == self.t and not len(new_done) and pc == self.preempt and busy == self.busy_gs
        if still:  # a sub-step: nothing moved since the last step, so neither do the components
            hit = self._still.get((invalid, queued_after))
            if hit is not None:
                r, comp = hit
                self.total += r
                return r, dict(comp)
        else:
            self._still.clear()
        a1 = self._accrued(t1)
        dt = t1 - self.t
        step = RewardStep(
            accrued=a1 - self.a,
            dt=dt,
            queued_after=queued_after,
            preemptions=pc - self.preempt,
            busy_gpu_s=busy - self.busy_gs,
            total_gpus=self._total_gpus,
            finished_jct=sim.finish[new_done] - sim.submit[new_done] if len(new_done) else _EMPTY,
            finished_bound=self._lb[new_done] if len(new_done) else _EMPTY,
            invalid=invalid,
            scale=self.scale,
            sim=sim,
            loan_gpu_s=acc.loan_used_gs - self.loan_gs,
        )
        comp = {name: fn(step) for name, fn in self._components}
        self.t, self.a, self.preempt, self.busy_gs = t1, a1, pc, busy
        self.loan_gs = acc.loan_used_gs
        r = 0.0
        for k, wk in self._weighted:
            r += wk * comp[k]
        self.total += r
        if still:
            self._still[(invalid, queued_after)] = (r, dict(comp))
        return r, comp

    def charge(self, job_seconds: float, comp: dict[str, float]) -> float:
        """Add the job time of the rest of an episode (``job_seconds``, accrued after the last
        step by a fallback that finishes it) to the last step's ``jct`` component in ``comp``;
        returns the weighted change of that step's reward. The return then sums to ``-(total
        JCT of the completed schedule) / scale`` under the ``jct`` reward."""
        d = -float(job_seconds) / self.scale
        comp["jct"] = comp.get("jct", 0.0) + d
        r = self.w.get("jct", 0.0) * d
        self.total += r
        return r
