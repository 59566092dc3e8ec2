"""The true goodput of a job beyond its limited range (World v2, SPEC "World v2" 4-5).

Inside ``[1, w_max]`` at its reference batch a job runs the paper's model: ``T(w) = W / w``
(linear; or the job's own ``JobSpec.scaling`` curve for Pollux-workload jobs). This module says
what happens **outside** that regime, which only policies that assume more elasticity than Aryl
reach (AFS's "unbounded elasticity", Pollux's replica range and batch-size tuning):

* **more workers than** ``w_max`` at the reference local batch: the global batch grows with the
  workers, so the job pays twice: per-GPU throughput falls (all-reduce over more replicas and
  servers) and statistical efficiency falls (a larger batch makes less progress per sample);
* **a tuned batch** (Pollux, Aryl+TunedJobs): another local batch at the same workers;
* a **hard parallelism ceiling** ``w_ceil`` (no configuration runs on more GPUs).

The model is Pollux's (Qiao et al., OSDI '21, section 3), with every constant fitted to the
application profiles measured by the Pollux artifact (``traces/pollux-philly/traces/<app>/``,
:func:`aryl_gym.workload.fit.fit_app_curves`; the constants below are its output, and a test
checks they agree):

* step time on ``n`` replicas (GPUs) at local batch ``u``:
  ``t = (t_c^gamma + t_n^gamma)^(1/gamma)`` with compute ``t_c = alpha_c + beta_c u`` and
  network ``t_n = alpha_n + beta_n (n - 2)`` across nodes, ``alpha_r + beta_r (n - 2)`` inside
  one node, 0 on one GPU; a local batch above the largest that fits memory is split into
  accumulation steps that skip the all-reduce;
* statistical efficiency of a global batch ``B`` at training progress ``p``:
  ``E(B, p) = (phi(p) + B0) / (phi(p) + B)``, with ``phi`` the gradient noise scale (PGNS, in
  samples), which grows as training progresses (interpolated in log space over the measured
  epochs of the initial batch's validation file);
* a tuned local batch is cut to what the application allows (:meth:`JobCurve.lam_range`);
* goodput = throughput x efficiency.

How it meets the simulator's work units (V100 worker-seconds at the reference configuration):
the job's reference local batch ``u_ref`` is its application's initial batch spread over the
workers it requests (``B0 / (w_req g)``, within the memory range), kept fixed when it scales
(paper: elastic jobs scale "without updating the local batch size"). With ``G(n, u, p)`` the
goodput:

* ``w <= w_max`` at ``u_ref``: the paper's linear rate (unchanged);
* ``w > w_max``: ``rate(w_max) x G(w g, u_ref, p) / G(w_max g, u_ref, p)``;
* a tuned local batch ``lam x u_ref``: times ``G(w g, lam u_ref, p) / G(w g, u_ref, p)``.

Families map to the nearest profiled application by architecture [ours; the paper's Figure 3
families have no public profile]: resnet50 and vgg16 to imagenet (ResNet-50), bert and
transformer to bert, gnmt16 and lstm to deepspeech2 (recurrent sequence models), cnn to cifar10,
rl to ncf and gan to yolov3. A profile node holds ``NODE_GPUS`` GPUs: a job on more replicas than
that pays the cross-node network term, as on the profiles' testbed (packed placement assumed).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

#: GPUs per node of the profiles' testbed (4 T4 per g4dn.12xlarge): more replicas than this pay
#: the cross-node network term. The intra-node term was fitted on at most 4 replicas, so it is
#: not extrapolated beyond them (deepspeech2's fitted intra-node retrogression would make 8
#: replicas slower than 9).
NODE_GPUS = 4
#: Upstream Pollux's replica cap, and below the batch limit (largest batch / smallest local
#: batch) of every profiled application: the default hard parallelism ceiling in GPUs.
CEILING_GPUS = 64


@dataclass(frozen=True)
class AppCurve:
    """One application's fitted throughput and efficiency model (see the module docstring).

    Times in seconds, batches in samples; ``pgns`` holds ``(progress fraction, PGNS)`` knots.
    """

    name: str
    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float
    init_batch: float
    min_local: float
    max_local: float
    max_batch: float
    pgns: tuple[tuple[float, float], ...]

    def phi(self, p: float) -> float:
        """Gradient noise scale (samples) at progress ``p`` in [0, 1]."""
        knots = self.pgns
        if p <= knots[0][0]:
            return knots[0][1]
        for (p0, v0), (p1, v1) in zip(knots, knots[1:]):
            if p < p1:
                f = (p - p0) / (p1 - p0)
                return math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))
        return knots[-1][1]

    def step_time(self, n: float, u: float) -> tuple[float, float]:
        """(seconds per optimizer step, of which all-reduce) on ``n`` replicas at atomic local
        batch ``u`` (no accumulation)."""
        t_c = self.alpha_c + self.beta_c * u
        if n <= 1:
            t_n = 1e-8
        elif n > NODE_GPUS:
            t_n = self.alpha_n + self.beta_n * max(n - 2.0, 1e-8)
        else:
            t_n = self.alpha_r + self.beta_r * max(n - 2.0, 1e-8)
        g = self.gamma
        return (t_c**g + t_n**g) ** (1.0 / g), t_n

    def throughput(self, n: float, u: float) -> float:
        """Samples per second on ``n`` replicas at local batch ``u`` (accumulation steps above
        ``max_local``: they compute without the all-reduce)."""
        accum = max(math.ceil(u / self.max_local - 1e-9) - 1, 0)
        atomic = u / (accum + 1)
        step, _ = self.step_time(n, atomic)
        compute = self.alpha_c + self.beta_c * atomic
        return n * u / (step + compute * accum)

    def efficiency(self, batch: float, p: float) -> float:
        """Statistical efficiency of global batch ``batch`` relative to the initial batch."""
        phi = self.phi(p)
        return (phi + self.init_batch) / (phi + batch)

    def goodput(self, n: float, u: float, p: float) -> float:
        return self.throughput(n, u) * self.efficiency(n * u, p)


# --------------------------------------------------------------------------------------------
# Fitted constants (aryl_gym.workload.fit.fit_app_curves on the Pollux artifact's profiles)
# --------------------------------------------------------------------------------------------
APP_CURVES: dict[str, AppCurve] = {}  # filled below from _FITTED

#: family -> application profile [ours: nearest profiled architecture; module docstring]
FAMILY_APPS: dict[str, str] = {
    "resnet50": "imagenet",
    "vgg16": "imagenet",
    "bert": "bert",
    "gnmt16": "deepspeech2",
    "cnn": "cifar10",
    "lstm": "deepspeech2",
    "transformer": "bert",
    "rl": "ncf",
    "gan": "yolov3",
}
DEFAULT_APP = "imagenet"


def app_for(family: str, app: str | None = None) -> AppCurve:
    """The curve of a job: its own application (Pollux workloads) or its family's."""
    if app is not None and app in APP_CURVES:
        return APP_CURVES[app]
    return APP_CURVES[FAMILY_APPS.get(family, DEFAULT_APP)]


