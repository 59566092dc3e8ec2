"""Flap damping of releases (``ArylEnv(flap_damping=...)``): an action shield against cycles.

A deterministic policy without memory can cycle: at one decision point it preempts (or scales
in) a set of running jobs, at the next it starts them again, round after round; the jobs pay
their relaunch overheads and never finish (experiments/05-failing-episodes/README.md; the simulator's
thrash rule ends such episodes). Flap damping, as routers damp flapping routes (RFC 2439), keeps
a penalty per job:

* every *reversal* adds ``1`` to the job's penalty: a committed round that changes a job's
  workers in the direction opposite to the agent's previous change of that job (a release --
  scale-in or preemption -- after a grant -- start or scale-out --, or a grant after a
  release). Only the agent's own changes count, as placed (a reclaim of loaned servers is not
  the agent's; a start by the env's ``backfill`` is, made on its behalf); a job scaled in over
  several rounds, or started once and preempted once, is not flapping;
* the penalty decays exponentially with simulated time, halving every ``half_life_s``;
* once the penalty exceeds ``suppress``, the job is *suppressed* until the decayed penalty falls
  below ``reuse``; the penalty is capped so that no suppression outlasts ``max_suppress_s``;
* while the shield is *engaged*, the masks refuse every release of a suppressed job's workers
  (grants are still allowed). The shield engages, for the rest of the episode, once the share of
  the allocated GPU time spent in relaunch and scaling overheads over the last
  ``engage_window_s`` of simulated time exceeds ``engage_share``: the thrash rule's own signal
  (:data:`aryl_gym.sim.engine.THRASH_SHARE` over half of its span, ``stall_hours / 2``), so
  it usually engages before the rule would end the episode, and only where overheads have
  taken over a stretch of it. ``engage_share: 0`` engages it from the start; ``engage_share``
  is in ``[0, 1)``: overheads are part of the allocated GPU time, so no share exceeds 1 and a
  shield set to engage above it would never act.

The damping defaults are the common router defaults of route flap damping (penalty 1,000 per
flap, suppress limit 2,000, reuse limit 750, half-life 15 minutes, maximum suppression 60
minutes), in units of one flap: a job preempted, restarted and preempted again within a few
minutes is suppressed for about half an hour. The engagement defaults are the thrash rule's.
None is tuned to a policy here. Measured with ``ppo-v1-kickstart`` (experiments/07-flap-damping/README.md):
its healthy episodes reverse jobs hundreds of times and spend at most 6-17% of any hour's GPU
time in overheads, its cycling ones 91-100%; damping engaged from the start suppresses jobs in
every episode and costs about 1% of avg JCT, while engaged by the thrash signal it acted in 10
of 500 fresh episodes (the 4 that failed without it among them) and left the other 490
bit-identical.

The option is off by default: the world is the same for every policy, and the shield only
removes actions of the agent that acts through the env (never adds information), so it is a
property of how an agent is deployed (a learned agent's ``deploy_env_kwargs``,
docs/training.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aryl_gym.sim.engine import STALL_HOURS, THRASH_SHARE
from aryl_gym.sim.overhead import OverheadWindow

__all__ = ["FlapDamping", "DampingParams", "engaged_seeds", "parse_flap_damping"]


@dataclass(frozen=True)
class DampingParams:
    """Flap damping settings, in flaps (one reversal of a job's workers = 1)."""

    half_life_s: float = 900.0
    suppress: float = 2.0
    reuse: float = 0.75
    max_suppress_s: float = 3600.0
    engage_share: float = THRASH_SHARE  # 0: engaged from the start
    engage_window_s: float | None = None  # None: half the thrash rule's span (stall_hours / 2)

    @property
    def ceiling(self) -> float:
        """The highest penalty kept: it decays to ``reuse`` in ``max_suppress_s`` (``inf`` when
        that is beyond floating point: no penalty a job can reach is capped then)."""
        try:
            return self.reuse * 2.0 ** (self.max_suppress_s / self.half_life_s)
        except OverflowError:  # was: raised mid-episode, at the first flap (e.g. max_suppress_s=1e6)
            return math.inf


def parse_flap_damping(value: Any) -> DampingParams | None:
    """``flap_damping`` as given to the env: ``None``/``False`` (off), ``True`` (the defaults)
    or a mapping of :class:`DampingParams` fields. Anything else is a ValueError naming the fix."""
    if value is None or value is False:
        return None
    if value is True:
        return DampingParams()
    if not isinstance(value, Mapping):
        raise ValueError(
            f"flap_damping must be true, false or a mapping of {', '.join(f.name for f in fields(DampingParams))}, "
            f"got {value!r}"
        )
    names = {f.name for f in fields(DampingParams)}
    unknown = sorted(str(k) for k in value if k not in names)
    if unknown:
        raise ValueError(f"flap_damping: unknown key {unknown[0]!r}; allowed keys: {', '.join(sorted(names))}")
    out: dict[str, float] = {}
    for k, v in value.items():
        if k == "engage_window_s" and v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(float(v)):
            raise ValueError(f"flap_damping.{k} must be a finite number, got {v!r}")
        if k == "engage_share":
            # the shield engages once the overhead share *exceeds* engage_share (the thrash rule's
            # comparison), and overheads are part of the allocated GPU time: a share is at most 1,
            # so 1 never engaged (was: accepted, the shield configured but never acting)
            if not 0.0 <= float(v) < 1.0:
                raise ValueError(
                    f"flap_damping.engage_share must be in [0, 1) (0: engaged from the start; the shield "
                    f"engages once the overhead share exceeds it, and no share exceeds 1), got {v!r}")
        elif float(v) <= 0:
            raise ValueError(f"flap_damping.{k} must be a finite number > 0, got {v!r}")
        out[str(k)] = float(v)
    p = DampingParams(**out)
    if not p.reuse < p.suppress:
        raise ValueError(
            f"flap_damping: reuse ({p.reuse}) must be below suppress ({p.suppress}), "
            "or a suppressed job would never be released from suppression"
        )
    if not p.ceiling > p.suppress:
        # was: accepted, and the cap kept every penalty at or below suppress: no job was ever
        # suppressed, the shield did nothing without a word
        raise ValueError(
            f"flap_damping: max_suppress_s ({p.max_suppress_s:g}) is too short for half_life_s "
            f"({p.half_life_s:g}): the penalty cap reuse * 2 ** (max_suppress_s / half_life_s) = "
            f"{p.ceiling:.3g} must exceed suppress ({p.suppress:g}), or no job is ever suppressed "
            "(raise max_suppress_s or lower half_life_s)"
        )
    return p


class FlapDamping:
    """Per-job flap penalties and the shield's engagement for one episode (module docstring).
    ``stall_hours`` is the env's thrash-rule span (the default engagement window is half of it)."""

    def __init__(self, params: DampingParams, n_jobs: int, stall_hours: float = STALL_HOURS):
        self.params = params
        span_h = stall_hours if stall_hours < math.inf else STALL_HOURS
        self.window_s = params.engage_window_s if params.engage_window_s is not None else span_h * 3600.0 / 2.0
        self.engaged = params.engage_share <= 0.0
        self.engaged_at: float | None = 0.0 if self.engaged else None
        self._window = OverheadWindow(self.window_s)  # marks at every decision point
        self.penalty = np.zeros(n_jobs, dtype=np.float64)
        self.stamp = np.zeros(n_jobs, dtype=np.float64)  # simulated time of the last update
        self.last_dir = np.zeros(n_jobs, dtype=np.int8)  # +1 grant, -1 release, 0 never changed
        self.suppressed: set[int] = set()
        self.flaps = 0  # reversals counted
        self.refused = 0  # decision points at which a running window job's releases were refused (the env counts)
        self.suppressions = 0  # times a job became suppressed
        self._decay = math.log(2.0) / params.half_life_s

    def grow(self, n_jobs: int) -> None:
        """The trace now has ``n_jobs`` jobs (a replaced future): new jobs start unpenalised;
        the first jobs keep their state."""
        keep = min(n_jobs, len(self.penalty))
        for name in ("penalty", "stamp", "last_dir"):
            old = getattr(self, name)
            new = np.zeros(n_jobs, dtype=old.dtype)
            new[:keep] = old[:keep]
            setattr(self, name, new)

    def value(self, j: int, now: float) -> float:
        """Job ``j``'s penalty decayed to ``now``."""
        return float(self.penalty[j]) * math.exp(-self._decay * (now - float(self.stamp[j])))

    def change(self, j: int, direction: int, now: float) -> None:
        """A committed round of the agent changed job ``j``'s workers at ``now``: ``+1`` more
        (a start or scale-out), ``-1`` fewer (a scale-in or preemption). A reversal flaps."""
        last = int(self.last_dir[j])
        self.last_dir[j] = direction
        if last == -direction:
            self.flap(j, now)

    def flap(self, j: int, now: float) -> None:
        """Job ``j`` flapped at ``now``: its penalty grows by one."""
        p = self.params
        v = min(self.value(j, now) + 1.0, p.ceiling)
        self.penalty[j] = v
        self.stamp[j] = now
        self.flaps += 1
        if v > p.suppress and j not in self.suppressed:
            self.suppressed.add(j)
            self.suppressions += 1

    def observe(self, now: float, overhead_gs: float, alloc_gs: float) -> None:
        """The simulator's overhead and allocated GPU-seconds so far, at a decision point:
        engages the shield once the share over the last window exceeds ``engage_share``."""
        if self.engaged:
            return
        d = self._window.push(now, overhead_gs, alloc_gs)
        if d is not None:
            overhead, alloc = d
            if alloc > 0.0 and overhead > self.params.engage_share * alloc:
                self.engaged = True
                self.engaged_at = now
                self._window.clear()

    def refresh(self, now: float) -> set[int]:
        """Lift the suppressions whose penalty has decayed below ``reuse``; the suppressed set."""
        if self.suppressed:
            reuse = self.params.reuse
            for j in [j for j in self.suppressed if self.value(j, now) < reuse]:
                self.suppressed.discard(j)
        return self.suppressed

    def active(self, now: float, overhead_gs: float, alloc_gs: float) -> set[int] | frozenset[int]:
        """The jobs whose releases the masks refuse at this decision point (empty while the
        shield is not engaged)."""
        self.observe(now, overhead_gs, alloc_gs)
        sup = self.refresh(now)
        return sup if self.engaged else frozenset()


def engaged_seeds(envs: Sequence[Any], seeds: Sequence[int]) -> list[int] | None:
    """The ``seeds`` whose episode (played on the matching one of ``envs``) engaged the shield;
    None when no env has flap damping on."""
    stats = [getattr(e.unwrapped, "damping_stats", None) for e in envs]
    if all(d is None for d in stats):
        return None
    return [int(s) for s, d in zip(seeds, stats) if d and d["engaged"]]
