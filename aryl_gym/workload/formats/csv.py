"""Generic CSV: any headed CSV with a column mapping (``--map FILE.yaml`` or ``--columns``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.config import ConfigError
from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.traces_formats import (
    GPU_UNITS,
    TIME_UNITS,
    LoadReport,
    RowChecks,
    TraceRows,
    as_i64,
    duration_check,
    empty_mask,
    gpus_check,
    key_codes,
    num_checks,
    obj,
    read_csv_table,
    to_datetime,
    to_float,
    width_checks,
)


def read_generic(path: Path, report: LoadReport, spec: Mapping[str, Any], skip: bool) -> TraceRows:
    """A user's CSV; ``spec`` = the map's ``columns``/``units``/``delimiter``, the trace
    options ``filter`` and ``fractional_gpus`` (see docs/traces.md)."""
    cols: Mapping[str, str] = spec["columns"]
    units: Mapping[str, Any] = spec.get("units", {})
    tu = units.get("time", "s")
    du = units.get("duration", "s")
    tfmt = units.get("time_format")
    gpu_default = units.get("gpu_type")
    per_gpu = GPU_UNITS[units.get("gpus", "count")]
    frac_rule = spec.get("fractional_gpus", "error")
    required = [cols["submit"], cols["gpus"]]
    if cols.get("duration"):
        required.append(cols["duration"])
    else:
        required += [cols["start"], cols["end"]]
    for k in ("gpu_milli", "model", "gpu_type", "id", "name"):
        if cols.get(k):
            required.append(cols[k])
    tab = read_csv_table(path, required, spec.get("delimiter", ","), report, spec.get("filter"))
    c = tab.cols
    chk = RowChecks(path, tab.lines, report, skip)
    width_checks(chk, tab)

    def tparse(col: str) -> np.ndarray:
        a = c[col]
        if tu == "datetime":
            v, empty, bad, msgs = to_datetime(a, tfmt)
            chk.flag(empty, col, "missing-value", lambda i: "empty value", f"fill in '{col}'")
            chk.flag(bad, col, "bad-time", lambda i: msgs[i],
                     f"write '{col}' as {tfmt or 'YYYY-MM-DD HH:MM:SS'} or set units.time")
            return v
        v, empty, bad = to_float(a)
        chk.flag(empty, col, "missing-value", lambda i: "empty value", f"fill in '{col}'")
        chk.flag(bad, col, "bad-time", lambda i: f"not a number of {tu}: {a[i].as_py()!r}",
                 f"write '{col}' as a number of {tu}, or set units.time: datetime (with time_format)")
        return v * TIME_UNITS[tu]

    t = tparse(cols["submit"])
    gcol = cols["gpus"]
    if per_gpu == 1 and not cols.get("gpu_milli"):
        g = num_checks(chk, c[gcol], gcol, "int")
    else:
        graw = num_checks(chk, c[gcol], gcol, "float")
        neg_fix = "a GPU count or share cannot be negative; drop or correct the row"
        with np.errstate(invalid="ignore"):
            # was: -2 GPUs x gpu_milli -1000 made 2 GPUs, and -500 milli-GPUs read "0 GPUs"
            chk.flag(graw < 0, gcol, "zero-gpus", lambda i: f"negative value {graw[i]:g}", neg_fix)
        share = np.ones(len(tab))
        if cols.get("gpu_milli"):
            mcol = cols["gpu_milli"]
            share = num_checks(chk, c[mcol], mcol) / 1000.0
            with np.errstate(invalid="ignore"):
                chk.flag(share < 0, mcol, "zero-gpus", lambda i: f"negative value {share[i] * 1000:g}", neg_fix)
        with np.errstate(invalid="ignore"):
            total = graw / per_gpu * share
            whole = np.round(total)
            frac = np.isfinite(total) & (np.abs(total - whole) > 1e-9) & (total > 0)
        fcol = cols.get("gpu_milli") or gcol
        if frac_rule == "ceil":
            nfrac = int((frac & chk.ok).sum())
            if nfrac:
                # the example is the trace's own first such request (was: always "0.46")
                first = float(total[np.flatnonzero(frac & chk.ok)[0]])
                report.notes.append(f"{nfrac} jobs ask for a fraction of a GPU (e.g. {first:g}): counted as "
                                    "whole GPUs, rounded up (fractional_gpus=ceil)")
            g = np.where(frac, np.ceil(total - 1e-9), whole)
        else:
            chk.flag(frac, fcol, "fractional-gpu", lambda i: f"asks for {total[i]:g} GPUs (a fraction of a GPU)",
                     "aryl-gym allocates whole GPUs: drop such rows (--skip-bad-rows) or set trace option "
                     "fractional_gpus=ceil to round them up")
            g = whole
    gpus_check(chk, gcol, g)
    if cols.get("duration"):
        dcol = cols["duration"]
        d = num_checks(chk, c[dcol], dcol) * TIME_UNITS[du]
    else:
        s = tparse(cols["start"])
        e = tparse(cols["end"])
        d, dcol = e - s, cols["end"]
        with np.errstate(invalid="ignore"):
            sb = s < t
        chk.flag(sb, cols["start"], "start-before-submit", lambda i: f"start {s[i]:g} is before submit {t[i]:g}",
                 "a job starts at or after its submission; check the columns")
    duration_check(chk, dcol, d)
    ok = chk.finish()
    idx = np.flatnonzero(ok)
    lines = tab.lines[idx]

    def col_or_none(role: str) -> np.ndarray | None:
        return obj(c[cols[role]])[idx] if cols.get(role) else None

    model = col_or_none("model")
    if model is not None:
        model[model == ""] = None
    gtype = col_or_none("gpu_type")
    if gtype is None:
        gtype = np.full(idx.size, gpu_default or None, dtype=object)
    else:
        gtype[gtype == ""] = gpu_default or None
    if cols.get("id"):
        ida = c[cols["id"]]
        has_id = ~empty_mask(ida)
        key = key_codes([ida])
        if not has_id.all():  # rows without an id: identity is the whole row
            k_row = key_codes([c[h] for h in tab.header if h in c])
            key = np.where(has_id, key, key.max(initial=0) + 1 + k_row)
    else:
        key = key_codes([c[h] for h in tab.header if h in c])
    if cols.get("name"):
        name = obj(c[cols["name"]])[idx]
    else:
        ident = col_or_none("id")
        name = np.array([(ident[j] if ident is not None and ident[j] else f"job-L{ln}")
                         for j, ln in enumerate(lines.tolist())] + [None], dtype=object)[:-1]
    return TraceRows(lines, t[idx], as_i64(g[idx]), d[idx], key[idx], name, model=model, gpu_type=gtype)


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
