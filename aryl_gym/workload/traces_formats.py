"""Row readers for the trace formats; each turns a file into validated :class:`TraceRow` s.

Readers check *rows* (fields present, numbers and times parse, positive durations and GPU
counts, consistency such as Philly's ``gpu_time == duration * num_gpus``); the order, duplicate,
window and size checks that every format shares live in :mod:`aryl_gym.workload.traces`. A bad
row goes to :meth:`RowSink.bad`, which raises a :class:`TraceError` naming the file, line and
column and the fix, or, with ``skip_bad_rows``, counts the row under its reason and moves on.
File-level problems (missing file or column, empty file, wrong delimiter) always raise.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError

SKIP_HINT = "or pass --skip-bad-rows (skip_bad_rows=True) to skip such rows and count them"


class TraceError(ConfigError):
    """A trace file is invalid; the message names file, line, column and the fix."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        fix: str,
        line: int | None = None,
        column: str | None = None,
        reason: str = "",
    ):
        self.path, self.line, self.column, self.reason, self.fix = str(path), line, column, reason, fix
        where = f"{path}:{line}" if line is not None else f"{path}"
        col = f": column '{column}'" if column else ""
        super().__init__(f"{where}{col}: {message}. Fix: {fix}")


@dataclass
class TraceRow:
    """One job as a trace states it, before mapping (times in seconds)."""

    line: int  # 1-based line number in the file
    submit: float  # seconds (absolute epoch seconds for datetimes, else trace seconds)
    gpus: int  # total GPUs requested
    duration: float | None  # seconds on ``gpu_type`` (None: derived later, e.g. Pollux)
    model: str | None = None
    gpu_type: str | None = None
    name: str = ""
    app: str | None = None
    batch_size: int | None = None
    key: tuple = ()  # identity for the duplicate check
    extra: dict = field(default_factory=dict)


@dataclass
class LoadReport:
    """What a load did: rows read, jobs kept, rows skipped or filtered and why.

    ``skipped`` counts bad rows dropped under ``skip_bad_rows`` by reason; ``filtered`` counts
    rows left out on purpose (virtual cluster, time window, ``max_jobs``); ``notes`` records
    documented adjustments (e.g. rows sorted, durations extrapolated).
    """

    path: str
    fmt: str
    rows: int = 0
    jobs: int = 0
    skipped: Counter = field(default_factory=Counter)
    filtered: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def skipped_total(self) -> int:
        return int(sum(self.skipped.values()))

    def summary(self) -> str:
        lines = [f"{self.path} ({self.fmt}): {self.rows} rows read, {self.jobs} jobs kept"]
        for reason, n in sorted(self.filtered.items()):
            lines.append(f"  filtered {n:6d}  {reason}")
        for reason, n in sorted(self.skipped.items()):
            ex = "; ".join(self.examples.get(reason, [])[:2])
            lines.append(f"  skipped  {n:6d}  {reason}" + (f"  (e.g. {ex})" if ex else ""))
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.fmt,
            "rows": self.rows,
            "jobs": self.jobs,
            "skipped": dict(self.skipped),
            "filtered": dict(self.filtered),
            "notes": list(self.notes),
        }


class RowSink:
    """Raise or count bad rows (one per load)."""

    def __init__(self, path: Path, report: LoadReport, skip_bad_rows: bool):
        self.path, self.report, self.skip = path, report, skip_bad_rows

    def bad(self, line: int, column: str | None, reason: str, message: str, fix: str) -> None:
        if not self.skip:
            raise TraceError(self.path, message, f"{fix}; {SKIP_HINT}", line, column, reason)
        self.report.skipped[reason] += 1
        ex = self.report.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(f"line {line}" + (f" column '{column}'" if column else "") + f": {message}")


# ------------------------------------------------------------------------------------------------
# shared parsing helpers
# ------------------------------------------------------------------------------------------------
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DATETIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M")


def parse_datetime(text: str, fmt: str | None = None) -> float:
    """Seconds since the epoch of a naive timestamp (treated as UTC: only differences matter)."""
    text = text.strip()
    if fmt is None and len(text) >= 16:  # fast path (C parser) for ISO-like 'YYYY-MM-DD HH:MM[:SS]'
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            if d.tzinfo is not None:
                d = d.astimezone(timezone.utc).replace(tzinfo=None)
            return (d - datetime(1970, 1, 1)).total_seconds()
    fmts = (fmt,) if fmt else DATETIME_FORMATS
    for f in fmts:
        try:
            d = datetime.strptime(text, f)
        except ValueError:
            continue
        return (d - datetime(1970, 1, 1)).total_seconds()
    raise ValueError(f"not a timestamp like '2017-10-03 14:05:00': {text!r}")


