"""Gavel: tab-separated ``.trace`` files with Gavel's simulation throughputs."""

from __future__ import annotations

from aryl_gym.config import ConfigError
from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.paths import resolve_data_path
from aryl_gym.workload.traces_formats import (
    TraceError,
    TraceRows,
    find_gavel_throughputs,
    load_gavel_throughputs,
    read_gavel,
)


def _read(req: ReadRequest) -> TraceRows:
    p, options = req.path, req.options
    if options.get("filter"):
        raise ConfigError(f"{p}: trace option filter needs a headed CSV (philly, pollux, csv); "
                          "Gavel .trace files have no column names: drop the filter")
    tp = options.get("throughputs")
    tp_path = resolve_data_path(str(tp), req.data_root) if tp else find_gavel_throughputs(p)
    if tp_path is None:
        raise TraceError(p, "no simulation_throughputs.json beside the trace",
                         "pass trace option throughputs=<path to Gavel's simulation_throughputs.json>")
    gpu = options.get("gavel_gpu", "v100")
    return read_gavel(p, req.report, options, load_gavel_throughputs(tp_path, gpu), req.skip)


FORMAT = TraceFormat(
    name="gavel",
    read=_read,
    description="Gavel .trace (job type, command, steps, arrival time, scale factor)",
    time_column="arrival_time",
    guess=lambda path: path.endswith(".trace"),
)
