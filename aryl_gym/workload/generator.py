"""Seeded synthetic workload generator, calibrated to the paper's facts (SPEC 4, "World v1").

The ``philly-like`` generator draws jobs in *batches* (users submit sweeps and retries):

* **Arrivals** (World v1, fitted to Philly by :mod:`aryl_gym.workload.fit`). Batch starts form
  a Cox process: a Poisson process whose hourly rate is the mean rate times a mild daily cycle
  (``diurnal_arrivals``) times ``exp(X_day + X_hour)``, Gaussian AR(1) log-rates over days
  (``burst_day_sigma``, ``burst_day_rho``) and over hours (``burst_rate_sigma``,
  ``burst_rate_rho``). The multiplier is normalised to mean 1 over the
  episode, so ``load`` is each episode's offered load and burstiness only moves work in time.
  A batch holds ``S`` jobs, ``S`` Zipf on ``1..burst_size_max`` with exponent
  ``burst_size_alpha``; its jobs follow its start at exponential gaps of mean ``burst_gap_s``.
  ``burstiness`` scales both log-rate deviations and the Zipf tail (exponent ``1 + (alpha-1)/b``);
  0 gives the v0 Poisson process (one job per batch, no modulation).
* **Shape**, one per batch (95% of Philly's multi-job batches share their GPU count). With
  probability ``elastic_fraction`` a batch is of one of the paper's elastic families (resnet50,
  vgg16, bert, gnmt16; paper Figure 3), otherwise of an inelastic family; ``all_elastic`` makes
  every job elastic (the ``ideal`` scenario). Inelastic jobs follow Philly's GPU-count
  distribution (per-job summary of the Philly trace: 93.2% 1 GPU, 2.2% 2, 2.3% 4, 2.0% 8, 0.24%
  16, 0.08% 32, 0.02% 64), one worker of up to 8 GPUs, larger jobs as several 8-GPU workers.
  Elastic jobs are data-parallel: 1, 2 or 4 GPUs per worker and 4-32 GPUs *requested*.
  With ``elastic_gpu_share`` set (World v2), elastic requests are scaled by one factor
  (:func:`elastic_size_scale`: their worker counts times ``s``, rounded, at least 1) so that the
  elastic families hold that share of GPU-time whatever the count share ``elastic_fraction``:
  the count share then only decides whether elastic GPU-time comes as few large jobs or many
  small ones (the paper gives the share by resources only).
* **Elastic range** (World v1). An elastic job requests its base demand, ``w_req = w_min``, and
  may grow to ``w_max = r x w_min`` with ``r`` uniform over the powers of two in
  ``[2, elastic_range]``, capped by ``max_job_gpus``. Inelastic: ``w_min = w_req = w_max``.
* **Length.** Inelastic running times (at the request) are log-normal with Philly's median
  (1,144 s) and log standard deviation (2.15), clipped to ``[min_duration_s, max_duration_s]``;
  elastic jobs' running time at the request is log-normal (sigma 1) with mean
  ``elastic_mean_hours`` (paper: 14.2 h, read at the request under Baseline). Each job of a batch
  scatters around the batch's length by a mean-one log-normal factor
  (``burst_duration_sigma``). Work = running time at the request x ``w_req`` =
  ``T(w_max) x w_max`` (linear scaling; V100 worker-seconds).
* **Type-agnostic** with probability ``type_agnostic_fraction`` (paper: up to 21%).
* **Rate.** The mean job rate is ``num_jobs / duration`` when ``num_jobs`` is given (then exactly
  ``num_jobs`` jobs), else ``load x training GPUs / E[GPU-seconds per job]`` with the
  expectation estimated once by a fixed-seed Monte Carlo, so offered load is comparable across
  cluster sizes.
* **Prediction error.** ``pred_work = work x exp(N(0, prediction_sigma))`` (paper 7.5).
* **Heterogeneous training** (paper 7.2, off by default). Each job is drawn ``hetero`` with
  probability ``hetero_fraction``; only eligible jobs keep the mark: type-agnostic, elastic jobs
  of the data-parallel elastic families (``ELASTIC_FAMILIES``). The draw comes after every other
  draw, so a trace with ``hetero_fraction = 0`` is the trace drawn without the option.

``aryl-gym calibrate`` prints the generated figures beside the paper's and the trace's.

"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from aryl_gym.config import ConfigError, ScenarioConfig, WorkloadConfig
from aryl_gym.families import INELASTIC_FAMILIES
from aryl_gym.sim.jobs import ELASTIC_FAMILIES, JobSpec
from aryl_gym.workload.fit import PHILLY_ARRIVAL_STATS, arrival_stats, zipf_pmf

PHILLY_GPUS = np.array([1, 2, 4, 8, 16, 32, 64])
PHILLY_GPU_P = np.array([0.9317, 0.0221, 0.0227, 0.0200, 0.0024, 0.0008, 0.0003])
PHILLY_GPU_P = PHILLY_GPU_P / PHILLY_GPU_P.sum()
ELASTIC_TOTAL = np.array([4, 8, 16, 32])
ELASTIC_TOTAL_P = np.array([0.30, 0.40, 0.20, 0.10])
ELASTIC_G = np.array([1, 2, 4])
ELASTIC_G_P = np.array([0.6, 0.25, 0.15])


def _max_gpus(cfg: ScenarioConfig) -> int:
    w = cfg.workload
    cap = cfg.cluster.train_gpus
    return min(cap, w.max_job_gpus) if w.max_job_gpus else cap


def _slots(cfg: ScenarioConfig) -> tuple[int, int]:
    return int(cfg.cluster.train_servers), int(cfg.cluster.train_gpus_per_server)


def _max_g(cfg: ScenarioConfig) -> int:
    """The most GPUs per worker: 8, or the largest worker size (1, 2, 4) that a training server
    holds (was: ``min(8, GPUs per server)``, so a 6-GPU server gave 6-GPU workers, which no
    simulator accepts)."""
    return next(g for g in (8, 4, 2, 1) if g <= cfg.cluster.train_gpus_per_server)


def _pow2_floor(g: np.ndarray) -> np.ndarray:
    """The largest worker size (1, 2, 4 or 8) not above ``g`` (``g`` in 1..8)."""
    return np.where(g >= 8, 8, np.where(g >= 4, 4, np.where(g >= 2, 2, 1)))


def _worker_cap(g: np.ndarray, max_gpus: int, slots: tuple[int, int] | None) -> np.ndarray:
    """The most workers of ``g`` GPUs a job may have: ``max_gpus // g`` (at least 1) and, with
    ``slots``, no more than the training servers hold (``servers x (GPUs per server // g)``; the
    same number when ``g`` divides a server's GPUs: on 12-GPU servers, 8-GPU workers fit one per
    server, and a job of more such workers than servers would never start)."""
    cap = np.maximum(max_gpus // g, 1)
    if slots is not None:
        servers, per = slots
        cap = np.minimum(cap, np.maximum(servers * (per // g), 1))
    return cap


def _elastic_factors(w: WorkloadConfig) -> np.ndarray:
    """The growth factors ``r`` an elastic job may draw: powers of two in ``[2, elastic_range]``."""
    rs = [2**k for k in range(1, 31) if 2**k <= w.elastic_range + 1e-9]
    return np.array(rs or [1], dtype=np.int64)


def _mean_sizes(w: WorkloadConfig) -> tuple[float, float]:
    """Mean batch size of batches of 1-GPU jobs and of multi-GPU jobs."""
    out = []
    for pmf in (batch_size_pmf(w, True), batch_size_pmf(w, False)):
        out.append(float((np.arange(1, len(pmf) + 1) * pmf).sum()))
    return out[0], out[1]


def _batch_weights(w: WorkloadConfig) -> tuple[float, np.ndarray]:
    """Per-*batch* probabilities of an elastic-family shape and of each Philly GPU count, such
    that per *job* (batches weighted by their mean size) they are ``elastic_fraction`` and
    ``PHILLY_GPU_P``: ``P_batch(shape) ~ P_job(shape) / E[S | shape's class]``."""
    e1, em = _mean_sizes(w)
    per = PHILLY_GPU_P / np.where(PHILLY_GPUS == 1, e1, em)
    ef = float(w.elastic_fraction)
    q_el = (ef / em) / (ef / em + (1.0 - ef) * per.sum())
    return q_el, per / per.sum()


def batch_single_share(w: WorkloadConfig) -> float:
    """Probability that a batch is of 1-GPU jobs (elastic-family shapes have 4+ GPUs)."""
    q_el, gpu_p = _batch_weights(w)
    return (1.0 - q_el) * float(gpu_p[PHILLY_GPUS == 1].sum())


def _draw_jobs(
    w: WorkloadConfig,
    max_gpus: int,
    max_g: int,
    n: int,
    rng: np.random.Generator,
    per_batch: bool = False,
    slots: tuple[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """Draw ``n`` job shapes (no arrival times); vectorised.

    ``w_req`` is the request (what Baseline runs), ``dur`` the running time at the request on a
    V100; elastic jobs get ``w_max = r x w_req`` (World v1). ``per_batch`` draws batch shapes
    (:func:`_batch_weights`), so that jobs, counted with their batches, keep the per-job
    distribution. ``slots``: (training servers, GPUs per server), which cap a job's workers
    (:func:`_worker_cap`).
    """
    if per_batch:
        q_el, gpu_p = _batch_weights(w)
    else:
        q_el, gpu_p = float(w.elastic_fraction), PHILLY_GPU_P
    elastic = np.ones(n, bool) if w.all_elastic else rng.random(n) < q_el
    el_family = rng.random(n) < (q_el if w.all_elastic else 1.0)
    # Inelastic-shaped draws
    tot_in = rng.choice(PHILLY_GPUS, size=n, p=gpu_p)
    dur_in = np.exp(np.log(w.duration_median_s) + w.duration_sigma * rng.standard_normal(n))
    # Bigger jobs run longer in Philly: scale by (GPUs)^size_duration_exponent.
    dur_in = dur_in * tot_in.astype(np.float64) ** w.size_duration_exponent
    # Elastic-shaped draws
    tot_el = rng.choice(ELASTIC_TOTAL, size=n, p=ELASTIC_TOTAL_P)
    scale = elastic_size_scale(w, max_gpus, max_g, slots) if w.elastic_gpu_share is not None else 1.0
    g_el = rng.choice(ELASTIC_G, size=n, p=ELASTIC_G_P)
    mean_s = w.elastic_mean_hours * 3600.0
    dur_el = np.exp(np.log(mean_s) - 0.5 + rng.standard_normal(n))
    fam_el = rng.integers(0, len(ELASTIC_FAMILIES), n)
    fam_in = rng.integers(0, len(INELASTIC_FAMILIES), n)
    ta = rng.random(n) < w.type_agnostic_fraction
    factors = _elastic_factors(w)
    r = factors[rng.integers(0, len(factors), n)]

    # Elastic-family jobs use elastic shapes; with all_elastic, the others keep Philly shapes.
    use_el_shape = elastic & el_family
    total = np.where(use_el_shape, tot_el, tot_in)
    total = np.minimum(total, max_gpus)
    # a worker fits a training server: elastic families' per-worker GPUs are capped as the
    # others' are (was not: on 1- or 2-GPU servers a 4-GPU worker stopped the episode at once)
    g = np.minimum(np.where(use_el_shape, np.minimum(g_el, total), total), max_g)
    if w.all_elastic:
        g = np.where(use_el_shape, g, 1)  # data-parallel, one GPU per worker
    # a worker of 1, 2, 4 or 8 GPUs (was: a cap such as max_job_gpus 6 gave 6-GPU workers)
    g = _pow2_floor(np.maximum(g, 1))
    cap = _worker_cap(g, max_gpus, slots)
    w_req = np.minimum(np.maximum(total // g, 1), cap)
    if scale != 1.0:  # World v2: elastic requests scaled to keep the elastic GPU-time share
        w_sc = np.maximum(np.rint(w_req * scale).astype(np.int64), 1)
        w_sc = np.minimum(w_sc, cap)
        w_req = np.where(use_el_shape, w_sc, w_req)
    dur = np.where(use_el_shape, dur_el, dur_in)
    dur = np.clip(dur, w.min_duration_s, w.max_duration_s)
    w_cap = np.maximum(cap, w_req)
    w_max = np.where(elastic, np.minimum(w_req * r, w_cap), w_req)
    return {
        "elastic": elastic,
        "elastic_family": use_el_shape,
        "g": g.astype(np.int64),
        "w_req": w_req.astype(np.int64),
        "w_max": w_max.astype(np.int64),
        "dur": dur,
        "fam_el": fam_el,
        "fam_in": fam_in,
        "type_agnostic": ta,
    }


_EXPECTED_CACHE: dict[str, float] = {}
_SCALE_CACHE: dict[str, float] = {}


#: ``elastic_share_sample: "trace"``: shapes in its Monte Carlo sample (about 0.2 s to draw; the
#: share varies by about +-0.002 between such samples)
TRACE_SHARE_SAMPLE = 2_000_000


def _share_sample(w: WorkloadConfig, max_gpus: int, max_g: int,
                  slots: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    """The Monte Carlo sample of unscaled job shapes that ``elastic_size_scale`` measures the
    elastic GPU-time share on (``w.elastic_share_sample``)."""
    w1 = dataclasses.replace(w, elastic_gpu_share=None)
    if w.elastic_share_sample == "shapes-100k":  # World v2's traces
        return _draw_jobs(w1, max_gpus, max_g, 100_000, np.random.default_rng(20221202), slots=slots)
    rng = np.random.default_rng(20261207)
    d = _draw_jobs(w1, max_gpus, max_g, TRACE_SHARE_SAMPLE, rng, slots=slots)
    # the trace's per-job duration scatter (mean one) and clip, as generate_jobs applies them
    ds = float(w.burst_duration_sigma) * min(max(float(w.burstiness), 0.0), 1.0)
    if ds > 0:
        scatter = np.exp(ds * rng.standard_normal(len(d["dur"])) - 0.5 * ds * ds)
        d["dur"] = np.clip(d["dur"] * scatter, w.min_duration_s, w.max_duration_s)
    return d


def _share_of(d: dict[str, np.ndarray], max_gpus: int, scale: float,
              slots: tuple[int, int] | None = None) -> float:
    el = d["elastic_family"]
    w_req = d["w_req"]
    if scale != 1.0:
        w_sc = np.maximum(np.rint(w_req * scale).astype(np.int64), 1)
        w_sc = np.minimum(w_sc, _worker_cap(d["g"], max_gpus, slots))
        w_req = np.where(el, w_sc, w_req)
    gt = d["g"] * w_req * d["dur"]
    tot = float(gt.sum())
    return float(gt[el].sum()) / tot if tot > 0 else 0.0


def elastic_gpu_time_share(w: WorkloadConfig, max_gpus: int, max_g: int, scale: float,
                           slots: tuple[int, int] | None = None) -> float:
    """Expected share of GPU-time (at the request) held by elastic-family jobs when their
    requests are scaled by ``scale`` (fixed-seed Monte Carlo: ``w.elastic_share_sample``)."""
    return _share_of(_share_sample(w, max_gpus, max_g, slots), max_gpus, scale, slots)


def elastic_size_scale(w: WorkloadConfig, max_gpus: int, max_g: int,
                       slots: tuple[int, int] | None = None) -> float:
    """The factor on elastic jobs' requested workers that gives ``w.elastic_gpu_share`` of
    GPU-time to the elastic families (bisection in log space over [1/64, 64]; cached). Without
    a target, 1. A target the sizes cannot reach (a count share of 0, or so small that even the
    largest allowed jobs fall short) is a ConfigError naming both knobs."""
    target = w.elastic_gpu_share
    if target is None:
        return 1.0
    key = f"{w!r}|{max_gpus}|{max_g}|{slots}"
    if key in _SCALE_CACHE:
        return _SCALE_CACHE[key]
    lo, hi = math.log(1.0 / 64.0), math.log(64.0)
    sample = _share_sample(w, max_gpus, max_g, slots)  # drawn once: the bisection rescales it
    s_lo = _share_of(sample, max_gpus, math.exp(lo), slots)
    s_hi = _share_of(sample, max_gpus, math.exp(hi), slots)
    if not s_lo <= target <= s_hi:
        raise ConfigError(
            f"workload.elastic_gpu_share {target:g} cannot be reached at elastic_fraction "
            f"{w.elastic_fraction:g}: scaling elastic requests from 1/64 to 64x gives shares "
            f"{s_lo:.3f}-{s_hi:.3f}; change elastic_fraction (a count share) or the target"
        )
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _share_of(sample, max_gpus, math.exp(mid), slots) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-3:
            break
    _SCALE_CACHE[key] = math.exp(hi)
    return _SCALE_CACHE[key]


def _expected_gpu_seconds(w: WorkloadConfig, max_gpus: int, max_g: int,
                          slots: tuple[int, int] | None = None) -> float:
    """E[GPU-seconds per job at its request] by a fixed-seed Monte Carlo (200k draws)."""
    key = f"{w!r}|{max_gpus}|{max_g}|{slots}"
    if key not in _EXPECTED_CACHE:
        d = _draw_jobs(w, max_gpus, max_g, 200_000, np.random.default_rng(20220215), slots=slots)
        _EXPECTED_CACHE[key] = float((d["g"] * d["w_req"] * d["dur"]).mean())
    return _EXPECTED_CACHE[key]


def batch_size_pmf(w: WorkloadConfig, single_gpu: bool = True) -> np.ndarray:
    """``P(S = s)``, ``s = 1..max``, at the scenario's ``burstiness``, for batches of 1-GPU jobs
    (``burst_size_*``) or of multi-GPU jobs (``burst_multi_*``)."""
    b = float(w.burstiness)
    a0, mx = (
        (w.burst_size_alpha, w.burst_size_max)
        if single_gpu
        else (w.burst_multi_alpha, w.burst_multi_max)
    )
    if b <= 0.0 or mx <= 1:
        return np.ones(1)
    return zipf_pmf(1.0 + (float(a0) - 1.0) / b, int(mx))


def _ar1(n: int, sigma: float, rho: float, rng: np.random.Generator) -> np.ndarray:
    """A stationary Gaussian AR(1) path of length ``n`` (standard deviation ``sigma``)."""
    eps = rng.standard_normal(n)
    x = np.empty(n)
    if n == 0:
        return x
    x[0] = sigma * eps[0]
    scale = sigma * math.sqrt(1.0 - rho * rho)
    for i in range(1, n):  # a few thousand steps at most
        x[i] = rho * x[i - 1] + scale * eps[i]
    return x


def rate_multiplier(w: WorkloadConfig, hours: int, rng: np.random.Generator) -> np.ndarray:
    """Hourly arrival-rate multiplier, mean 1 over the ``hours``: a daily cycle times
    ``exp(X_day + X_hour)`` (two AR(1) log-rates, scaled by ``burstiness``)."""
    h = np.arange(hours, dtype=np.float64)
    m = 1.0 + w.diurnal_arrivals * np.sin(2 * np.pi * ((h + 0.5) / 24.0 - 0.25))
    b = max(float(w.burstiness), 0.0)
    if b > 0 and hours > 0:
        days = hours // 24 + 1
        x = _ar1(days, float(w.burst_day_sigma) * b, float(w.burst_day_rho), rng)[
            (h // 24).astype(np.int64)
        ]
        x = x + _ar1(hours, float(w.burst_rate_sigma) * b, float(w.burst_rate_rho), rng)
        m = m * np.exp(x - x.max())  # shifted for range; the normalisation below undoes it
    return m * (hours / m.sum()) if m.sum() > 0 else np.ones(hours)


def _batch_sizes(w: WorkloadConfig, single: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A size for each batch, from its class's Zipf law."""
    sizes = np.empty(len(single), dtype=np.int64)
    for cls in (True, False):
        m = single == cls
        pmf = batch_size_pmf(w, cls)
        sizes[m] = rng.choice(len(pmf), size=int(m.sum()), p=pmf) + 1
    return sizes


def _batch_times(
    w: WorkloadConfig, sizes: np.ndarray, horizon: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Submission times (sorted) and batch index of each job, for batches of ``sizes``.

    Batch starts are spread over the hours in proportion to :func:`rate_multiplier` (a Cox
    process given its count) and uniformly inside an hour; jobs of a batch follow its start at
    exponential gaps of mean ``burst_gap_s``.
    """
    nb = len(sizes)
    hours = max(1, int(math.ceil(horizon / 3600.0)))
    m = rate_multiplier(w, hours, rng)
    wts = m.copy()
    wts[-1] *= (horizon - 3600.0 * (hours - 1)) / 3600.0  # the last hour cut to the horizon
    hour = rng.choice(hours, size=nb, p=wts / wts.sum())
    starts = 3600.0 * hour + rng.random(nb) * np.minimum(3600.0, horizon - 3600.0 * hour)
    batch = np.repeat(np.arange(nb), sizes)
    gaps = rng.exponential(max(float(w.burst_gap_s), 0.0), len(batch))
    first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if nb else np.zeros(0, np.int64)
    gaps[first] = 0.0
    off = np.cumsum(gaps)
    off -= np.repeat(off[first], sizes)
    times = starts[batch] + off
    order = np.lexsort((np.arange(len(times)), times))
    return times[order], batch[order]


def _arrivals(
    w: WorkloadConfig,
    job_rate: float,
    horizon: float,
    n: int | None,
    rng: np.random.Generator,
    single_share: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Submission times and batch index of each job, for batches whose class (1-GPU jobs or
    not) is drawn with probability ``single_share`` (used by ``calibrate`` and the tests, which
    need arrivals without job shapes)."""
    e1, em = _mean_sizes(w)
    mean_s = single_share * e1 + (1.0 - single_share) * em
    if n is None:
        nb = int(rng.poisson(job_rate / mean_s * horizon))
        single = rng.random(nb) < single_share
        sizes = _batch_sizes(w, single, rng)
    else:
        single, sizes = _sizes_for_n(w, n, lambda k: rng.random(k) < single_share, rng)
    return _batch_times(w, sizes, horizon, rng)


def _sizes_for_n(w: WorkloadConfig, n: int, draw_single, rng: np.random.Generator):
    """Batches (class, size) until exactly ``n`` jobs: the last batch is cut."""
    singles, sizes_l = [], []
    total = 0
    while total < n:
        k = max(16, (n - total) // 2 + 16)
        sg = draw_single(k)
        sz = _batch_sizes(w, sg, rng)
        singles.append(sg)
        sizes_l.append(sz)
        total += int(sz.sum())
    single = np.concatenate(singles)
    sizes = np.concatenate(sizes_l)
    csum = np.cumsum(sizes)
    nb = int(np.searchsorted(csum, n) + 1)
    sizes = sizes[:nb].copy()
    sizes[-1] -= int(csum[nb - 1] - n)
    return single[:nb], sizes


def expected_batches(cfg: ScenarioConfig) -> float | None:
    """The mean number of batches (each of at least one job) an episode of ``cfg`` draws: the
    Poisson mean :func:`generate_jobs` draws their count from; None with ``num_jobs`` (every
    episode has exactly that many jobs) or a trace. ``exp(-expected_batches)`` is the share of
    seeds that draw no job at all."""
    w = cfg.workload
    if w.num_jobs is not None or w.trace:
        return None
    max_gpus, max_g, slots = _max_gpus(cfg), _max_g(cfg), _slots(cfg)
    rate = w.load * cfg.cluster.train_gpus / _expected_gpu_seconds(w, max_gpus, max_g, slots)
    e1, em = _mean_sizes(w)
    p_single = batch_single_share(w)
    mean_s = max(p_single * e1 + (1.0 - p_single) * em, 1e-9)
    horizon = w.duration_hours * 3600.0
    return float(rate * horizon / mean_s)


def generate_jobs(cfg: ScenarioConfig, rng: np.random.Generator) -> list[JobSpec]:
    """Draw one trace for ``cfg``; all randomness comes from ``rng``."""
    w = cfg.workload
    if w.num_jobs is not None and w.num_jobs < 1:
        raise ConfigError(f"{cfg.source}: workload.num_jobs must be >= 1, got {w.num_jobs}")
    max_gpus = _max_gpus(cfg)
    max_g = _max_g(cfg)
    slots = _slots(cfg)
    horizon = w.duration_hours * 3600.0
    if not horizon > 0:
        raise ConfigError(f"{cfg.source}: workload.duration_hours must be > 0, got {w.duration_hours}")
    # Batch shapes first (their class sets the batch-size law), then sizes, then times.
    if w.num_jobs is not None:
        shapes: list[dict[str, np.ndarray]] = []

        def draw_single(k: int) -> np.ndarray:
            d_k = _draw_jobs(w, max_gpus, max_g, k, rng, per_batch=True, slots=slots)
            shapes.append(d_k)
            return (d_k["g"] * d_k["w_req"]) == 1

        _, sizes = _sizes_for_n(w, w.num_jobs, draw_single, rng)
        d = {k: np.concatenate([x[k] for x in shapes])[: len(sizes)] for k in shapes[0]}
    else:
        mean_batches = expected_batches(cfg)
        assert mean_batches is not None
        nb = int(rng.poisson(mean_batches))
        d = _draw_jobs(w, max_gpus, max_g, nb, rng, per_batch=True, slots=slots)
        sizes = _batch_sizes(w, (d["g"] * d["w_req"]) == 1, rng)
    times, batch = _batch_times(w, sizes, horizon, rng)
    n = len(times)
    ds = float(w.burst_duration_sigma) * min(max(float(w.burstiness), 0.0), 1.0)
    scatter = np.exp(ds * rng.standard_normal(n) - 0.5 * ds * ds) if ds > 0 else np.ones(n)
    err = (
        np.exp(w.prediction_sigma * rng.standard_normal(n))
        if w.prediction_sigma > 0
        else np.ones(n)
    )
    # Heterogeneous training (paper 7.2): the last draw of the trace, so traces drawn with
    # hetero_fraction = 0 are bit-identical to those drawn before the option existed.
    het = rng.random(n) < w.hetero_fraction if w.hetero_fraction > 0 else np.zeros(n, bool)
    dur = np.clip(d["dur"][batch] * scatter, w.min_duration_s, w.max_duration_s)
    jobs: list[JobSpec] = []
    submit = np.round(times, 3).tolist()  # the same as round(times[i], 3) per float64
    # plain lists for the loop (the same values as indexing the arrays one by one)
    batch_l, dur_l, err_l, het_l = batch.tolist(), dur.tolist(), err.tolist(), het.tolist()
    el_fam_l, fam_el_l, fam_in_l = d["elastic_family"].tolist(), d["fam_el"].tolist(), d["fam_in"].tolist()
    w_req_l, elastic_l, ta_l = d["w_req"].tolist(), d["elastic"].tolist(), d["type_agnostic"].tolist()
    g_l, w_max_l = d["g"].tolist(), d["w_max"].tolist()
    for i in range(n):
        b = batch_l[i]
        el_fam = bool(el_fam_l[b])
        family = ELASTIC_FAMILIES[int(fam_el_l[b])] if el_fam else INELASTIC_FAMILIES[int(fam_in_l[b])]
        w_req = int(w_req_l[b])
        elastic = bool(elastic_l[b])
        work = float(dur_l[i]) * w_req
        ta = bool(ta_l[b])
        jobs.append(
            JobSpec(
                id=i,
                submit=submit[i],
                family=family,
                g=int(g_l[b]),
                w_min=w_req,
                w_max=int(w_max_l[b]) if elastic else w_req,
                elastic=elastic,
                type_agnostic=ta,
                work=work,
                pred_work=work * float(err_l[i]),
                w_req=w_req,
                hetero=bool(het_l[i]) and ta and elastic and el_fam,
            )
        )
    return jobs


def workload_summary(jobs: list[JobSpec], cfg: ScenarioConfig) -> dict[str, float]:
    """Figures to set beside the paper's calibration facts."""
    if not jobs:
        return {"jobs": 0}
    gt = np.array([j.work * j.g for j in jobs])  # V100 GPU-seconds (work x g)
    el = np.array([j.elastic and j.family in ELASTIC_FAMILIES for j in jobs])
    dur = np.array([j.work / j.w_req for j in jobs])  # running time at the request, V100
    span = max(j.submit for j in jobs) or 1.0
    arr = arrival_stats(np.array([j.submit for j in jobs]))
    return {
        "jobs": len(jobs),
        "span_hours": span / 3600.0,
        "offered_load": float(gt.sum() / (cfg.cluster.train_gpus * span)),
        "elastic_gpu_time_share": float(gt[el].sum() / gt.sum()),
        "elastic_mean_hours": float(dur[el].mean() / 3600.0) if el.any() else math.nan,
        "type_agnostic_share": float(np.mean([j.type_agnostic for j in jobs])),
        "one_gpu_share": float(np.mean([j.g * j.w_req == 1 for j in jobs])),
        "median_duration_s": float(np.median(dur)),
        "elastic_growth_mean": float(np.mean([j.w_max / j.w_min for j in jobs if j.elastic]))
        if any(j.elastic for j in jobs)
        else math.nan,
        "hourly_cv": arr["hourly_cv"],
        "gap_lt_10s": arr["gap_lt_10s"],
        "p99_hour_over_mean": arr["p99_hour_over_mean"],
    }


def generated_arrival_stats(w: WorkloadConfig, seeds: int = 5) -> dict[str, float]:
    """``arrival_stats`` of the generator's arrival process at the trace's rate and span, mean
    over ``seeds`` draws (seeds 0..seeds-1), so they compare with :data:`PHILLY_ARRIVAL_STATS`.

    ``w`` is a :class:`aryl_gym.config.WorkloadConfig` (its burst knobs are used).
    """
    span = PHILLY_ARRIVAL_STATS["span_days"] * 86400.0
    rate = PHILLY_ARRIVAL_STATS["jobs"] / span
    keys = ("hourly_cv", "gap_lt_10s", "p99_hour_over_mean")
    acc = {k: 0.0 for k in keys}
    for s in range(seeds):
        times, _ = _arrivals(
            w, rate, span, None, np.random.default_rng(s), single_share=batch_single_share(w)
        )
        st = arrival_stats(times)
        for k in keys:
            acc[k] += st[k] / seeds
    return acc