class JobCurve:
    """One job's goodput outside the paper's regime, in units of its reference rate.

    ``w_req``, ``w_max``, ``g``: the job's request, limited maximum and GPUs per worker;
    ``ref_batch``: its global batch at ``w_req`` (None: the application's initial batch).
    """

    __slots__ = ("curve", "g", "w_max", "u_ref", "w_req")

    def __init__(self, curve: AppCurve, g: int, w_req: int, w_max: int,
                 ref_batch: float | None = None):
        self.curve = curve
        self.g = g
        self.w_max = w_max
        b0 = curve.init_batch if ref_batch is None else float(ref_batch)
        self.u_ref = min(max(b0 / (w_req * g), curve.min_local), curve.max_local)
        self.w_req = w_req

    def beyond(self, w: int, p: float) -> float:
        """``G(w g, u_ref, p) / G(w_max g, u_ref, p)`` for ``w > w_max`` (< ``w / w_max``)."""
        c, g, u = self.curve, self.g, self.u_ref
        return c.goodput(w * g, u, p) / c.goodput(self.w_max * g, u, p)

    def tuned(self, w: int, lam: float, p: float) -> float:
        """``G(w g, lam u_ref, p) / G(w g, u_ref, p)``: the effect of a tuned local batch."""
        c, n, u = self.curve, w * self.g, self.u_ref
        lo, hi = self.lam_range(w)
        lam = lo if lam < lo else (hi if lam > hi else lam)
        return c.goodput(n, lam * u, p) / c.goodput(n, u, p)

    def lam_range(self, w: int) -> tuple[float, float]:
        """Local batch factors a tuner may choose at ``w`` workers: the local batch within
        ``[min_local, max_local x 16]`` (accumulation) and the global batch within
        ``[init_batch, max_batch]`` (Pollux: never below the initial batch)."""
        c, n = self.curve, w * self.g
        lo = max(c.min_local, c.init_batch / n) / self.u_ref
        hi = min(c.max_local * 16.0, c.max_batch / n) / self.u_ref
        return lo, max(hi, lo)


