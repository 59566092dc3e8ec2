"""Philly: Microsoft's ``cluster_job_log``-derived CSV (``timestamp, duration, num_gpus,
gpu_time, cluster``), absolute submit times, always sorted."""

from __future__ import annotations

from pathlib import Path

from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.traces_formats import TraceRows, read_philly


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
