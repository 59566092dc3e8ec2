"""Seeded synthetic workload generator, calibrated to the paper's facts (SPEC 4).

The ``philly-like`` generator draws each job independently:

* **Kind.** With probability ``elastic_fraction`` a job is of one of the paper's elastic families
  (resnet50, vgg16, bert, gnmt16; paper Figure 3), otherwise of an inelastic family.
  ``all_elastic`` makes every job elastic (the ``ideal`` scenario).
* **Size.** Inelastic jobs follow Philly's GPU-count distribution (per-job summary of the Philly
  trace: 93.2% 1 GPU, 2.2% 2, 2.3% 4, 2.0% 8, 0.24% 16, 0.08% 32, 0.02% 64), one worker of up to
  8 GPUs, larger jobs as several 8-GPU workers. Elastic jobs are data-parallel: 1, 2 or 4 GPUs per
  worker and 4-32 GPUs in all; their range is ``[ceil(w_max * elastic_min_fraction), w_max]``
  (paper: limited elasticity). Sizes are capped at ``max_job_gpus`` (default: the training pool).
* **Length.** Inelastic running times are log-normal with Philly's median (1,144 s) and log
  standard deviation (2.15), clipped to ``[min_duration_s, max_duration_s]``; elastic jobs' running
  time at ``w_max`` is log-normal (sigma 1) with mean ``elastic_mean_hours`` (paper: 14.2 h).
  Work = running time at ``w_max`` x ``w_max`` (V100 worker-seconds).
* **Type-agnostic** with probability ``type_agnostic_fraction`` (paper: up to 21%).
* **Arrivals.** A Poisson process whose rate follows a mild daily cycle (``diurnal_arrivals``).
  The mean rate is ``num_jobs / duration`` when ``num_jobs`` is given, else
  ``load x training GPUs / E[GPU-seconds per job]`` with the expectation estimated once by a
  fixed-seed Monte Carlo, so offered load is comparable across cluster sizes.
* **Prediction error.** ``pred_work = work x exp(N(0, prediction_sigma))`` (paper 7.5).

With the defaults, elastic families take about 36% of GPU-time (paper) at ``elastic_fraction``
0.017. ``aryl-gym calibrate`` prints the generated figures beside the paper's.
"""

from __future__ import annotations

import math

import numpy as np

from aryl_gym.config import ConfigError, ScenarioConfig, WorkloadConfig
from aryl_gym.sim.jobs import ELASTIC_FAMILIES, JobSpec

INELASTIC_FAMILIES: tuple[str, ...] = ("cnn", "lstm", "transformer", "rl", "gan")
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


