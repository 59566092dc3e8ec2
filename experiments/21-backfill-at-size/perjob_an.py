"""Where the extra JCT of ppo-v1 over Aryl goes, by job class, from perjob.py's JSON."""

from __future__ import annotations

import json
import sys

import numpy as np


def main() -> None:
    with open(sys.argv[1]) as fh:
        d = json.load(fh)
    jobs = d["jobs"]
    n = len(jobs)
    g = np.array([j["g"] for j in jobs])
    wreq = np.array([j["w_req"] for j in jobs])
    el = np.array([j["elastic"] for j in jobs])
    ta = np.array([j["ta"] for j in jobs])
    work = np.array([j["work"] for j in jobs])
    gpus = g * wreq
    run_h = work / np.maximum(wreq, 1) / 3600  # hours at the request (linear scaling)

    def per_job(p: str) -> tuple[np.ndarray, ...]:
        a = d[p]
        sub, fs, fin = (np.array(a[k]) for k in ("submit", "first_start", "finish"))
        return fin - sub, fs - sub, np.array(a["running_time"]), np.array(a["preempt"]), np.array(a["scale"])

    A, P = per_job("aryl"), per_job("ppo-v1")
    diff = P[0] - A[0]
    tot = np.nansum(diff)
    print(f"jobs {n}; avg JCT aryl {np.nanmean(A[0]):.0f}, ppo-v1 {np.nanmean(P[0]):.0f}; "
          f"queue diff {np.nanmean(P[1] - A[1]):.0f} s, running-time diff {np.nanmean(P[2] - A[2]):.0f} s")
    print(f"preemptions {A[3].sum()} / {P[3].sum()}, scaling events {A[4].sum()} / {P[4].sum()}")

    def group(name: str, m: np.ndarray) -> None:
        if not m.any():
            return
        print(f"{name:26s} n={m.sum():6d} share of extra JCT {np.nansum(diff[m]) / tot:6.1%}  "
              f"JCT {np.nanmean(A[0][m]):8.0f} / {np.nanmean(P[0][m]):8.0f}  "
              f"queue {np.nanmean(A[1][m]):7.0f} / {np.nanmean(P[1][m]):7.0f}  "
              f"run {np.nanmean(A[2][m]):8.0f} / {np.nanmean(P[2][m]):8.0f}")

    group("all", np.ones(n, bool))
    group("elastic", el)
    group("inelastic", ~el)
    group("type-agnostic", ta)
    group("training-only", ~ta)
    for lo, hi in ((1, 1), (2, 4), (5, 8), (9, 16), (17, 64)):
        group(f"GPUs {lo}-{hi}", (gpus >= lo) & (gpus <= hi))
    edges = [0.0, *np.quantile(run_h, [0.5, 0.8, 0.95, 0.99]), np.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        group(f"hours at request {lo:.2f}-{hi:.2f}", (run_h >= lo) & (run_h < hi))


if __name__ == "__main__":
    main()
