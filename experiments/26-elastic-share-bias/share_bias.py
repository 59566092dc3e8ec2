"""Where the elastic families' GPU-time share of a generated trace comes from.

The generator scales elastic requests (``elastic_size_scale``) so that a fixed-seed Monte Carlo
sample of 100,000 job shapes gives the elastic families ``workload.elastic_gpu_share`` (36%) of
GPU-time at the request. This script measures, for one scenario, the share under four
estimators and in the generated traces themselves:

1. the calibration's own sample (100k shapes, seed 20221202): the target by construction;
2. other 100k samples (seeds 1-4): the estimator's sampling error;
3. a 4M-shape sample: the expectation the 100k sample estimates;
4. (3) with the per-job duration scatter and clip that the trace applies after the shapes;
5. the traces of seeds 0..N-1 (``make_episode``): per-seed shares, their mean, the share
   pooled over all their jobs, and the elastic jobs' mean running time at the request.

With ``--sample trace`` the traces are drawn with ``workload.elastic_share_sample: trace`` (the
calibration on the trace's own shapes) instead of World v2's default.

Usage: python experiments/26-elastic-share-bias/share_bias.py [--scenario production] [--seeds 12]
       [--sample shapes-100k|trace] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from aryl_gym.config import load_scenario
from aryl_gym.scenario import make_episode
from aryl_gym.workload import generator as gen


def _share(d: dict[str, np.ndarray], scale: float, max_gpus: int, scatter: tuple | None = None) -> float:
    """The generator's share (``generator._share_of``), optionally after the trace's per-job
    duration scatter (mean 1) and clip, drawn here from the given generator."""
    if scatter is not None:
        sigma, lo, hi, rng = scatter
        dur = np.clip(d["dur"] * np.exp(sigma * rng.standard_normal(len(d["dur"])) - 0.5 * sigma * sigma), lo, hi)
        d = {**d, "dur": dur}
    return gen._share_of(d, max_gpus, scale)


def measure(scenario: str, seeds: int, sample: str = "shapes-100k") -> dict[str, object]:
    cfg = load_scenario(scenario).replace(workload={"elastic_share_sample": sample})
    w = cfg.workload
    if w.elastic_gpu_share is None:
        raise SystemExit(f"{scenario}: workload.elastic_gpu_share is not set; nothing is calibrated")
    max_gpus = gen._max_gpus(cfg)
    max_g = min(8, cfg.cluster.train_gpus_per_server)
    scale = gen.elastic_size_scale(w, max_gpus, max_g)
    w1 = dataclasses.replace(w, elastic_gpu_share=None)
    sigma = float(w.burst_duration_sigma) * min(max(float(w.burstiness), 0.0), 1.0)
    out: dict[str, object] = {"scenario": scenario, "elastic_share_sample": sample,
                              "target": w.elastic_gpu_share, "scale": scale}
    draw = lambda n, s: gen._draw_jobs(w1, max_gpus, max_g, n, np.random.default_rng(s))  # noqa: E731
    out["calibration_sample_100k"] = _share(draw(100_000, 20221202), scale, max_gpus)
    out["other_100k_samples"] = [_share(draw(100_000, s), scale, max_gpus) for s in (1, 2, 3, 4)]
    big = draw(4_000_000, 5)
    out["sample_4m"] = _share(big, scale, max_gpus)
    out["sample_4m_scatter_clip"] = _share(big, scale, max_gpus,
                                           (sigma, w.min_duration_s, w.max_duration_s, np.random.default_rng(9)))
    per_seed, hours, el_t, all_t = [], [], 0.0, 0.0
    for s in range(seeds):
        jobs = make_episode(cfg, s).jobs
        gt = np.array([j.work * j.g for j in jobs])  # GPU-seconds at the request (work = dur x w_req)
        el = np.array([j.elastic and j.family in gen.ELASTIC_FAMILIES for j in jobs])
        per_seed.append(float(gt[el].sum() / gt.sum()))
        hours.append(float(np.mean([j.work / j.w_req for j, e in zip(jobs, el) if e])) / 3600.0)
        el_t += float(gt[el].sum())
        all_t += float(gt.sum())
    a = np.array(per_seed)
    out["trace_per_seed"] = per_seed
    out["trace_mean"] = float(a.mean())
    out["trace_mean_se"] = float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) > 1 else math.nan
    out["trace_pooled"] = el_t / all_t
    out["trace_elastic_mean_hours"] = float(np.mean(hours))  # paper: 14.2 h (workload.elastic_mean_hours)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="production")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--sample", default="shapes-100k", choices=["shapes-100k", "trace"],
                    help="workload.elastic_share_sample of the traces measured (default: World v2's)")
    a = ap.parse_args()
    r = measure(a.scenario, a.seeds, a.sample)
    for k, v in r.items():
        print(f"{k:28s} {v if not isinstance(v, float) else f'{v:.4f}'}")
    if a.json:
        a.json.write_text(json.dumps(r, indent=1) + "\n")


if __name__ == "__main__":
    main()