def parse_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"not a finite number: {text!r}")
    return v


def parse_int(text: str) -> int:
    v = float(text)
    if not math.isfinite(v) or v != int(v):
        raise ValueError(f"not an integer: {text!r}")
    return int(v)


def open_csv(path: Path, required: list[str], delimiter: str = ",") -> tuple[Any, list[str], Any]:
    """Open a headed CSV; check it is non-empty, the delimiter and the required columns."""
    if not path.exists():
        raise TraceError(path, "file not found", "check the path, --data-root or ARYL_GYM_DATA")
    if path.is_dir():
        raise TraceError(path, "is a folder, not a trace file", "name the CSV file itself")
    fh = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (returned to the caller)
    try:
        first = fh.readline()
        if not first.strip():
            raise TraceError(path, "empty file (no header line)", "give a CSV with a header row and rows", 1)
        fh.seek(0)
        reader = csv.reader(fh, delimiter=delimiter)
        header = [h.strip() for h in next(reader)]
        missing = [c for c in required if c not in header]
        if missing:
            if len(header) == 1:
                for d, name in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe"), (",", "comma")):
                    if d != delimiter and d in first:
                        raise TraceError(
                            path,
                            f"the header has one field but contains '{d}': the file looks "
                            f"{name}-separated, not '{delimiter}'-separated",
                            f"convert it to '{delimiter}'-separated or set the delimiter "
                            f"(map key delimiter: '{d}' / --trace-option delimiter='{d}')",
                            1,
                        )
            raise TraceError(
                path,
                f"missing column '{missing[0]}' (header has {header})",
                f"the header must name the columns {required}",
                1,
                missing[0],
            )
        return fh, header, reader
    except BaseException:
        fh.close()
        raise