def observe(curve: JobCurve, w: int, lam: float, p: float, rate: float) -> dict[str, float]:
    """What a job's training loop reports (AdaptDL: step and sync time of its configuration,
    gradient statistics) when it runs ``w`` workers at local batch factor ``lam`` at progress
    ``p`` with the simulator's true rate ``rate`` (work units per second).

    The step time is the one that reproduces ``rate``: goodput in samples per second is
    ``kappa x rate`` with ``kappa`` the job's samples per work unit (its application's
    throughput at its reference configuration, ``w_req`` workers at ``u_ref``, per worker), and
    throughput is goodput over the statistical efficiency ``E(B, p)``; the time of one
    optimizer step of global batch ``B`` is ``B / throughput``. It is split into the atomic
    step (compute and all-reduce, overlapped) and accumulation steps (compute only) in the true
    curve's proportions, and reported as the atomic step time, its compute time and its
    all-reduce time. So a
    policy that fits the throughput model to these samples recovers the simulator's rates at
    the configurations it has seen (inside ``w_max`` the paper's linear rate, beyond it and at a
    tuned batch the profiles' curve)."""
    c = curve.curve
    n = w * curve.g
    lo, hi = curve.lam_range(w)
    lam = lo if lam < lo else (hi if lam > hi else lam)
    u = lam * curve.u_ref
    B = n * u
    phi = c.phi(p)
    eff = (phi + c.init_batch) / (phi + B)
    accum = max(math.ceil(u / c.max_local - 1e-9) - 1, 0)
    atomic = u / (accum + 1)
    st, net = c.step_time(n, atomic)
    compute = c.alpha_c + c.beta_c * atomic
    t_true = st + compute * accum
    kappa = c.throughput(curve.w_req * curve.g, curve.u_ref) / curve.w_req
    total = B * eff / (kappa * rate)
    s = total / t_true
    return {
        "gpus": float(n), "local_batch": u, "atomic_batch": atomic, "accum_steps": float(accum),
        "step_time": s * st, "compute_time": s * compute, "sync_time": s * net if n > 1 else 0.0,
        "pgns": phi, "efficiency": eff,
    }


