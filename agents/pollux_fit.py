"""The goodput model Pollux fits from what its jobs report (Pollux, OSDI '21, section 3.2-3.3;
upstream artifact ``simulator/goodput.py`` and ``simulator/simulator.py``, petuum/adaptdl
``osdi21-artifact``), while the simulator runs the true curve (:mod:`aryl_gym.sim.goodput`).

What a job reports (:meth:`aryl_gym.sim.view.ClusterView.measure`, as AdaptDL's training loop
does): the replicas and atomic local batch it runs with, the time of an atomic step and the
part of it that is all-reduce, and its gradient noise scale (PGNS) now. From these:

* **throughput model** (upstream ``PerfParams``): compute ``t_c = alpha_c + beta_c u`` for
  atomic batch ``u``; all-reduce ``t_n = alpha_n + beta_n (n - 2)`` across nodes, ``alpha_r +
  beta_r (n - 2)`` inside one, none on one replica; step ``(t_c^gamma + t_n^gamma)^(1/gamma)``;
  an accumulation step costs ``t_c``. :func:`fit_perf_params` fits the seven parameters to the
  samples the job has reported, one per distinct (replicas, atomic batch) as upstream's
  ``Job.profile`` (a configuration seen again does not refit), within upstream's bounds
  (``[1e-8, inf)``, gamma in ``[1, 10]``) and with upstream's rules for what the samples cannot
  tell; the estimator is ours (decomposed least squares, see the function: upstream minimises
  one joint objective with autograd's gradients, which is about 100x slower without them).
* **statistical efficiency** ``E(B) = (PGNS + B0) / (PGNS + B)`` with the PGNS the job reported
  last (upstream: ``grad_params`` replaced at every step; it grows as training progresses).
* **goodput** = throughput x efficiency; the **tuned batch** at ``w`` workers maximises it over
  :data:`N_BATCHES` local batches in geometric space between the job's limits (the same limits
  the simulator enforces, :meth:`aryl_gym.sim.goodput.JobCurve.lam_range`: local batch within
  ``[min_local, 16 max_local]`` with accumulation, global batch within ``[B0, max_batch]``;
  upstream: 50 global batches in ``[max(B0, min_local n), max_batch]``).

A job that has never run has no model: upstream's speedup is then linear in replicas (``lambda
n, r: r``) and its batch the reference one.
"""

from __future__ import annotations

import math

import numpy as np

from aryl_gym.sim.goodput import NODE_GPUS, app_for
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import Measurement

#: candidate local batches per worker count when tuning (upstream 50; [ours] 16 for speed: the
#: goodput curve is smooth in the batch, the loss against 50 is below 1% on the profiles)
N_BATCHES = 16

#: upstream's lower and upper bounds of (alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma)
LOWER = np.array([1e-8] * 6 + [1.0])
UPPER = np.array([np.inf] * 6 + [10.0])