def iter_rows(
    path: Path,
    header: list[str],
    reader: Any,
    sink: RowSink,
    report: LoadReport,
    keep: tuple[str, set[str], str] | None = None,
) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows as dicts with their line numbers; wrong field counts are bad rows; blank lines skipped.

    ``keep = (column, values, reason)`` filters rows (counted under ``reason``) before parsing.
    """
    kidx = header.index(keep[0]) if keep else -1
    for row in reader:
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        report.rows += 1
        if keep and len(row) == len(header) and row[kidx].strip() not in keep[1]:
            report.filtered[keep[2]] += 1
            continue
        if len(row) != len(header):
            sink.bad(
                line,
                None,
                "wrong-field-count",
                f"{len(row)} fields but the header has {len(header)}",
                "give every row the same fields as the header (check the delimiter and quoting)",
            )
            continue
        yield line, {h: c.strip() for h, c in zip(header, row)}


def _num(sink: RowSink, line: int, col: str, text: str, kind: str = "float") -> Any:
    if text == "":
        sink.bad(line, col, "missing-value", "empty value", f"fill in '{col}'")
        return None
    try:
        return parse_int(text) if kind == "int" else parse_float(text)
    except ValueError:
        what = "an integer" if kind == "int" else "a number"
        sink.bad(line, col, "bad-number", f"not {what}: {text!r}", f"write '{col}' as {what}")
        return None


def check_duration(sink: RowSink, line: int, col: str, d: float | None) -> bool:
    if d is None:
        return False
    if not d > 0:
        sink.bad(
            line, col, "nonpositive-duration", f"duration {d:g} s is not positive",
            "a job must run for more than 0 s; drop or correct the row",
        )
        return False
    return True


def check_gpus(sink: RowSink, line: int, col: str, g: int | None) -> bool:
    if g is None:
        return False
    if g < 1:
        sink.bad(line, col, "zero-gpus", f"{g} GPUs", "a job needs at least 1 GPU; drop or correct the row")
        return False
    return True


# ------------------------------------------------------------------------------------------------
# Philly per-job summary (pollux-philly/traces/philly.csv)
# ------------------------------------------------------------------------------------------------
PHILLY_COLUMNS = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]


def read_philly(path: Path, sink: RowSink, report: LoadReport, opts: Mapping[str, Any]) -> list[TraceRow]:
    """``timestamp,duration,num_gpus,gpu_time,cluster``; filter by ``vc`` (one id or a list)."""
    vcs = opts.get("vc")
    vc_set = None
    if vcs:
        vc_set = {vcs} if isinstance(vcs, str) else set(vcs)
        vc_set = {v.strip() for s in vc_set for v in str(s).split(",") if v.strip()}
    fh, header, reader = open_csv(path, PHILLY_COLUMNS, opts.get("delimiter", ","))
    out: list[TraceRow] = []
    with fh:
        keep = ("cluster", vc_set, "other virtual cluster") if vc_set is not None else None
        for line, r in iter_rows(path, header, reader, sink, report, keep):
            vc = r["cluster"]
            if r["timestamp"] == "":
                sink.bad(line, "timestamp", "missing-value", "empty value", "fill in 'timestamp'")
                continue
            try:
                t = parse_datetime(r["timestamp"])
            except ValueError as exc:
                sink.bad(line, "timestamp", "bad-time", str(exc), "use 'YYYY-MM-DD HH:MM:SS'")
                continue
            d = _num(sink, line, "duration", r["duration"])
            if d is None or not check_duration(sink, line, "duration", d):
                continue
            g = _num(sink, line, "num_gpus", r["num_gpus"], "int")
            if not check_gpus(sink, line, "num_gpus", g):
                continue
            gt = _num(sink, line, "gpu_time", r["gpu_time"])
            if gt is None:
                continue
            if abs(gt - d * g) > 1e-6 * max(1.0, gt) + 1e-3:
                sink.bad(
                    line, "gpu_time", "inconsistent",
                    f"gpu_time {gt:g} != duration {d:g} x num_gpus {g}",
                    "correct duration, num_gpus or gpu_time so that gpu_time = duration * num_gpus",
                )
                continue
            out.append(
                TraceRow(line, t, int(g), float(d), name=f"philly-{vc}-L{line}",
                         key=(r["timestamp"], r["duration"], r["num_gpus"], vc), extra={"vc": vc})
            )
    if vc_set is not None:
        seen_vcs = Counter(r.extra["vc"] for r in out)
        unknown = sorted(vc_set - set(seen_vcs))
        if unknown:
            fh2, header2, reader2 = open_csv(path, PHILLY_COLUMNS, opts.get("delimiter", ","))
            with fh2:
                ci = header2.index("cluster")
                all_vcs = Counter(row[ci].strip() for row in reader2 if len(row) == len(header2))
            known = ", ".join(f"{k} ({n})" for k, n in all_vcs.most_common())
            raise TraceError(path, f"virtual cluster '{unknown[0]}' has no rows",
                             f"pick one of: {known}", column="cluster")
    return out


# ------------------------------------------------------------------------------------------------
# Pollux workloads (pollux-philly/workloads*/workload-N.csv)
# ------------------------------------------------------------------------------------------------
POLLUX_COLUMNS = ["name", "time", "application", "num_replicas", "batch_size"]


def read_pollux(path: Path, sink: RowSink, report: LoadReport, opts: Mapping[str, Any], apps: Mapping[str, Any]) -> list[TraceRow]:
    """``name,time,application,num_replicas,batch_size``; run time from the app's profiles."""
    gpus_per_node = int(opts.get("profile_gpus_per_node", 4))
    fh, header, reader = open_csv(path, POLLUX_COLUMNS, opts.get("delimiter", ","))
    out: list[TraceRow] = []
    with fh:
        for line, r in iter_rows(path, header, reader, sink, report):
            t = _num(sink, line, "time", r["time"])
            if t is None:
                continue
            if t < 0:
                sink.bad(line, "time", "bad-time", f"negative arrival {t:g} s", "arrival times are seconds >= 0")
                continue
            app_name = r["application"]
            if app_name not in apps:
                sink.bad(line, "application", "unknown-app", f"no profile for application {app_name!r}",
                         f"use one of {sorted(apps)} or add its profile folder")
                continue
            n = _num(sink, line, "num_replicas", r["num_replicas"], "int")
            if not check_gpus(sink, line, "num_replicas", n):
                continue
            b = _num(sink, line, "batch_size", r["batch_size"], "int")
            if b is None:
                continue
            app = apps[app_name]
            if not app.init_batch_size <= b <= app.max_batch_size:
                sink.bad(line, "batch_size", "bad-batch",
                         f"batch {b} outside {app_name}'s validated range [{app.init_batch_size}, {app.max_batch_size}]",
                         "pick a batch size the profiles validate")
                continue
            try:
                dur = app.run_time(int(n), int(b), gpus_per_node)
                cfg = app.config(int(n), int(b), gpus_per_node)
                # rate multiplier by worker count at this fixed batch (JobSpec.scaling)
                curve = app.scaling_curve(int(n), int(b), gpus_per_node)
            except ConfigError as exc:
                sink.bad(line, "num_replicas", "no-profile", str(exc), "use a configuration the profiles cover")
                continue
            out.append(
                TraceRow(
                    line, float(t), int(n), float(dur), model=app_name, gpu_type=opts.get("profile_gpu", "T4"),
                    name=r["name"] or f"{app_name}-L{line}", app=app_name, batch_size=int(b),
                    key=(r["name"],) if r["name"] else (r["time"], app_name, r["num_replicas"], r["batch_size"]),
                    extra={
                        "profile_run_time_s": dur,
                        "atomic_bsz": cfg.atomic_bsz,
                        "accum_steps": cfg.accum_steps,
                        "max_replicas": app.max_replicas,
                        "min_batch_size": app.init_batch_size,
                        "max_batch_size": app.max_batch_size,
                        "max_epochs": app.max_epochs,
                        "gpus_per_worker": 1,
                        "scaling": curve,
                        "profiles_dir": str(app.folder.parent),
                        "profile_gpus_per_node": gpus_per_node,
                    },
                )
            )
    return out