def ceiling_workers(g: int, w_max: int, ceiling_gpus: int = CEILING_GPUS) -> int:
    """The hard parallelism ceiling in workers: ``ceiling_gpus // g``, never below ``w_max``."""
    return max(int(w_max), int(ceiling_gpus) // int(g))


def _install(fitted: dict[str, tuple]) -> None:
    APP_CURVES.clear()
    for name, (params, batches, knots) in fitted.items():
        a_c, b_c, a_n, b_n, a_r, b_r, gamma = (float(x) for x in params)
        b0, lo, hi, top = (float(x) for x in batches)
        APP_CURVES[name] = AppCurve(
            name, a_c, b_c, a_n, b_n, a_r, b_r, gamma, b0, lo, hi, top,
            tuple((float(p), float(v)) for p, v in knots),
        )


def _goodput_np(c: AppCurve, n: np.ndarray, u: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """:meth:`AppCurve.goodput` over arrays (broadcast), with the PGNS ``phi`` given."""
    accum = np.maximum(np.ceil(u / c.max_local - 1e-9) - 1.0, 0.0)
    atomic = u / (accum + 1.0)
    t_c = c.alpha_c + c.beta_c * atomic
    nm2 = np.maximum(n - 2.0, 1e-8)
    t_n = np.where(n <= 1, 1e-8, np.where(n > NODE_GPUS, c.alpha_n + c.beta_n * nm2,
                                          c.alpha_r + c.beta_r * nm2))
    step = (t_c**c.gamma + t_n**c.gamma) ** (1.0 / c.gamma)
    thr = n * u / (step + t_c * accum)
    return thr * (phi + c.init_batch) / (phi + n * u)


#: local batch factors tried per worker count by :func:`best_rate_factors`, log-spaced over the
#: range :meth:`JobCurve.lam_range` allows (besides the accumulation steps' edges and the
#: reference batch); with them the maximum is within 0.02% of a 4,097-point grid's on every
#: family's curve, and :func:`min_time_factor` adds :data:`GRID_MARGIN` to stay a bound
#: (tests/test_lower_bound.py)
LAM_POINTS = 65
#: the best rate factor is raised by this share before it bounds a running time: five times the
#: batch grid's largest shortfall measured against a 4,097-point grid
GRID_MARGIN = 1e-3


def progress_grid(curve: AppCurve, points: int = 41) -> np.ndarray:
    """Progress values where :func:`best_rate_factors` is evaluated: a uniform grid and the
    PGNS knots (between knots the noise scale moves monotonically)."""
    knots = [p for p, _ in curve.pgns if 0.0 <= p <= 1.0]
    return np.unique(np.concatenate([np.linspace(0.0, 1.0, points), knots]))


@functools.lru_cache(maxsize=256)
def _grid_of(curve: AppCurve) -> tuple[np.ndarray, np.ndarray]:
    """:func:`progress_grid` of ``curve`` and the noise scale there, kept per application
    (read-only arrays)."""
    ps = progress_grid(curve)
    phi = np.array([curve.phi(float(p)) for p in ps])
    ps.flags.writeable = False
    phi.flags.writeable = False
    return ps, phi


def best_rate_factors(curve: JobCurve, base: np.ndarray, w_ceil: int, ps: np.ndarray,
                      phi_ps: np.ndarray | None = None) -> np.ndarray:
    """For each progress in ``ps``: the fastest rate any configuration reaches, in units of the
    reference rate at ``w_max`` (at least 1 when ``w_ceil >= w_max``): the maximum over
    ``w = 1..w_ceil`` workers and
    the local batch factors a tuner may choose (:meth:`JobCurve.lam_range`, on a grid of
    :data:`LAM_POINTS`) of what the simulator runs (module docstring). ``base[w]`` for
    ``w = 1..w_max`` is the rate at the reference batch relative to ``w_max``'s
    (``w scaling[w] / (w_max scaling[w_max])``; index 0 unused). ``phi_ps``: the noise scale
    at ``ps`` when the caller has it (else computed)."""
    c, g, u0, wm = curve.curve, curve.g, curve.u_ref, curve.w_max
    if phi_ps is None:
        phi_ps = np.array([c.phi(float(p)) for p in ps])
    phi = phi_ps[None, None, :]  # (1, 1, P)
    ws = np.arange(1, max(w_ceil, 1) + 1, dtype=np.float64)
    # candidates: a log grid over the allowed range, the local batches where one more
    # accumulation step starts (k x max_local: throughput jumps there), the reference batch
    kinks = accumulation_edges(curve)
    lams = np.empty((len(ws), LAM_POINTS + len(kinks) + 1))
    ranges = [curve.lam_range(w) for w in range(1, len(ws) + 1)]
    lo = np.array([r[0] for r in ranges])
    hi = np.array([r[1] for r in ranges])
    lams[:, :LAM_POINTS] = lo[:, None]
    wide = hi > lo
    if wide.any():  # the rows' own geometric grids (the same values as one geomspace per row)
        lams[wide, :LAM_POINTS] = np.geomspace(lo[wide], hi[wide], LAM_POINTS, axis=1)
    lams[:, LAM_POINTS:-1] = np.clip(kinks[None, :], lo[:, None], hi[:, None])
    lams[:, -1] = 1.0  # the reference batch (no tuning) is always allowed
    n = (ws * g)[:, None, None]  # (W, 1, 1)
    tuned = _goodput_np(c, n, lams[:, :, None] * u0, phi)  # (W, L, P)
    ref = _goodput_np(c, n, np.full((1, 1, 1), u0), phi)  # (W, 1, P)
    best_tuning = tuned.max(axis=1) / ref[:, 0, :]  # (W, P): the best batch over the reference's
    # the rate at the reference batch relative to w_max's: the job's own curve up to w_max, the
    # goodput ratio beyond it (module docstring)
    at_wmax = _goodput_np(c, np.full((1, 1, 1), wm * g, dtype=np.float64), np.full((1, 1, 1), u0), phi)
    rel = np.empty((len(ws), len(ps)))
    k = min(wm, len(ws))
    rel[:k] = np.asarray(base[1:k + 1], dtype=np.float64)[:, None]
    if len(ws) > wm:
        rel[wm:] = ref[wm:, 0, :] / at_wmax[0, 0, :]
    return (rel * best_tuning).max(axis=0)


def pretuned_factor(curve: JobCurve, w: int, points: int = LAM_POINTS) -> float:
    """The local batch factor that finishes a job soonest at ``w`` workers when it is fixed for
    the whole training: the minimum of ``integral over progress p of G(n, u_ref, p) /
    G(n, lam u_ref, p)`` (the running time at ``lam`` in units of the reference batch's;
    trapezoids on the application's progress grid and PGNS knots) over the factors the simulator's
    tuners try (:func:`best_rate_factors`: ``points`` log-spaced over
    :meth:`JobCurve.lam_range`, the edges where one more accumulation step starts, and 1, the
    reference). 1 when no factor is faster than the reference. ``aryl+pretuned``'s batch (jobs
    submitted pre-tuned, agents/aryl_tuned.py)."""
    c, u0 = curve.curve, curve.u_ref
    lo, hi = curve.lam_range(w)
    grid = np.geomspace(lo, hi, points) if hi > lo else np.array([lo])
    kinks = np.clip(accumulation_edges(curve), lo, hi)
    lams = np.unique(np.concatenate([grid, kinks, [1.0]]))
    ps, phi = _grid_of(c)
    n = np.full((1, 1), float(w * curve.g))
    inv = _goodput_np(c, n, np.full((1, 1), u0), phi[None, :]) / _goodput_np(c, n, lams[:, None] * u0, phi[None, :])
    t = (np.diff(ps)[None, :] * (inv[:, :-1] + inv[:, 1:]) / 2.0).sum(axis=1)  # (factors,)
    i = int(np.argmin(t))
    one = int(np.flatnonzero(lams == 1.0)[0])
    return float(lams[i]) if t[i] < t[one] else 1.0


def accumulation_edges(curve: JobCurve) -> np.ndarray:
    """Local batch factors where one more accumulation step starts (``k x max_local``, k = 1..16):
    throughput jumps there, so a tuner's search includes them."""
    return np.arange(1, 17, dtype=np.float64) * curve.curve.max_local / curve.u_ref


def min_time_factor(curve: JobCurve, base: np.ndarray, w_ceil: int) -> float:
    """A job's shortest possible running time, alone, in units of its running time at ``w_max``
    and the reference batch: ``integral over progress p in [0, 1] of 1 / F(p)`` with ``F`` the
    best rate factor (:func:`best_rate_factors`, raised by :data:`GRID_MARGIN`), taking on each
    grid interval the larger of its ends' factors (a bound as long as the best rate is monotone
    between grid points, which the grid's resolution and the PGNS knots make it; a test checks it
    on a 2,001-point grid); at most 1 when ``w_ceil >= w_max``."""
    ps, phi = _grid_of(curve.curve)
    f = best_rate_factors(curve, base, w_ceil, ps, phi) * (1.0 + GRID_MARGIN)
    hi = np.maximum(f[:-1], f[1:])
    return float(np.sum(np.diff(ps) / hi))


def job_curve_of(family: str, app: str | None, g: int, w_req: int, w_max: int,
                 batch_size: int | None) -> JobCurve:
    """The goodput curve of a job with these spec fields (``JobSpec``): its application's (or
    family's) curve, with the workload's batch as the reference where it has one."""
    ref = float(batch_size) if app is not None and batch_size else None
    return JobCurve(app_for(family, app), g, w_req, w_max, ref)


@functools.lru_cache(maxsize=65536)
def job_min_time_factor(family: str, app: str | None, g: int, w_req: int, w_max: int,
                        batch_size: int | None, scaling: tuple[float, ...] | None,
                        w_ceil: int) -> float:
    """:func:`min_time_factor` of a job given by its spec fields (``JobSpec``; ``scaling`` its
    own curve up to ``w_max``, None = linear); cached, since jobs of a trace share few shapes."""
    ws = np.arange(w_max + 1, dtype=np.float64)
    if scaling is None:
        base = ws / w_max
    else:
        sc = np.array([float(scaling[min(int(w), len(scaling) - 1)]) for w in ws])
        base = ws * sc / (w_max * sc[w_max])
    return min_time_factor(job_curve_of(family, app, g, w_req, w_max, batch_size), base, w_ceil)


def curve_table(curve: JobCurve, w_hi: int, p: float) -> np.ndarray:
    """``beyond(w, p)`` for ``w = 0..w_hi`` (1 up to ``w_max``), for tables and plots."""
    out = np.ones(w_hi + 1)
    for w in range(curve.w_max + 1, w_hi + 1):
        out[w] = curve.beyond(w, p)
    return out


# (params: alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma; batches: initial, smallest
# and largest local, largest global; PGNS knots) -- `aryl-gym fit-world` prints them afresh
_FITTED: dict[str, tuple] = {
    "bert": (
        (0.225228, 0.0580147, 1.40285, 0.00948394, 0.221521, 9.04907e-20, 2.10104),
        (12, 4, 12, 384),
        (
            (0, 422.966), (0.05, 422.966), (0.1, 422.966), (0.2, 422.966),
            (0.3, 422.966), (0.4, 422.966), (0.5, 422.966), (0.6, 514.305),
            (0.7, 625.368), (0.8, 760.415), (0.9, 924.626), (1, 1124.3),
        ),
    ),
    "cifar10": (
        (0.0102476, 0.000779986, 0.130629, 0.00264837, 0.0408066, 0.00474806, 2.84497),
        (128, 32, 1024, 4096),
        (
            (0, 72.4826), (0.05, 250.023), (0.1, 829.386), (0.2, 2103.81),
            (0.3, 2787.59), (0.4, 3696.27), (0.5, 4836.76), (0.6, 6443.91),
            (0.7, 9430.1), (0.8, 17071.6), (0.9, 25448.5), (1, 38658),
        ),
    ),
    "deepspeech2": (
        (0.017864, 0.0330833, 0.890438, 0.00918291, 0.473207, 0.0848325, 3.12538),
        (20, 10, 80, 640),
        (
            (0, 9.37421), (0.05, 28.963), (0.1, 247.82), (0.2, 1264.33),
            (0.3, 4229.8), (0.4, 15996), (0.5, 26387.6), (0.6, 56085.4),
            (0.7, 7.90541e+07), (0.8, 1e+08), (0.9, 1e+08), (1, 1e+08),
        ),
    ),
    "imagenet": (
        (0.0570426, 0.004549, 0.309895, 0.00662207, 0.0851276, 0.0136348, 2.68224),
        (200, 20, 200, 12800),
        (
            (0, 928.241), (0.05, 4418.38), (0.1, 5342.61), (0.2, 5892.99),
            (0.3, 6045.38), (0.4, 11442.5), (0.5, 11442.5), (0.6, 11442.5),
            (0.7, 14359.7), (0.8, 14359.7), (0.9, 14359.7), (1, 14426.6),
        ),
    ),
    "ncf": (
        (0.00691995, 8.3876e-07, 0.0143892, 0.000548479, 0.00286193, 0.00119611, 1),
        (256, 32, 32768, 32768),
        (
            (0, 18565.3), (0.05, 18565.3), (0.1, 18565.3), (0.2, 1.5104e+06),
            (0.3, 1.51047e+06), (0.4, 6.90164e+06), (0.5, 7.49008e+06), (0.6, 1.94977e+07),
            (0.7, 1.94983e+07), (0.8, 4.33283e+07), (0.9, 4.33283e+07), (1, 5.91315e+07),
        ),
    ),
    "yolov3": (
        (0.205028, 0.0248345, 0.723081, 0.0106923, 0.120658, 3.98534e-15, 1.08523),
        (8, 4, 8, 512),
        (
            (0, 0.649447), (0.05, 159.532), (0.1, 239.407), (0.2, 331.275),
            (0.3, 417.398), (0.4, 494.591), (0.5, 494.591), (0.6, 655.88),
            (0.7, 882.142), (0.8, 1647.11), (0.9, 2409.43), (1, 5851.71),
        ),
    ),
}
_install(_FITTED)
