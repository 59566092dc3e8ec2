"""``aryl+tuned``: Aryl with the batch-size tuning Pollux has (Aryl paper 7.4 "Aryl+TunedJobs").

The paper: "Aryl+TunedJobs allows for a fair comparison of job scheduling against Pollux as both
have hyperparameter tuning now". **Reading** [ours; issue 32]: "TunedJobs" is the *runtime*
batch-size tuning that Pollux's jobs get (Pollux's co-adaptation, AdaptDL's ``GoodputFunction.
optimize``), applied to **every** job, inelastic ones included: Pollux tunes every job it runs, so
a comparison "as both have hyperparameter tuning" gives the same tuning to every job Aryl runs.
(Pollux's paper also uses "TunedJobs" for jobs *submitted* with pre-tuned configurations; that
reading would change the workload, not the scheduler, and is not what 7.4 compares.) Before
World v2 only the 3% elastic jobs were tuned and ``aryl+tuned`` equalled ``aryl-noloan``.

How: exactly Pollux's machinery (:mod:`aryl_gym.agents.pollux_fit`). Each running job reports
itself (:meth:`~aryl_gym.sim.view.ClusterView.measure`); its throughput model is fitted from those
reports and its efficiency uses the gradient noise scale it reported last. At the worker count
each job will have after Aryl's decision, the job trains at the local batch the model says is
best (``Decision.batch``, within the job's limits); the simulator runs the true goodput of that
batch. Aryl's knapsack values ``T(w_min) - T(w_min + k)`` use the tuned rates as the model
predicts them (the rate at the reference batch times the modelled gain of the tuned batch over
the reference batch at that count). Aryl keeps its own ranges (``elasticity="limited"``): tuning
changes how a job trains, not how many workers it may have. Section 7.4's results are "obtained
without capacity loaning in Basic scenario", so ``aryl+tuned`` does not loan (as ``pollux``);
``aryl+tuned-loan`` does.

``aryl+pretuned`` is the **other reading** of "TunedJobs" (Pollux's paper's "+TunedJobs": jobs
*submitted* with a tuned configuration): the workload changes, not the scheduler. Each job's
local batch is fixed when it is submitted, to the factor that finishes it soonest at its
requested workers over its whole training (:func:`aryl_gym.sim.goodput.pretuned_factor`, on the job's true goodput
curve: the tuning a user does offline on the application's measured profile), and kept for the
job's life, also when Aryl scales it (the paper's elastic jobs scale "without updating the local
batch size"). Aryl schedules as ``aryl-noloan`` does: its knapsack values use the reference rates
(only the elastic jobs' extra workers are valued, and the paper's Aryl predicts from the job's
profile, not from a tuner's model).
"""

from __future__ import annotations

import math

import numpy as np
from aryl_gym.agents.aryl import ArylPolicy
from aryl_gym.agents.base import BasePolicy, register
from aryl_gym.agents.pollux import PGNS_BUCKET
from aryl_gym.agents.pollux_fit import JobModel, Limits, observe_running, tuned_rows
from aryl_gym.agents.pollux_model import scaling_of

from aryl_gym.sim.goodput import job_curve_of, pretuned_factor
from aryl_gym.sim.view import ClusterView, Decision