# ------------------------------------------------------------------------------------------------
# Gavel 7-field .trace (gavel-philly-vc/traces/msr/seed=0/<vc>.trace)
# ------------------------------------------------------------------------------------------------
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})", "give Gavel's simulation_throughputs.json") from None
    if gpu not in data:
        raise TraceError(path, f"no GPU type '{gpu}' (has {sorted(data)})", "pick one with trace option gavel_gpu=")
    out: dict[tuple[str, int], float] = {}
    for key, val in data[gpu].items():
        try:
            jt, sf = ast.literal_eval(key)
            out[(str(jt), int(sf))] = float(val["null"])
        except (ValueError, SyntaxError, TypeError, KeyError):
            continue
    return out


def read_gavel(path: Path, sink: RowSink, report: LoadReport, opts: Mapping[str, Any], tput: Mapping[tuple[str, int], float]) -> list[TraceRow]:
    """Tab-separated, no header: job_type, command, num_steps_arg, needs_data_dir, total_steps,
    arrival_time (s), scale_factor (GPUs). Duration = total_steps / V100 steps-per-second.

    Jobs whose (job_type, scale_factor) has no throughput entry (scale factors above 8; and
    Recommendation, A3C, CycleGAN, measured on 1 GPU only) use the throughput of the largest
    measured scale factor ``s0 < sf`` scaled linearly, ``tput(s0) * sf / s0`` (counted in the
    report's notes), unless ``gavel_extrapolate`` is false (then they are bad rows).
    """
    if not path.exists():
        raise TraceError(path, "file not found", "check the path, --data-root or ARYL_GYM_DATA")
    extrapolate = bool(opts.get("gavel_extrapolate", True))
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not any(ln.strip() for ln in lines):
        raise TraceError(path, "empty file", "give a Gavel .trace file with one job per line", 1)
    out: list[TraceRow] = []
    n_extra = 0
    for i, ln in enumerate(lines, start=1):
        if not ln.strip():
            continue
        report.rows += 1
        parts = ln.split("\t")
        if len(parts) != 7:
            if i == 1 and len(parts) == 1 and ("," in ln or ";" in ln):
                raise TraceError(path, "one field per line: the file is not tab-separated", "Gavel .trace files separate the 7 fields by tabs", 1)
            sink.bad(i, None, "wrong-field-count", f"{len(parts)} tab-separated fields, need 7 ({', '.join(GAVEL_FIELDS)})",
                     "use Gavel's old 7-field format (convert 10-field files)")
            continue
        jt = parts[0].strip()
        steps = _num(sink, i, "total_steps", parts[4].strip())
        if steps is None:
            continue
        if not steps > 0:
            sink.bad(i, "total_steps", "nonpositive-duration", f"total_steps {steps:g}", "a job needs > 0 steps")
            continue
        try:
            t = parse_float(parts[5].strip())
        except ValueError:
            sink.bad(i, "arrival_time", "bad-time", f"not a number of seconds: {parts[5]!r}", "write arrival_time in seconds")
            continue
        sf = _num(sink, i, "scale_factor", parts[6].strip(), "int")
        if not check_gpus(sink, i, "scale_factor", sf):
            continue
        rate = tput.get((jt, int(sf)))
        if rate is None and extrapolate:
            below = [s for (j, s) in tput if j == jt and s < sf]
            if below:  # linear scaling from the largest measured scale factor below sf
                s0 = max(below)
                rate = tput[(jt, s0)] * sf / s0
                n_extra += 1
        if not rate or rate <= 0:
            sink.bad(i, "job_type", "no-throughput", f"no V100 throughput for ({jt!r}, {sf})",
                     "use a job type and scale factor listed in simulation_throughputs.json")
            continue
        base = jt.split(" (")[0]
        bs = None
        if "batch size" in jt:
            try:
                bs = int(jt.split("batch size")[1].strip(" )"))
            except ValueError:
                bs = None
        out.append(TraceRow(i, t, int(sf), steps / rate, model=base, gpu_type="V100",
                            name=f"{base}-L{i}", batch_size=bs, key=(ln,), extra={"job_type": jt, "total_steps": steps}))
    if n_extra:
        report.notes.append(
            f"{n_extra} jobs have no Gavel throughput entry for their scale factor: used the largest "
            "measured smaller scale factor's throughput scaled linearly "
            "(trace option gavel_extrapolate=false to skip them instead)"
        )
    return out


