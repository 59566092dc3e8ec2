"""``aryl-gym fit-world``: re-fit World v1's data-driven knobs from the public traces.

Prints each fitted figure beside the default in ``WorkloadConfig``, so where a default comes from
can be checked (:mod:`aryl_gym.workload.fit`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aryl_gym.commands._common import add_data_root_arg, table
from aryl_gym.config import ConfigError, WorkloadConfig
from aryl_gym.sim.goodput import APP_CURVES

NAME = "fit-world"
HELP = ("re-fit the data-driven knobs (arrival burstiness, elastic range, elastic count share, "
        "goodput curves) from philly.csv and the Pollux profiles")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_data_root_arg(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.workload import fit
    from aryl_gym.workload.paths import POLLUX_PROFILES, default_data_root

    root = Path(args.data_root) if args.data_root else default_data_root()
    if root is None:
        raise ConfigError(
            "no data root: pass --data-root DIR (the folder that holds traces/) or set ARYL_GYM_DATA"
        )
    philly = root / fit.PHILLY_CSV
    profiles = root / POLLUX_PROFILES
    for p in (philly, profiles):
        if not p.exists():
            raise ConfigError(f"{p}: not found; check --data-root (the folder that holds traces/)")
    times, durs, gpus = fit.read_philly(philly)
    af = fit.fit_arrivals(times, durs, gpus)
    stats = fit.arrival_stats(times)
    er = fit.fit_elastic_range(profiles)
    ecs = fit.fit_elastic_count_share(durs, gpus)
    curves = fit.fit_app_curves(profiles)
    d = WorkloadConfig()
    rows = [
        ("burst_size_alpha", af.size_alpha, d.burst_size_alpha),
        ("burst_size_max", af.size_max, d.burst_size_max),
        ("burst_multi_alpha", af.multi_alpha, d.burst_multi_alpha),
        ("burst_multi_max", af.multi_max, d.burst_multi_max),
        ("burst_gap_s", af.gap_s, d.burst_gap_s),
        ("burst_rate_sigma", af.rate_sigma, d.burst_rate_sigma),
        ("burst_rate_rho", af.rate_rho, d.burst_rate_rho),
        ("burst_day_sigma", af.day_sigma, d.burst_day_sigma),
        ("burst_day_rho", af.day_rho, d.burst_day_rho),
        ("burst_duration_sigma", af.duration_sigma, d.burst_duration_sigma),
        ("elastic_range", er["median"], d.elastic_range),
        ("elastic_fraction", round(ecs["multi_gpu"], 3), d.elastic_fraction),
    ]
    if args.json:
        print(json.dumps({
            "fitted": {k: v for k, v, _ in rows},
            "defaults": {k: dv for k, _, dv in rows},
            "elastic_range_per_app": er["per_app"],
            "elastic_count_share": ecs,
            "goodput_curves": {a: {k: v for k, v in c.items()} for a, c in curves.items()},
            "philly_arrival_stats": stats,
            "batches": af.batches,
        }))
        return 0
    print(table([[k, v, dv, "yes" if abs(float(v) - float(dv)) <= 1e-3 * max(1.0, abs(float(dv)))
                  else "NO"] for k, v, dv in rows],
                ["knob", "fitted", "default", "same"]))
    print("\nelastic range per application (largest power-of-two growth at >= 80% per-GPU "
          "throughput): " + ", ".join(f"{a} {r:g}" for a, r in er["per_app"].items()))
    print("philly.csv arrivals: " + ", ".join(f"{k} {v:.4g}" for k, v in stats.items()))
    print(f"elastic count share (World v2; 36% of GPU-time spread over multi-GPU jobs by GPU-time): "
          f"{ecs['multi_gpu']:.4f} over all multi-GPU jobs (the default), "
          f"{ecs['long_multi_gpu']:.4f} over those of 1 h or more")
    same = all(
        all(abs(a - b) <= 1e-4 * max(abs(b), 1e-12) for a, b in zip(
            (APP_CURVES[app].alpha_c, APP_CURVES[app].beta_c, APP_CURVES[app].alpha_n,
             APP_CURVES[app].beta_n, APP_CURVES[app].alpha_r, APP_CURVES[app].beta_r,
             APP_CURVES[app].gamma), c["params"]))
        for app, c in curves.items()
    )
    print("goodput curves (Pollux's throughput model, log-RMSE per app): "
          + ", ".join(f"{a} {c['rmsle']:.3f}" for a, c in curves.items())
          + f"; same as aryl_gym.sim.goodput: {'yes' if same else 'NO'}")
    return 0
