"""Generic CSV: any headed CSV with a column mapping (``--map FILE.yaml`` or ``--columns``)."""

from __future__ import annotations

from aryl_gym.config import ConfigError
from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.traces_formats import TraceRows, read_generic


def _read(req: ReadRequest) -> TraceRows:
    cols = dict(req.tmap.columns)
    missing = [k for k in ("submit", "gpus") if not cols.get(k)]
    if not cols.get("duration") and not (cols.get("start") and cols.get("end")):
        missing.append("duration (or start and end)")
    if missing:
        raise ConfigError(
            f"{req.path}: csv format needs a column mapping for {', '.join(missing)}; pass --map FILE.yaml "
            "(columns: {submit: ..., gpus: ..., duration: ...}) or --columns submit=COL,gpus=COL,duration=COL"
        )
    spec = {"columns": cols, "units": dict(req.tmap.units), "delimiter": req.delimiter,
            "filter": req.options.get("filter"),
            "fractional_gpus": req.options.get("fractional_gpus", "error")}
    return read_generic(req.path, req.report, spec, req.skip)


FORMAT = TraceFormat(
    name="csv",
    read=_read,
    description="any headed CSV with a column mapping (--map FILE.yaml or --columns)",
    absolute_time=lambda tmap: tmap.units.get("time") == "datetime",
)
