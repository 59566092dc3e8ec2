"""Trace-loader benchmark (``aryl-gym bench --only traces``).

Each case writes a trace into a temporary folder and loads it with
:func:`aryl_gym.workload.traces.load_trace` in a fresh Python process, which reports its wall
time, CPU time (what a busy machine does not inflate) and its peak resident memory (``ru_maxrss``; the interpreter with numpy, pyarrow and
aryl_gym imported is part of it). Cases:

* ``pollux 1M``: 1,000,000 rows in the Pollux workload format (``name,time,application,
  num_replicas,batch_size``), configurations drawn from the shared Pollux workloads (needs the
  data root's ``traces/pollux-philly``). Target: <= 5 s and <= 1 GB.
* ``pollux 1M unsorted``: the same file with two rows swapped near the end: the load must fail on
  the unsorted row (exit as a ``TraceError``) in seconds.
* ``csv 540k``: 540,000 rows of a generic CSV (``job_id,submitted,n_gpus,runtime_min,arch``)
  with a column mapping.
* ``philly.csv``: the shared Philly summary (82k rows), default options with duplicates kept.

With ``quick`` the row counts are 10x smaller.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.workload.paths import default_data_root

Rows = list[dict[str, Any]]

_CHILD = r"""
import json, resource, sys, time
import os
if os.environ.get("ARYL_BENCH_LOADER"):  # compare another loader (a module with load_trace)
    import importlib
    _m = importlib.import_module(os.environ["ARYL_BENCH_LOADER"])
    load_trace, TraceError = _m.load_trace, _m.TraceError
else:
    from aryl_gym.workload.traces import load_trace, TraceError
import pyarrow  # noqa: F401  (imported up front so both loaders pay it alike)
args = json.loads(sys.argv[1])
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tic, cpu0 = time.perf_counter(), time.process_time()
err = None
try:
    jobs, rep = load_trace(args["path"], args["fmt"], data_root=args.get("data_root"), **args["opts"])
    n = len(jobs)
except TraceError as exc:
    n, err = 0, str(exc)[:160]
wall, cpu = time.perf_counter() - tic, time.process_time() - cpu0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": rss / 1024, "rss0_mb": rss0 / 1024, "jobs": n, "error": err}))
"""


def _pollux_configs(data_root: Path) -> list[tuple[str, int, int]]:
    rows: set[tuple[str, int, int]] = set()
    for f in sorted((data_root / "traces/pollux-philly").glob("workloads*/workload-*.csv")):
        for ln in f.read_text(encoding="utf-8").splitlines()[1:]:
            parts = ln.split(",")
            if len(parts) == 5:
                rows.add((parts[2], int(parts[3]), int(parts[4])))
    return sorted(rows)


def write_pollux(path: Path, n: int, configs: list[tuple[str, int, int]], seed: int = 0,
                 swap_near_end: bool = False) -> None:
    """``n`` Pollux-format rows, times increasing; optionally two rows swapped near the end."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(configs), n)
    times = np.cumsum(rng.integers(0, 30, n))
    if swap_near_end and n > 10:
        i = n - 5
        times[i], times[i + 1] = times[i + 1] + 1, times[i]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("name,time,application,num_replicas,batch_size\n")
        for k in range(0, n, 100_000):
            chunk = []
            for i in range(k, min(n, k + 100_000)):
                a, r, b = configs[pick[i]]
                chunk.append(f"{a}-{i},{times[i]},{a},{r},{b}\n")
            fh.write("".join(chunk))


def write_generic(path: Path, n: int, seed: int = 0) -> None:
    """``n`` rows of ``job_id,submitted,n_gpus,runtime_min,arch`` (sorted submit seconds)."""
    rng = np.random.default_rng(seed)
    sub = np.cumsum(rng.integers(0, 20, n))
    gpus = rng.choice([1, 1, 1, 2, 4, 8, 16], n)
    dur = np.round(rng.lognormal(3.0, 1.5, n), 2) + 0.5
    arch = np.array(["ResNet-50", "BERT", "LM", "VGG16", "cnn"])[rng.integers(0, 5, n)]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("job_id,submitted,n_gpus,runtime_min,arch\n")
        for k in range(0, n, 100_000):
            fh.write("".join(f"j{i},{sub[i]},{gpus[i]},{dur[i]},{arch[i]}\n"
                             for i in range(k, min(n, k + 100_000))))


def _measure(path: str, fmt: str, opts: dict[str, Any], data_root: str | None) -> dict[str, Any]:
    arg = json.dumps({"path": path, "fmt": fmt, "opts": opts, "data_root": data_root})
    out = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"wall": float("nan"), "cpu": float("nan"), "rss_mb": float("nan"), "rss0_mb": float("nan"), "jobs": 0,
                "error": (out.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_traces(quick: bool = False) -> Rows:
    root = default_data_root()
    scale = 10 if quick else 1
    rows: Rows = []

    def row(case: str, target: str, m: dict[str, Any]) -> None:
        rows.append({"case": case, "jobs": m["jobs"], "wall s": m["wall"], "cpu s": m["cpu"],
                     "peak RSS MB": m["rss_mb"],
                     "RSS before load MB": m["rss0_mb"], "target": target,
                     "error": (m["error"] or "")[:90]})

    with tempfile.TemporaryDirectory(prefix="aryl-bench-traces-") as tmp:
        d = Path(tmp)
        pollux_ok = root is not None and (root / "traces/pollux-philly/traces").is_dir()
        if pollux_ok:
            assert root is not None
            cfgs = _pollux_configs(root)
            prof = str(root / "traces/pollux-philly/traces")
            n = 1_000_000 // scale
            write_pollux(d / "pollux.csv", n, cfgs)
            row(f"pollux {n:,} rows", "<= 5 s, <= 1 GB",
                _measure(str(d / "pollux.csv"), "pollux", {"profiles": prof}, None))
            write_pollux(d / "pollux-unsorted.csv", n, cfgs, swap_near_end=True)
            row(f"pollux {n:,} rows, unsorted", "fails in seconds",
                _measure(str(d / "pollux-unsorted.csv"), "pollux", {"profiles": prof}, None))
        n = 540_000 // scale
        write_generic(d / "generic.csv", n)
        row(f"csv {n:,} rows", "",
            _measure(str(d / "generic.csv"), "csv",
                     {"columns": {"submit": "submitted", "gpus": "n_gpus", "duration": "runtime_min",
                                  "model": "arch", "id": "job_id"},
                      "units": {"duration": "min"}}, None))
        if root is not None and (root / "traces/pollux-philly/traces/philly.csv").exists():
            row("philly.csv (duplicates kept)", "",
                _measure("traces/pollux-philly/traces/philly.csv", "philly", {"duplicates": "keep"},
                         str(root)))
    return rows


if __name__ == "__main__":  # pragma: no cover
    for r in bench_traces("--quick" in sys.argv):
        print(r)