class ArylTunedPolicy(ArylPolicy):
    """Aryl whose jobs all run with tuned batch sizes (module docstring)."""

    def __init__(self, name: str = "aryl+tuned", loaning: bool = False, data_root: str | None = None):
        super().__init__(name, loaning=loaning)
        self.data_root = data_root
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._models: dict[int, JobModel] = {}
        self._limits: dict[int, Limits] = {}
        # job -> (model version, PGNS bucket, multiplier m[0..w_max], batch factor [0..w_max])
        self._tuned: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}
        self._lam_sent: dict[int, float] = {}

    def tuning(self, view: ClusterView, j: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(m, lam)`` over ``w = 0..w_max`` for job ``j``: the modelled goodput gain of the best
        batch over the reference batch (>= 1) and that batch factor; None without a model."""
        mod = self._models.get(j)
        if mod is None or mod.params is None:
            return None
        bucket = int(round(math.log(max(mod.pgns, 1e-12)) / PGNS_BUCKET))
        hit = self._tuned.get(j)
        if hit is not None and hit[0] == mod.version and hit[1] == bucket:
            return hit[2], hit[3]
        lim = self._limits.get(j)
        if lim is None:
            lim = self._limits[j] = Limits(view.jobs[j])
        W = int(view.jobs[j].w_max)
        args = (mod.params[None, :], [lim], np.array([mod.pgns]), W)
        gp_t, lam_t = tuned_rows(*args, tune=True)
        gp_r, _ = tuned_rows(*args, tune=False)
        better = gp_t[0] > gp_r[0]
        m = np.where(better, gp_t[0] / np.maximum(gp_r[0], 1e-300), 1.0)
        m[0] = 1.0
        lam = np.where(better, lam_t[0], 1.0)
        self._tuned[j] = (mod.version, bucket, m, lam)
        # the knapsack items of this job follow the model (ArylPolicy caches them by job, pool)
        cache = getattr(self, "_item_cache", None)  # built at the episode's first decision
        if cache:
            cache.pop((j, 0), None)
            cache.pop((j, 1), None)
        return m, lam

    def _items(self, view: ClusterView, j: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Knapsack items with the tuned rates ``w x speed x scaling[w] x m[w]`` as the model
        predicts them (see ``ArylPolicy._items``)."""
        t = self.tuning(view, j)
        if t is None:
            return super()._items(view, j, p)
        key = (j, p)
        hit = self._item_cache.get(key)
        if hit is None:
            spec = view.jobs[j]
            m = t[0]
            w = np.arange(spec.w_min, spec.w_max + 1)
            sc = scaling_of(spec)  # the job's own scaling curve (ones if linear)
            rate = w * view.speed(j, p) * sc[w] * m[w]
            inv = 1.0 / rate
            hit = (np.arange(1, spec.w_max - spec.w_min + 1, dtype=np.int64) * spec.g, inv[0] - inv[1:])
            self._item_cache[key] = hit
        return hit

    def decide(self, view: ClusterView) -> Decision:
        observe_running(view, self._models)  # every running job reports; its model follows
        for j in view.active():
            self.tuning(view, j)  # refresh models' tables (and drop stale knapsack items)
        d = super().decide(view)
        batch: dict[int, float] = {}
        for j in sorted(set(view.running()) | set(d.targets)):
            w = int(d.targets.get(j, int(view.workers[j])))
            if w <= 0:
                continue
            t = self.tuning(view, j)
            lam = 1.0 if t is None or w >= t[1].size else float(t[1][w])
            if lam != self._lam_sent.get(j, 1.0):
                batch[j] = lam
                self._lam_sent[j] = lam
        if batch:
            d.batch = {**(d.batch or {}), **batch}
        return d


class ArylPretunedPolicy(ArylPolicy):
    """Aryl on jobs submitted pre-tuned (the other reading of "TunedJobs"; module docstring)."""

    def __init__(self, name: str = "aryl+pretuned", loaning: bool = False):
        super().__init__(name, loaning=loaning)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._lam: dict[int, float] = {}  # job -> its fixed factor (set once, at submission)
        self._by_shape: dict[tuple, float] = {}

    def _factor(self, view: ClusterView, j: int) -> float:
        s = view.jobs[j]
        key = (s.family, s.app, s.g, s.w_req, s.w_max, s.batch_size)
        lam = self._by_shape.get(key)
        if lam is None:
            curve = job_curve_of(s.family, s.app, s.g, s.w_req, s.w_max, s.batch_size)
            lam = self._by_shape[key] = pretuned_factor(curve, int(s.w_req))
        return lam

    def decide(self, view: ClusterView) -> Decision:
        d = super().decide(view)
        batch: dict[int, float] = {}
        for j in view.active():  # every submitted job, once: its configuration as submitted
            j = int(j)
            if j not in self._lam:
                lam = self._lam[j] = self._factor(view, j)
                if lam != 1.0:
                    batch[j] = lam
        if batch:
            d.batch = {**(d.batch or {}), **batch}
        return d


@register("aryl+tuned")
def _aryl_tuned() -> BasePolicy:
    return ArylTunedPolicy()


@register("aryl+tuned-loan")
def _aryl_tuned_loan() -> BasePolicy:
    return ArylTunedPolicy("aryl+tuned-loan", loaning=True)


@register("aryl+pretuned")
def _aryl_pretuned() -> BasePolicy:
    return ArylPretunedPolicy()