def predict_times(params: np.ndarray, n: np.ndarray, atomic: np.ndarray):
    """(compute time, atomic step time) of the throughput model; ``params`` has the seven
    parameters on its last axis and broadcasts against ``n`` (replicas) and ``atomic``."""
    a_c, b_c, a_n, b_n, a_r, b_r, gam = (params[..., k] for k in range(7))
    compute = a_c + b_c * atomic
    retro = np.maximum(n - 2.0, 1e-8)
    net = np.where(n > NODE_GPUS, a_n + b_n * retro, np.where(n > 1, a_r + b_r * retro, 1e-8))
    step = (compute**gam + net**gam) ** (1.0 / gam)
    return compute, step


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``y = a + b x`` with ``a, b >= 1e-8`` (one distinct ``x``: ``b`` at its
    bound, ``a`` the mean)."""
    xm, ym = float(x.mean()), float(y.mean())
    dx = x - xm
    var = float(dx @ dx)
    if var <= 1e-12 * max(xm * xm, 1.0) * x.size:  # one distinct x
        return max(ym, 1e-8), 1e-8
    b = float(dx @ (y - ym)) / var
    a = ym - b * xm
    if b < 1e-8:
        return max(float(np.mean(y)), 1e-8), 1e-8
    if a < 1e-8:  # through the origin's bound
        a = 1e-8
        b = max(float(np.dot(x, y - a) / np.dot(x, x)), 1e-8)
    return float(a), float(b)


#: golden-section iterations for gamma in [1, 10] (final bracket 9 x 0.618^24 ~ 9e-5)
_GOLDEN_STEPS = 24


def fit_perf_params(n, atomic, compute_time, step_time, sync_time) -> np.ndarray:
    """Fit the throughput model to samples (module docstring); returns the seven parameters.

    [ours, same model and samples, a faster estimator than upstream's joint L-BFGS over all
    seven (which needs exact gradients to be fast)]: the compute line ``alpha_c + beta_c u`` by
    least squares on the compute times; each all-reduce line (inter-node, intra-node) by least
    squares on the all-reduce times of its samples against ``n - 2``; then gamma by
    golden-section search on upstream's step-time term (RMS log error of the step time, plus
    ``1e-3 (gamma - 1)^2``). Upstream's rules for what the samples cannot tell apply: one atomic
    batch fixes ``alpha_c`` at half the mean compute time (and ``beta_c`` carries the rest); no
    multi-node sample leaves ``alpha_n, beta_n`` at their lower bound, then raised to 1.1x the
    intra-node ones; no single-node multi-replica sample leaves ``alpha_r, beta_r`` there; no
    sample above 2 replicas leaves both betas there. Noiseless samples of a model of this form
    give back its parameters (``tests/test_pollux_v2.py``)."""
    n = np.asarray(n, dtype=np.float64)
    u = np.asarray(atomic, dtype=np.float64)
    tc = np.asarray(compute_time, dtype=np.float64)
    ts = np.asarray(step_time, dtype=np.float64)
    tn = np.asarray(sync_time, dtype=np.float64)
    x = LOWER.copy()
    if u.min() == u.max():
        x[0] = float(np.mean(tc)) / 2
        x[1] = max((float(np.mean(tc)) - x[0]) / float(u[0]), 1e-8)
    else:
        x[0], x[1] = _line(u, tc)
    inter = n > NODE_GPUS
    intra = (n > 1) & ~inter
    for m, k in ((inter, 2), (intra, 4)):
        if m.any():
            r = np.maximum(n[m] - 2.0, 0.0)
            if np.any(n[m] > 2):
                x[k], x[k + 1] = _line(r, tn[m])
            else:
                x[k] = max(float(np.mean(tn[m])), 1e-8)
    if not inter.any():
        x[2] = max(x[2], x[4] * 1.1)
        x[3] = max(x[3], x[5] * 1.1)
    x[6] = 1.0 + 1e-3  # upstream's starting gamma; kept when no sample has an all-reduce
    if not np.any(n > 1):
        return x
    log_s = np.log(ts)
    # compute and all-reduce do not depend on gamma
    tc_hat = x[0] + x[1] * u
    retro = np.maximum(n - 2.0, 1e-8)
    tn_hat = np.where(n > NODE_GPUS, x[2] + x[3] * retro, np.where(n > 1, x[4] + x[5] * retro, 1e-8))
    k = len(ts)

    def err(gam: float) -> float:
        step = (tc_hat**gam + tn_hat**gam) ** (1.0 / gam)
        d = np.log(step) - log_s
        return math.sqrt(float(d @ d) / k) + 1e-3 * (gam - 1.0) ** 2

    a, b = 1.0, 10.0
    r = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = err(c), err(d)
    for _ in range(_GOLDEN_STEPS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - r * (b - a)
            fc = err(c)
        else:
            a, c, fc = c, d, fd
            d = a + r * (b - a)
            fd = err(d)
    best = min((err(1.0), 1.0), (fc, c), (fd, d), (err(10.0), 10.0))
    x[6] = best[1]
    return x


class Limits:
    """A job's batch-size facts, which the scheduler knows from its submission (upstream
    ``Application``: initial batch, local batch range, largest batch): ``u_ref`` (its reference
    local batch), ``b0``, ``min_local``, ``max_local``, ``max_batch`` and ``g``."""

    __slots__ = ("g", "u_ref", "b0", "min_local", "max_local", "max_batch")

    def __init__(self, spec: JobSpec):
        c = app_for(spec.family, spec.app)
        ref = float(spec.batch_size) if spec.app is not None and spec.batch_size else c.init_batch
        self.g = int(spec.g)
        self.u_ref = min(max(ref / (spec.w_req * spec.g), c.min_local), c.max_local)
        self.b0, self.min_local = c.init_batch, c.min_local
        self.max_local, self.max_batch = c.max_local, c.max_batch

    def workers(self) -> int:
        """The batch-size limit in workers: ``max_batch // (min_local x g)`` (upstream's
        ``max_batch_size // min_local_bsz`` replicas)."""
        return int(self.max_batch // (self.min_local * self.g))


class JobModel:
    """One job's fitted goodput model: its samples, parameters and last gradient noise scale."""

    __slots__ = ("samples", "params", "pgns", "version")

    def __init__(self) -> None:
        self.samples: dict[tuple[int, int], tuple[float, float, float, float]] = {}
        self.params: np.ndarray | None = None
        self.pgns = 0.0
        self.version = 0  # bumped at every refit

    def observe(self, m: Measurement) -> bool:
        """Take a report; refit when its configuration is new. Returns whether it refitted."""
        self.pgns = float(m.pgns)
        # upstream's profile key: (replicas, integer atomic batch)
        key = (int(round(m.gpus)), int(round(float(m.atomic_batch))))
        if key in self.samples:
            return False
        self.samples[key] = (
            float(m.atomic_batch), float(m.compute_time), float(m.step_time), float(m.sync_time)
        )
        ks = np.array(list(self.samples), dtype=np.float64)
        vs = np.array(list(self.samples.values()), dtype=np.float64)
        self.params = fit_perf_params(ks[:, 0], vs[:, 0], vs[:, 1], vs[:, 2], vs[:, 3])
        self.version += 1
        return True


def observe_running(view, models: dict[int, JobModel]) -> None:
    """Take every running job's report (``ClusterView.measure``) into its model in ``models``
    (created on a job's first report); Pollux and Aryl+TunedJobs both keep their models so."""
    for j in view.running():
        m = view.measure(j)
        if m is None:
            continue
        mod = models.get(j)
        if mod is None:
            mod = models[j] = JobModel()
        mod.observe(m)


def goodput(params, n, u, phi, b0, max_local):
    """Modelled goodput (samples per second x efficiency) at ``n`` replicas and local batch
    ``u`` (accumulation above ``max_local``); arguments broadcast."""
    accum = np.maximum(np.ceil(u / max_local - 1e-9) - 1.0, 0.0)
    atomic = u / (accum + 1.0)
    compute, step = predict_times(params, n, atomic)
    t = step + compute * accum
    return n * u / t * (phi + b0) / (phi + n * u)


def tuned_rows(
    params: np.ndarray, lim: list[Limits], phi: np.ndarray, W: int, tune: bool = True,
    k: int = N_BATCHES,
) -> tuple[np.ndarray, np.ndarray]:
    """For ``m`` jobs (``params`` (m, 7), their limits and PGNS) and ``w = 0..W`` workers: the
    modelled goodput at the best local batch factor, and that factor; both (m, W + 1), column
    0 = (0, 1). ``tune=False`` keeps the reference batch (factor 1)."""
    m = len(lim)
    if m == 0 or W < 1:
        return np.zeros((m, W + 1)), np.ones((m, W + 1))
    col = np.array([[x.g, x.u_ref, x.b0, x.min_local, x.max_local, x.max_batch] for x in lim])
    g, u_ref, b0, mn, mx, top = (col[:, i][:, None, None] for i in range(6))
    w = np.arange(1, W + 1, dtype=np.float64)[None, :, None]
    n = w * g
    lam_lo = np.maximum(mn, b0 / n) / u_ref
    lam_hi = np.maximum(np.minimum(16.0 * mx, top / n) / u_ref, lam_lo)
    if tune:
        t = np.linspace(0.0, 1.0, k)[None, None, :]
        lam = lam_lo * (lam_hi / lam_lo) ** t
    else:  # the reference batch as the simulator runs it without Decision.batch
        lam = np.ones_like(lam_lo)
    gp = goodput(params[:, None, None, :], n, lam * u_ref, phi[:, None, None], b0, mx)
    best = gp.argmax(axis=2)[..., None]
    out_gp = np.zeros((m, W + 1))
    out_lam = np.ones((m, W + 1))
    out_gp[:, 1:] = np.take_along_axis(gp, best, axis=2)[..., 0]
    out_lam[:, 1:] = np.take_along_axis(np.broadcast_to(lam, gp.shape), best, axis=2)[..., 0]
    return out_gp, out_lam
