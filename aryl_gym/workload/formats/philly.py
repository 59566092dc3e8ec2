"""Philly: Microsoft's ``cluster_job_log``-derived CSV (``timestamp, duration, num_gpus,
gpu_time, cluster``), absolute submit times, always sorted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.traces_formats import (
    LoadReport,
    RowChecks,
    TraceError,
    TraceRows,
    as_i64,
    duration_check,
    gpus_check,
    key_codes,
    num_checks,
    obj,
    read_csv_table,
    to_datetime,
    width_checks,
)

PHILLY_COLUMNS = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]


def read_philly(path: Path, report: LoadReport, opts: Mapping[str, Any], skip: bool) -> TraceRows:
    """``timestamp,duration,num_gpus,gpu_time,cluster``; filter by ``vc`` (one id or a list)."""
    vcs = opts.get("vc")
    vc_set = None
    if vcs:
        vc_set = {vcs} if isinstance(vcs, str) else set(vcs)
        vc_set = {v.strip() for s in vc_set for v in str(s).split(",") if v.strip()}
    tab = read_csv_table(path, PHILLY_COLUMNS, opts.get("delimiter", ","), report, opts.get("filter"))
    all_vcs = Counter(tab.cols["cluster"].to_pylist()) if vc_set is not None else Counter()
    if vc_set is not None:
        keep = np.asarray(pc.is_in(tab.cols["cluster"], value_set=pa.array(sorted(vc_set), pa.string())), dtype=bool)
        report.filtered["other virtual cluster"] += int((~keep).sum())
        tab = tab.take(keep)
    c = tab.cols
    chk = RowChecks(path, tab.lines, report, skip)
    width_checks(chk, tab)
    t, t_empty, t_bad, t_msg = to_datetime(c["timestamp"])
    chk.flag(t_empty, "timestamp", "missing-value", lambda i: "empty value", "fill in 'timestamp'")
    chk.flag(t_bad, "timestamp", "bad-time", lambda i: t_msg[i], "use 'YYYY-MM-DD HH:MM:SS'")
    d = num_checks(chk, c["duration"], "duration")
    duration_check(chk, "duration", d)
    g = num_checks(chk, c["num_gpus"], "num_gpus", "int")
    gpus_check(chk, "num_gpus", g)
    gt = num_checks(chk, c["gpu_time"], "gpu_time")
    with np.errstate(invalid="ignore"):
        incons = np.abs(gt - d * g) > 1e-6 * np.maximum(1.0, gt) + 1e-3
    chk.flag(incons, "gpu_time", "inconsistent",
             lambda i: f"gpu_time {gt[i]:g} != duration {d[i]:g} x num_gpus {int(g[i])}",
             "correct duration, num_gpus or gpu_time so that gpu_time = duration * num_gpus")
    ok = chk.finish()
    if vc_set is not None:
        unknown = sorted(vc_set - set(all_vcs))
        if unknown:
            known = ", ".join(f"{k} ({n})" for k, n in all_vcs.most_common())
            raise TraceError(path, f"virtual cluster '{unknown[0]}' has no rows",
                             f"pick one of: {known}", column="cluster")
    key = key_codes([c["timestamp"], c["duration"], c["num_gpus"], c["cluster"]])
    vc = obj(c["cluster"])
    lines = tab.lines
    bases = {v: {"vc": v} for v in set(vc.tolist())}
    idx = np.flatnonzero(ok)
    name = np.array([f"philly-{v}-L{ln}" for v, ln in zip(vc[idx].tolist(), lines[idx].tolist())] or [], dtype=object)
    base = np.array([bases[v] for v in vc[idx].tolist()] + [None], dtype=object)[:-1]
    return TraceRows(lines[idx], t[idx], as_i64(g[idx]), d[idx], key[idx], name, base=base)


def _read(req: ReadRequest) -> TraceRows:
    return read_philly(req.path, req.report, {**req.options, "delimiter": req.delimiter}, req.skip)


FORMAT = TraceFormat(
    name="philly",
    read=_read,
    description="Philly job log (timestamp, duration, num_gpus, gpu_time, cluster)",
    time_column="timestamp",
    absolute_time=lambda tmap: True,
    always_sort=True,
    guess=lambda path: Path(path).name == "philly.csv",
)