# ------------------------------------------------------------------------------------------------
# Generic CSV with a column mapping
# ------------------------------------------------------------------------------------------------
CSV_COLUMN_KEYS = ("submit", "gpus", "duration", "start", "end", "model", "gpu_type", "id", "name")


def read_generic(path: Path, sink: RowSink, report: LoadReport, spec: Mapping[str, Any]) -> list[TraceRow]:
    """A user's CSV; ``spec`` = the map's ``columns``/``units``/``delimiter`` (see docs/traces.md)."""
    cols: Mapping[str, str] = spec["columns"]
    units: Mapping[str, Any] = spec.get("units", {})
    tu = units.get("time", "s")
    du = units.get("duration", "s")
    tfmt = units.get("time_format")
    gpu_default = units.get("gpu_type")
    required = [cols["submit"], cols["gpus"]]
    if cols.get("duration"):
        required.append(cols["duration"])
    else:
        required += [cols["start"], cols["end"]]
    for k in ("model", "gpu_type", "id", "name"):
        if cols.get(k):
            required.append(cols[k])
    fh, header, reader = open_csv(path, required, spec.get("delimiter", ","))

    def tparse(line: int, col: str, text: str) -> float | None:
        if text == "":
            sink.bad(line, col, "missing-value", "empty value", f"fill in '{col}'")
            return None
        if tu == "datetime":
            try:
                return parse_datetime(text, tfmt)
            except ValueError as exc:
                sink.bad(line, col, "bad-time", str(exc), f"write '{col}' as {tfmt or 'YYYY-MM-DD HH:MM:SS'} or set units.time")
                return None
        try:
            return parse_float(text) * TIME_UNITS[tu]
        except ValueError:
            sink.bad(line, col, "bad-time", f"not a number of {tu}: {text!r}",
                     f"write '{col}' as a number of {tu}, or set units.time: datetime (with time_format)")
            return None

    out: list[TraceRow] = []
    with fh:
        for line, r in iter_rows(path, header, reader, sink, report):
            t = tparse(line, cols["submit"], r[cols["submit"]])
            if t is None:
                continue
            g = _num(sink, line, cols["gpus"], r[cols["gpus"]], "int")
            if not check_gpus(sink, line, cols["gpus"], g):
                continue
            if cols.get("duration"):
                d = _num(sink, line, cols["duration"], r[cols["duration"]])
                dcol = cols["duration"]
                d = None if d is None else d * TIME_UNITS[du]
            else:
                s = tparse(line, cols["start"], r[cols["start"]])
                e = tparse(line, cols["end"], r[cols["end"]]) if s is not None else None
                if s is None or e is None:
                    continue
                d, dcol = e - s, cols["end"]
                if s < t:
                    sink.bad(line, cols["start"], "start-before-submit", f"start {s:g} is before submit {t:g}",
                             "a job starts at or after its submission; check the columns")
                    continue
            if not check_duration(sink, line, dcol, d):
                continue
            model = r[cols["model"]] if cols.get("model") else None
            gtype = (r[cols["gpu_type"]] if cols.get("gpu_type") else None) or gpu_default
            ident = r[cols["id"]] if cols.get("id") else None
            name = r[cols["name"]] if cols.get("name") else (ident or f"job-L{line}")
            key = (ident,) if ident else tuple(r[h] for h in header)
            out.append(TraceRow(line, float(t), int(g), float(d), model=model or None, gpu_type=gtype or None,
                                name=str(name), key=key))
    return out
