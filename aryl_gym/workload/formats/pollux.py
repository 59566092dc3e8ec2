"""Pollux: the artifact's ``workload`` CSVs (``name, time, application, num_replicas,
batch_size``) with the per-application throughput profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.paths import POLLUX_PROFILES, default_data_root, resolve_data_path
from aryl_gym.workload.traces_formats import LoadReport, TraceError, TraceRows, read_pollux


def profiles_dir(p: Path, prof: Any, data_root: str | os.PathLike[str] | None,
                 report: LoadReport) -> Path:
    """The Pollux profile folder: the ``profiles`` option, else ``<workload folder>/../traces``
    (the artifact's layout), else the data root's ``traces/pollux-philly/traces``."""
    if prof:
        d = resolve_data_path(str(prof), data_root)
        if not d.is_dir():
            raise TraceError(p, f"Pollux profile folder {d} is not a folder",
                             "pass trace option profiles=<folder with bert/, cifar10/, ...> (relative to the data root)")
        return d
    beside = p.parent.parent / "traces"
    if beside.is_dir() and any((d / "placements.csv").exists() for d in beside.iterdir()):
        return beside
    root = Path(data_root) if data_root else default_data_root()
    cand = root / POLLUX_PROFILES if root is not None else None
    if cand is not None and cand.is_dir():
        report.notes.append(f"Pollux profiles from the data root ({cand}): none at {beside}")
        return cand
    raise TraceError(p, f"no Pollux profile folder at {beside} and none under the data root",
                     "pass trace option profiles=<folder with bert/, cifar10/, ...> (relative to the data root), "
                     "or --data-root DIR holding " + POLLUX_PROFILES)


def _read(req: ReadRequest) -> TraceRows:
    from aryl_gym.workload.traces_pollux import load_pollux_profiles

    prof_dir = profiles_dir(req.path, req.options.get("profiles"), req.data_root, req.report)
    return read_pollux(req.path, req.report, {**req.options, "delimiter": req.delimiter},
                       load_pollux_profiles(prof_dir), req.skip)


FORMAT = TraceFormat(
    name="pollux",
    read=_read,
    description="Pollux artifact workload CSV (name, time, application, num_replicas, batch_size)",
    time_column="time",
    guess=lambda path: "workload" in Path(path).name,
)
