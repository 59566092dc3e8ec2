"""Gavel: tab-separated ``.trace`` files with Gavel's simulation throughputs."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from aryl_gym.config import ConfigError, size_limits_lifted
from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.paths import resolve_data_path
from aryl_gym.workload.traces_formats import (
    MAX_DURATION_S,
    MAX_GPUS,
    LoadReport,
    RowChecks,
    TraceError,
    TraceRows,
    key_codes,
    parse_float,
    parse_int,
    read_bytes,
)

GAVEL_FIELDS = ["job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"]


def find_gavel_throughputs(path: Path) -> Path | None:
    for parent in list(path.parents)[:5]:
        cand = parent / "simulation_throughputs.json"
        if cand.exists():
            return cand
    return None


def load_gavel_throughputs(path: Path, gpu: str = "v100") -> dict[tuple[str, int], float]:
    if not path.exists():
        raise TraceError(path, "Gavel throughput file not found", "pass trace option throughputs=<simulation_throughputs.json>")
    try:
        data = json.loads(read_bytes(path).decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})", "give Gavel's simulation_throughputs.json") from None
    if not isinstance(data, dict) or gpu not in data:
        have = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise TraceError(path, f"no GPU type '{gpu}' (has {have})", "pick one with trace option gavel_gpu=")
    table = data[gpu]
    if not isinstance(table, dict):  # was: AttributeError ('list' object has no attribute 'items')
        raise TraceError(path, f"'{gpu}' holds a {type(table).__name__}, not a table of throughputs",
                         "give Gavel's simulation_throughputs.json ({gpu: {\"('<job_type>', <sf>)\": {\"null\": steps/s}}})")
    out: dict[tuple[str, int], float] = {}
    for key, val in table.items():
        try:
            jt, sf = ast.literal_eval(key)
            rate = val["null"]
            out[(str(jt), int(sf))] = float(rate)
        except (ValueError, SyntaxError, TypeError, KeyError):
            continue
        if not math.isfinite(out[(str(jt), int(sf))]):
            # was: NaN gave jobs of NaN work, Infinity jobs of 0 s, silently
            raise TraceError(path, f"{gpu} throughput of {key} is {rate!r}, not a finite number of steps/s",
                             "correct the entry (0 marks a configuration that cannot run)")
    return out


def read_gavel(path: Path, report: LoadReport, opts: Mapping[str, Any],
               tput: Mapping[tuple[str, int], float], skip: bool) -> TraceRows:
    """Tab-separated, no header: job_type, command, num_steps_arg, needs_data_dir, total_steps,
    arrival_time (s), scale_factor (GPUs). Duration = total_steps / V100 steps-per-second.

    Jobs whose (job_type, scale_factor) has no throughput entry (scale factors above 8; and
    Recommendation, A3C, CycleGAN, measured on 1 GPU only) use the throughput of the largest
    measured scale factor ``s0 < sf`` scaled linearly, ``tput(s0) * sf / s0`` (counted in the
    report's notes), unless ``gavel_extrapolate`` is false (then they are bad rows).
    Gavel traces are small (thousands of lines): rows are checked one by one.
    """
    extrapolate = bool(opts.get("gavel_extrapolate", True))
    allow_huge = size_limits_lifted()
    text = read_bytes(path).decode("utf-8")
    lines = text.splitlines()
    if not any(ln.strip() for ln in lines):
        raise TraceError(path, "empty file", "give a Gavel .trace file with one job per line", 1)
    chk = RowChecks(path, np.zeros(0, dtype=np.int64), report, skip)
    out: list[tuple[int, float, int, float, str, int | None, str, float]] = []
    n_extra = 0

    def bad_num(i: int, col: str, s: str, kind: str) -> Any:
        if s == "":
            chk.flag_line(i, col, "missing-value", "empty value", f"fill in '{col}'")
            return None
        try:
            return parse_int(s) if kind == "int" else parse_float(s)
        except ValueError:
            what = "an integer" if kind == "int" else "a number"
            chk.flag_line(i, col, "bad-number", f"not {what}: {s!r}", f"write '{col}' as {what}")
            return None

    for i, ln in enumerate(lines, start=1):
        if not ln.strip():
            continue
        report.rows += 1
        parts = ln.split("\t")
        if len(parts) != 7:
            if i == 1 and len(parts) == 1 and ("," in ln or ";" in ln):
                raise TraceError(path, "one field per line: the file is not tab-separated", "Gavel .trace files separate the 7 fields by tabs", 1)
            chk.flag_line(i, None, "wrong-field-count", f"{len(parts)} tab-separated fields, need 7 ({', '.join(GAVEL_FIELDS)})",
                          "use Gavel's old 7-field format (convert 10-field files)")
            continue
        jt = parts[0].strip()
        steps = bad_num(i, "total_steps", parts[4].strip(), "float")
        if steps is None:
            continue
        if not steps > 0:
            chk.flag_line(i, "total_steps", "nonpositive-duration", f"total_steps {steps:g}", "a job needs > 0 steps")
            continue
        try:
            t = parse_float(parts[5].strip())
        except ValueError:
            chk.flag_line(i, "arrival_time", "bad-time", f"not a number of seconds: {parts[5]!r}", "write arrival_time in seconds")
            continue
        sf = bad_num(i, "scale_factor", parts[6].strip(), "int")
        if sf is None:
            continue
        if sf < 1:
            chk.flag_line(i, "scale_factor", "zero-gpus", f"{sf} GPUs", "a job needs at least 1 GPU; drop or correct the row")
            continue
        if sf > MAX_GPUS:  # was: OverflowError (1e30) or a job of 1e17 GPUs
            chk.flag_line(i, "scale_factor", "huge-gpus", f"{sf:.6g} GPUs, more than {MAX_GPUS:,}",
                          "check the value; drop or correct the row")
            continue
        rate = tput.get((jt, int(sf)))
        if rate is None and extrapolate:
            below = [s for (j, s) in tput if j == jt and s < sf]
            if below:  # linear scaling from the largest measured scale factor below sf
                s0 = max(below)
                rate = tput[(jt, s0)] * sf / s0
                n_extra += 1
        if not rate or rate <= 0:
            chk.flag_line(i, "job_type", "no-throughput", f"no V100 throughput for ({jt!r}, {sf})",
                          "use a job type and scale factor listed in simulation_throughputs.json")
            continue
        base = jt.split(" (")[0]
        bs = None
        if "batch size" in jt:
            try:
                bs = int(jt.split("batch size")[1].strip(" )"))
            except ValueError:
                bs = None
        dur = steps / rate
        if not math.isfinite(dur) or (dur > MAX_DURATION_S and not allow_huge):
            # was: not checked (total_steps 1e300 gave a job of 1e299 s, the episode never ended)
            chk.flag_line(i, "total_steps", "huge-duration",
                          f"total_steps {steps:g} at {rate:g} steps/s is {dur:g} s, more than a year "
                          f"({MAX_DURATION_S:g} s)", "check total_steps (or set ARYL_GYM_ALLOW_HUGE=1)")
            continue
        out.append((i, t, int(sf), dur, base, bs, ln, steps))
    chk.finish()
    if n_extra:
        report.notes.append(
            f"{n_extra} jobs have no Gavel throughput entry for their scale factor: used the largest "
            "measured smaller scale factor's throughput scaled linearly "
            "(trace option gavel_extrapolate=false to skip them instead)"
        )
    m = len(out)
    key = key_codes([pa.array([r[6] for r in out], pa.string())]) if m else np.zeros(0, np.int64)
    models = np.array([r[4] for r in out] + [None], dtype=object)[:-1]
    return TraceRows(
        np.array([r[0] for r in out], dtype=np.int64), np.array([r[1] for r in out], dtype=np.float64),
        np.array([r[2] for r in out], dtype=np.int64), np.array([r[3] for r in out], dtype=np.float64), key,
        np.array([f"{r[4]}-L{r[0]}" for r in out] + [None], dtype=object)[:-1], model=models,
        gpu_type=np.full(m, "V100", dtype=object),
        batch_size=np.array([r[5] for r in out] + [None], dtype=object)[:-1],
        base=np.array([{"job_type": r[6].split("\t")[0].strip(), "total_steps": r[7]} for r in out] + [None], dtype=object)[:-1],
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