def _draw_jobs(
    w: WorkloadConfig, max_gpus: int, max_g: int, n: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Draw ``n`` job shapes (no arrival times); vectorised."""
    elastic = np.ones(n, bool) if w.all_elastic else rng.random(n) < w.elastic_fraction
    el_family = rng.random(n) < (w.elastic_fraction if w.all_elastic else 1.0)
    # Inelastic-shaped draws
    tot_in = rng.choice(PHILLY_GPUS, size=n, p=PHILLY_GPU_P)
    dur_in = np.exp(np.log(w.duration_median_s) + w.duration_sigma * rng.standard_normal(n))
    # Bigger jobs run longer in Philly: scale by (GPUs)^size_duration_exponent.
    dur_in = dur_in * tot_in.astype(np.float64) ** w.size_duration_exponent
    # Elastic-shaped draws
    tot_el = rng.choice(ELASTIC_TOTAL, size=n, p=ELASTIC_TOTAL_P)
    g_el = rng.choice(ELASTIC_G, size=n, p=ELASTIC_G_P)
    mean_s = w.elastic_mean_hours * 3600.0
    dur_el = np.exp(np.log(mean_s) - 0.5 + rng.standard_normal(n))
    fam_el = rng.integers(0, len(ELASTIC_FAMILIES), n)
    fam_in = rng.integers(0, len(INELASTIC_FAMILIES), n)
    ta = rng.random(n) < w.type_agnostic_fraction

    # Elastic-family jobs use elastic shapes; with all_elastic, the others keep Philly shapes.
    use_el_shape = elastic & el_family
    total = np.where(use_el_shape, tot_el, tot_in)
    total = np.minimum(total, max_gpus)
    g = np.where(use_el_shape, np.minimum(g_el, total), np.minimum(total, max_g))
    if w.all_elastic:
        g = np.where(use_el_shape, g, 1)  # data-parallel, one GPU per worker
    g = np.maximum(g, 1)
    w_max = np.maximum(total // g, 1)
    dur = np.where(use_el_shape, dur_el, dur_in)
    dur = np.clip(dur, w.min_duration_s, w.max_duration_s)
    w_min = np.where(elastic, np.maximum(np.ceil(w_max * w.elastic_min_fraction), 1), w_max)
    return {
        "elastic": elastic,
        "elastic_family": use_el_shape,
        "g": g.astype(np.int64),
        "w_max": w_max.astype(np.int64),
        "w_min": w_min.astype(np.int64),
        "dur": dur,
        "fam_el": fam_el,
        "fam_in": fam_in,
        "type_agnostic": ta,
    }


_EXPECTED_CACHE: dict[str, float] = {}


def _expected_gpu_seconds(w: WorkloadConfig, max_gpus: int, max_g: int) -> float:
    """E[GPU-seconds per job] by a fixed-seed Monte Carlo (200k draws; deterministic)."""
    key = f"{w!r}|{max_gpus}|{max_g}"
    if key not in _EXPECTED_CACHE:
        d = _draw_jobs(w, max_gpus, max_g, 200_000, np.random.default_rng(20220215))
        _EXPECTED_CACHE[key] = float((d["g"] * d["w_max"] * d["dur"]).mean())
    return _EXPECTED_CACHE[key]


def expected_gpu_seconds(cfg: ScenarioConfig) -> float:
    return _expected_gpu_seconds(
        cfg.workload, _max_gpus(cfg), min(8, cfg.cluster.train_gpus_per_server)
    )


def _arrivals(w: WorkloadConfig, rate: float, horizon: float, n: int | None, rng) -> np.ndarray:
    """Poisson arrivals with a daily cycle by thinning; exactly ``n`` when ``n`` is given."""
    amp = w.diurnal_arrivals
    peak = rate * (1.0 + amp)
    out: list[np.ndarray] = []
    t = 0.0
    count = 0
    target = n if n is not None else None
    while True:
        m = 4096
        gaps = rng.exponential(1.0 / peak, m)
        ts = t + np.cumsum(gaps)
        acc = rng.random(m) < (1.0 + amp * np.sin(2 * np.pi * (ts / 86400.0 - 0.25))) / (1.0 + amp)
        ts_acc = ts[acc]
        if target is None:
            ts_acc = ts_acc[ts_acc < horizon]
            out.append(ts_acc)
            if ts[-1] >= horizon:
                break
        else:
            out.append(ts_acc[: target - count])
            count += len(out[-1])
            if count >= target:
                break
        t = float(ts[-1])
    arr = np.concatenate(out) if out else np.zeros(0)
    return arr


def generate_jobs(cfg: ScenarioConfig, rng: np.random.Generator) -> list[JobSpec]:
    """Draw one trace for ``cfg``; all randomness comes from ``rng``."""
    w = cfg.workload
    if w.num_jobs is not None and w.num_jobs <= 0:
        raise ConfigError(f"{cfg.source}: workload.num_jobs must be >= 1, got {w.num_jobs}")
    max_gpus = _max_gpus(cfg)
    max_g = min(8, cfg.cluster.train_gpus_per_server)
    horizon = w.duration_hours * 3600.0
    if w.num_jobs is not None:
        rate = w.num_jobs / horizon
        times = _arrivals(w, rate, horizon, w.num_jobs, rng)
        if len(times) and times[-1] > 0:
            times = times * (horizon / max(times[-1], horizon))
    else:
        rate = w.load * cfg.cluster.train_gpus / _expected_gpu_seconds(w, max_gpus, max_g)
        times = _arrivals(w, rate, horizon, None, rng)
    n = len(times)
    d = _draw_jobs(w, max_gpus, max_g, n, rng)
    err = (
        np.exp(w.prediction_sigma * rng.standard_normal(n))
        if w.prediction_sigma > 0
        else np.ones(n)
    )
    jobs: list[JobSpec] = []
    for i in range(n):
        el_fam = bool(d["elastic_family"][i])
        family = (
            ELASTIC_FAMILIES[int(d["fam_el"][i])]
            if el_fam
            else INELASTIC_FAMILIES[int(d["fam_in"][i])]
        )
        wmax = int(d["w_max"][i])
        elastic = bool(d["elastic"][i]) and True
        work = float(d["dur"][i]) * wmax
        jobs.append(
            JobSpec(
                id=i,
                submit=float(round(times[i], 3)),
                family=family,
                g=int(d["g"][i]),
                w_min=int(d["w_min"][i]) if elastic else wmax,
                w_max=wmax,
                elastic=elastic,
                type_agnostic=bool(d["type_agnostic"][i]),
                work=work,
                pred_work=work * float(err[i]),
            )
        )
    return jobs


def workload_summary(jobs: list[JobSpec], cfg: ScenarioConfig) -> dict[str, float]:
    """Figures to set beside the paper's calibration facts."""
    if not jobs:
        return {"jobs": 0}
    gt = np.array([j.work * j.g for j in jobs])  # V100 GPU-seconds (work x g)
    el = np.array([j.elastic and j.family in ELASTIC_FAMILIES for j in jobs])
    dur = np.array([j.work / j.w_max for j in jobs])
    span = max(j.submit for j in jobs) or 1.0
    return {
        "jobs": len(jobs),
        "span_hours": span / 3600.0,
        "offered_load": float(gt.sum() / (cfg.cluster.train_gpus * span)),
        "elastic_gpu_time_share": float(gt[el].sum() / gt.sum()),
        "elastic_mean_hours": float(dur[el].mean() / 3600.0) if el.any() else math.nan,
        "type_agnostic_share": float(np.mean([j.type_agnostic for j in jobs])),
        "one_gpu_share": float(np.mean([j.g * j.w_max == 1 for j in jobs])),
        "median_duration_s": float(np.median(dur)),
    }
