"""What every trace reader shares: the report, the row checks, the rows a reader returns, and
the CSV, number and time parsing they are built from. The readers themselves live one per format
in :mod:`aryl_gym.workload.formats` (``philly``, ``pollux``, ``gavel``, ``csv``).

Files are read by pyarrow's CSV reader into string columns; every check is a vectorised mask
over the rows (:class:`RowChecks`), and messages still name the file, line and column: each row
keeps its physical line number. Readers check *rows* (fields present, numbers and times parse,
positive durations and GPU counts, consistency such as Philly's ``gpu_time == duration *
num_gpus``); the order, duplicate, window and size checks that every format shares live in
:mod:`aryl_gym.workload.traces`. A bad row raises a :class:`TraceError` (the earliest bad row of
the stage) or, with ``skip_bad_rows``, is counted under its reason. File-level problems
(missing, unreadable, binary or non-UTF-8 file, missing column, empty file, wrong delimiter)
always raise. A UTF-8 byte order mark is dropped.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from aryl_gym.config import ConfigError, size_limits_lifted

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
class LoadReport:
    """What a load did: rows read, jobs kept, rows skipped or filtered and why.

    ``skipped`` counts bad rows dropped under ``skip_bad_rows`` by reason; ``filtered`` counts
    rows left out on purpose (virtual cluster, row filter, time window, ``max_jobs``); ``notes``
    records documented adjustments (e.g. rows sorted, durations extrapolated).
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

    def summary(self, examples: int = 2) -> str:
        lines = [f"{self.path} ({self.fmt}): {self.rows} rows read, {self.jobs} jobs kept"]
        for reason, n in sorted(self.filtered.items()):
            lines.append(f"  filtered {n:6d}  {reason}")
        for reason, n in sorted(self.skipped.items()):
            ex = "; ".join(self.examples.get(reason, [])[:examples])
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
            "examples": {k: list(v) for k, v in self.examples.items()},
            "notes": list(self.notes),
        }


class RowChecks:
    """The bad-row checks of one stage of a load, vectorised.

    Rows are positions ``0..n-1`` of a table whose physical file lines are ``lines``. Each
    :meth:`flag` takes a boolean mask over the rows; a row is charged to the first check that
    flags it (checks run in the order a reader states them, so a row has one reason, as when
    rows were checked one by one). With ``skip_bad_rows`` the rows are counted by reason (first
    three examples kept); otherwise :meth:`finish` raises a :class:`TraceError` for the earliest
    bad row (``order``: file line in the read stage, table position after sorting).
    """

    def __init__(self, path: Path, lines: np.ndarray, report: LoadReport, skip: bool,
                 order: np.ndarray | None = None):
        self.path, self.lines, self.report, self.skip = path, lines, report, skip
        self.order = lines if order is None else order
        self.ok = np.ones(len(lines), dtype=bool)
        self._first: tuple[float, int, str | None, str, str, str] | None = None

    def _note(self, key: float, line: int, column: str | None, reason: str, message: str, fix: str) -> None:
        if self._first is None or key < self._first[0]:
            self._first = (key, line, column, reason, message, fix)

    def _example(self, reason: str, line: int, column: str | None, message: str) -> None:
        ex = self.report.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(f"line {line}" + (f" column '{column}'" if column else "") + f": {message}")

    def flag(self, mask: np.ndarray, column: str | None, reason: str,
             message: Callable[[int], str], fix: str) -> None:
        """Rows where ``mask`` (and no earlier check) holds are bad for ``reason``."""
        idx = np.flatnonzero(mask & self.ok)
        if not idx.size:
            return
        self.ok[idx] = False
        if self.skip:
            self.report.skipped[reason] += int(idx.size)
            for i in idx[:3].tolist():
                self._example(reason, int(self.lines[i]), column, message(i))
        else:
            i = int(idx[np.argmin(self.order[idx])])
            self._note(float(self.order[i]), int(self.lines[i]), column, reason, message(i), fix)

    def flag_line(self, line: int, column: str | None, reason: str, message: str, fix: str) -> None:
        """A bad line that is not a row of the table (e.g. a wrong number of fields)."""
        if self.skip:
            self.report.skipped[reason] += 1
            self._example(reason, line, column, message)
        else:
            self._note(float(line), line, column, reason, message, fix)

    def finish(self) -> np.ndarray:
        """Raise for the earliest bad row (unless skipping); return the mask of good rows."""
        if self._first is not None:
            _, line, column, reason, message, fix = self._first
            raise TraceError(self.path, message, f"{fix}; {SKIP_HINT}", line, column, reason)
        return self.ok


class TraceExtra(Mapping[str, Any], tuple):  # type: ignore[misc]
    """``JobSpec.extra`` of a trace job: a read-only mapping, the format's fields (one dict shared
    by the jobs of one configuration) plus ``trace_line``, ``trace_gpus``, ``trace_duration_s``.
    Compares equal to the ``dict`` of the same items; ``dict(extra)`` gives a plain copy.
    (A tuple underneath: small, and built in C for a million jobs.)"""

    __slots__ = ()
    _OWN = ("trace_line", "trace_gpus", "trace_duration_s")

    def __new__(cls, base: Mapping[str, Any], line: int, gpus: int, duration: float | None) -> TraceExtra:
        return tuple.__new__(cls, (base, line, gpus, duration))

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and deepcopy (vector envs, Ray, process pools): rebuilt from its four parts
        # (the tuple default would call __new__ with the whole tuple as one argument)
        return (TraceExtra, tuple(tuple.__getitem__(self, i) for i in range(4)))

    def __getitem__(self, key: str) -> Any:  # type: ignore[override]
        own = TraceExtra._OWN
        if key in own:
            return tuple.__getitem__(self, 1 + own.index(key))
        return tuple.__getitem__(self, 0)[key]

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in tuple.__getitem__(self, 0) if k not in TraceExtra._OWN)
        yield from TraceExtra._OWN

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        return key in TraceExtra._OWN or key in tuple.__getitem__(self, 0)

    def __eq__(self, other: object) -> bool:
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class TraceRows:
    """Validated jobs of a trace as columns (one entry per row, in file order until sorted)."""

    line: np.ndarray  # int64, 1-based physical line in the file
    submit: np.ndarray  # float64 seconds (absolute epoch seconds for datetimes, else trace seconds)
    gpus: np.ndarray  # int64 total GPUs requested
    duration: np.ndarray  # float64 seconds on ``gpu_type``
    key: np.ndarray  # int64 identity code for the duplicate check
    name: np.ndarray  # object: str
    model: np.ndarray | None = None  # object: str or None
    gpu_type: np.ndarray | None = None  # object: str or None
    app: np.ndarray | None = None  # object: str or None
    batch_size: np.ndarray | None = None  # int64
    base: np.ndarray | None = None  # object: shared dicts of format fields (JobSpec.extra)
    scaling: np.ndarray | None = None  # object: tuple of floats or None
    one_gpu_workers: bool = False  # Pollux replicas: g = 1, w_max = gpus

    def __len__(self) -> int:
        return int(self.line.size)

    def take(self, idx: np.ndarray) -> TraceRows:
        def t(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[idx]

        return TraceRows(self.line[idx], self.submit[idx], self.gpus[idx], self.duration[idx],
                         self.key[idx], self.name[idx], t(self.model), t(self.gpu_type), t(self.app),
                         t(self.batch_size), t(self.base), t(self.scaling), self.one_gpu_workers)


# ------------------------------------------------------------------------------------------------
# shared parsing helpers
# ------------------------------------------------------------------------------------------------
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DATETIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M")
#: ``units.gpus``: how many of the unit make one GPU.
GPU_UNITS = {"count": 1, "milli": 1000, "percent": 100}
#: column roles a map may name (``columns:`` of a csv map)
CSV_COLUMN_KEYS = ("submit", "gpus", "gpu_milli", "duration", "start", "end", "model", "gpu_type", "id", "name")
_EPOCH = datetime(1970, 1, 1)
_NUM_RE = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_ISO_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}$"


def parse_datetime(text: str, fmt: str | None = None) -> float:
    """Seconds since the epoch of a naive timestamp (treated as UTC: only differences matter);
    a timestamp with a UTC offset is converted to UTC."""
    return _parse_dt(text, fmt)[0]


def _parse_dt(text: str, fmt: str | None = None) -> tuple[float, bool]:
    """(epoch seconds, whether the timestamp carried a UTC offset)."""
    text = text.strip()
    if fmt is None and len(text) >= 16:  # fast path (C parser) for ISO-like 'YYYY-MM-DD HH:MM[:SS]'
        try:
            d = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            aware = d.tzinfo is not None
            if aware:
                d = d.astimezone(timezone.utc).replace(tzinfo=None)
            return (d - _EPOCH).total_seconds(), aware
    fmts = (fmt,) if fmt else DATETIME_FORMATS
    for f in fmts:
        try:
            d = datetime.strptime(text, f)
        except ValueError:
            continue
        aware = d.tzinfo is not None
        if aware:  # a time_format with %z (was: TypeError, naive minus aware)
            d = d.astimezone(timezone.utc).replace(tzinfo=None)
        return (d - _EPOCH).total_seconds(), aware
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


def check_delimiter(value: Any, where: str) -> str:
    """A CSV delimiter: one character; ``\\t`` (two characters) and ``tab`` mean a tab."""
    if isinstance(value, str) and value in ("\\t", "tab", "TAB"):
        return "\t"
    fix = "give one character, e.g. delimiter=';' or delimiter='\\t' (tab)"
    if not isinstance(value, str):
        raise ConfigError(f"{where}: delimiter must be one character, got {value!r}; {fix}")
    if len(value) != 1:
        what = "empty" if not value else f"{len(value)} characters ({value!r})"
        raise ConfigError(f"{where}: delimiter is {what}; {fix}")
    if value in ('"', "\n", "\r"):
        raise ConfigError(f"{where}: delimiter {value!r} is the quote or a line break; {fix}")
    return value


def read_bytes(path: Path) -> bytes:
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as exc:  # e.g. a file name longer than the system allows
        raise TraceError(path, f"not a usable path ({exc.strerror or exc})", "check the file name") from None
    if not exists:
        raise TraceError(path, "file not found", "check the path, --data-root or ARYL_GYM_DATA")
    if is_dir:
        raise TraceError(path, "is a folder, not a trace file", "name the trace file itself")
    try:
        data = path.read_bytes()
    except PermissionError:
        raise TraceError(path, "permission denied", "make the file readable (chmod +r) or copy it") from None
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror or exc})", "check the path") from None
    if data.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte order mark (spreadsheet exports)
        data = data[3:]
    nul = data.find(b"\x00", 0, 1 << 20)
    if nul >= 0:
        raise TraceError(path, f"binary data (a NUL byte at offset {nul}): not a text trace",
                         "give the CSV/text trace itself (decompress or export it first)",
                         data.count(b"\n", 0, nul) + 1)
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                             "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
                             data.count(b"\n", 0, exc.start) + 1) from None
    return data


@dataclass
class CsvTable:
    """A headed CSV read by pyarrow: trimmed string columns and each row's file line."""

    header: list[str]
    cols: dict[str, pa.Array]
    lines: np.ndarray
    bad_width: list[tuple[int, int]]  # (line, fields) of rows with a wrong number of fields

    def __len__(self) -> int:
        return int(self.lines.size)

    def take(self, mask: np.ndarray) -> CsvTable:
        m = pa.array(mask)
        return CsvTable(self.header, {k: v.filter(m) for k, v in self.cols.items()}, self.lines[mask],
                        self.bad_width)


def _record_lines(data: bytes, delimiter: str, quoted: bool) -> np.ndarray:
    """1-based file line of each non-empty record (the header is record 1)."""
    if quoted:  # records may span lines: the csv module's count (the line a record ends on)
        text = data.decode("utf-8")
        try:
            return _csv_record_lines(text, delimiter)
        except csv.Error:
            # was: a traceback (_csv.Error "new-line character seen in unquoted field") for a
            # file with CR-only line breaks (classic Mac); each CR is a line break there
            return _csv_record_lines(text.replace("\r\n", "\n").replace("\r", "\n"), delimiter)
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if not data.startswith((b"\n", b"\r\n")) and b"\n\n" not in data and b"\n\r\n" not in data \
            and (b"\r" not in data or b"\r" not in data.replace(b"\r\n", b"")):
        return np.arange(1, n_lines + 1, dtype=np.int64)  # no empty lines: record k is line k
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(data)]))
    if starts[-1] == len(data):  # the file ends with a line break
        starts, ends = starts[:-1], ends[:-1]
    length = ends - starts
    cr_only = np.zeros(length.size, dtype=bool)
    one = np.flatnonzero(length == 1)
    cr_only[one] = buf[starts[one]] == 13
    empty = (length == 0) | cr_only
    return np.flatnonzero(~empty).astype(np.int64) + 1


def _csv_record_lines(text: str, delimiter: str) -> np.ndarray:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    out = []
    for row in reader:
        if row:
            out.append(reader.line_num)
    return np.asarray(out, dtype=np.int64)


def read_csv_table(path: Path, required: list[str], delimiter: str, report: LoadReport,
                   row_filter: Mapping[str, Any] | None = None) -> CsvTable:
    """Read a headed CSV with pyarrow; check it is text, non-empty, the delimiter, the columns.

    A UTF-8 byte order mark is dropped. Blank rows are ignored; rows with a wrong number of
    fields are returned in ``bad_width`` for the caller's checks. ``row_filter`` (column -> value
    or list of values) keeps the matching rows, the others counted as filtered.
    """
    data = read_bytes(path)
    first_b = data.split(b"\n", 1)[0]
    if b"\r" in first_b.rstrip(b"\r"):  # CR-only line breaks: the header ends at the first CR
        first_b = first_b.split(b"\r", 1)[0]
    first = first_b.decode("utf-8")
    if not first.strip():
        raise TraceError(path, "empty file (no header line)", "give a CSV with a header row and rows", 1)
    if b"\n" not in data and b"\r" not in data:
        # a header line without a line break: was "cannot be parsed as CSV (Could not skip
        # initial 1 rows ...)"; now read as a header and no rows ("no data rows")
        data += b"\n"
    header = [h.strip() for h in next(csv.reader([first.rstrip("\r")], delimiter=delimiter))]
    filt = {str(k): v for k, v in (row_filter or {}).items()}
    missing = [c for c in required if c not in header]
    if missing:
        if len(header) == 1:
            for d, name in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe"), (",", "comma")):
                if d != delimiter and d in first:
                    shown = "\\t" if d == "\t" else d
                    raise TraceError(
                        path,
                        f"the header has one field but contains '{shown}': the file looks "
                        f"{name}-separated, not '{delimiter}'-separated",
                        f"convert it to '{delimiter}'-separated or set the delimiter "
                        f"(map key delimiter: '{shown}' / --trace-option delimiter='{shown}')",
                        1,
                    )
        raise TraceError(path, f"missing column '{missing[0]}' (header has {header})",
                         f"the header must name the columns {required}", 1, missing[0])
    bad_filter = [c for c in filt if c not in header]
    if bad_filter:
        raise TraceError(path, f"row filter names column '{bad_filter[0]}', which the header lacks "
                         f"(header has {header})", "filter on a column of the file", 1, bad_filter[0])
    dup = sorted({h for h in header if header.count(h) > 1 and (h in required or h in filt)})
    if dup:
        raise TraceError(path, f"column '{dup[0]}' appears twice in the header", "rename one of them", 1, dup[0])
    names = [h if header.count(h) == 1 else f"{h}\x00{i}" for i, h in enumerate(header)]
    invalid: list[tuple[int, int, str]] = []

    def on_invalid(row: Any) -> str:
        invalid.append((-1 if row.number is None else int(row.number), int(row.actual_columns), row.text))
        return "skip"

    quoted = b'"' in data

    def read(threads: bool) -> pa.Table:
        invalid.clear()
        try:
            return pacsv.read_csv(
                pa.BufferReader(data),
                read_options=pacsv.ReadOptions(use_threads=threads, column_names=names, skip_rows=1,
                                               block_size=1 << 22),
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=quoted,
                                                 invalid_row_handler=on_invalid),
                convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                     strings_can_be_null=False,
                                                     quoted_strings_can_be_null=False),
            )
        except pa.ArrowInvalid as exc:
            raise TraceError(path, f"cannot be parsed as CSV ({exc})", "check the quoting and the delimiter") from None

    table = read(True)
    if invalid:  # rows with a wrong number of fields: read again in one thread to get their numbers
        table = read(False)
    rec = _record_lines(data, delimiter, quoted)
    blank_numbers = []
    bad_width: list[tuple[int, int]] = []
    strip_set = delimiter + " \t\r\n"
    for number, nfields, text in invalid:
        if not text.strip(strip_set):
            blank_numbers.append(number)
        else:
            bad_width.append((int(rec[number - 1]) if number - 1 < rec.size else number, nfields))
    drop = np.zeros(rec.size, dtype=bool)
    drop[0] = True
    for number, _, _ in invalid:
        if number - 1 < rec.size:
            drop[number - 1] = True
    lines = rec[~drop]
    if lines.size != table.num_rows:  # unusual line breaks (e.g. CR only): count with the csv module
        rec = _record_lines(data, delimiter, True)
        lines = rec[1:][: table.num_rows] if rec.size - 1 >= table.num_rows else np.arange(2, table.num_rows + 2)
    cols = {h: pc.utf8_trim_whitespace(table.column(n).combine_chunks())
            for h, n in zip(header, names) if header.count(h) == 1}
    nonblank = np.zeros(table.num_rows, dtype=bool)
    for a in cols.values():
        nonblank |= np.asarray(pc.greater(pc.utf8_length(a), 0), dtype=bool)
    report.rows += int(nonblank.sum()) + len(bad_width)
    out = CsvTable(header, cols, lines, bad_width)
    if not nonblank.all():
        out = out.take(nonblank)
    if filt:
        keep = np.ones(len(out), dtype=bool)
        for col, want in filt.items():
            vals = [str(v).strip() for v in (want if isinstance(want, (list, tuple, set)) else [want])]
            keep &= np.asarray(pc.is_in(out.cols[col], value_set=pa.array(vals, pa.string())), dtype=bool)
        nf = int((~keep).sum())
        if nf:
            report.filtered["row filter " + ", ".join(f"{k}={v}" for k, v in filt.items())] += nf
            out = out.take(keep)
    return out


def empty_mask(a: pa.Array) -> np.ndarray:
    return np.asarray(pc.equal(pc.utf8_length(a), 0), dtype=bool)


def to_float(a: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, empty, bad): finite decimal numbers parse (as Python's ``float``), else NaN."""
    empty = empty_mask(a)
    ok = np.asarray(pc.match_substring_regex(a, _NUM_RE), dtype=bool)
    vals = np.full(len(a), np.nan)
    if ok.any():
        vals[ok] = np.asarray(pc.cast(a.filter(pa.array(ok)), pa.float64()))
    bad = ~empty & ~np.isfinite(vals)
    return vals, empty, bad


def to_int(a: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`to_float`, whole numbers only (``2.0`` is 2); values as float64."""
    vals, empty, bad = to_float(a)
    with np.errstate(invalid="ignore"):
        bad |= ~empty & ~bad & (vals != np.floor(vals))
    return vals, empty, bad


def to_datetime(a: pa.Array, fmt: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """(epoch seconds, empty, bad, messages of bad rows): ISO ``YYYY-MM-DD HH:MM:SS`` in C,
    other forms through :func:`parse_datetime` one by one."""
    empty = empty_mask(a)
    vals = np.full(len(a), np.nan)
    todo = ~empty
    if fmt is None:
        iso = np.asarray(pc.match_substring_regex(a, _ISO_RE), dtype=bool)
        if iso.any():
            sel = pc.replace_substring(a.filter(pa.array(iso)), "T", " ")
            ts = pc.strptime(sel, format="%Y-%m-%d %H:%M:%S", unit="s", error_is_null=True)
            got = np.asarray(pc.cast(ts, pa.int64()).fill_null(-(1 << 62)), dtype=np.int64)
            v = got.astype(np.float64)
            v[got == -(1 << 62)] = np.nan
            vals[iso] = v
            todo &= ~(iso & np.isfinite(vals))
    msgs: dict[int, str] = {}
    idx = np.flatnonzero(todo)
    aware: dict[int, str] = {}  # rows whose timestamp has a UTC offset -> its text
    if idx.size:
        texts = a.take(pa.array(idx)).to_pylist()
        for i, t in zip(idx.tolist(), texts):
            try:
                vals[i], has_tz = _parse_dt(t, fmt)
            except ValueError as exc:
                msgs[i] = str(exc)
            else:
                if has_tz:
                    aware[i] = t
    if aware:
        # was: timestamps with and without a UTC offset mixed silently (those without were taken
        # as UTC, so their offsets from the others were wrong by the zone's hours)
        parsed = np.flatnonzero(~empty & np.isfinite(vals))
        first = int(parsed[0])
        first_aware = first in aware
        first_text = a[first].as_py()
        for i in parsed.tolist():
            if (i in aware) != first_aware:
                msgs[i] = (f"timestamp {a[i].as_py()!r} {'has a' if i in aware else 'has no'} UTC offset, but the "
                           f"first timestamp {first_text!r} {'has one' if first_aware else 'has none'}: "
                           "give every timestamp the same form (all with an offset, or all in one zone without)")
    bad = np.zeros(len(a), dtype=bool)
    if msgs:
        bad[list(msgs)] = True
    return vals, empty, bad, msgs


def key_codes(cols: list[pa.Array]) -> np.ndarray:
    """One int64 code per row, equal iff the rows' values in ``cols`` are equal."""
    code: np.ndarray | None = None
    for a in cols:
        c = np.asarray(pc.dictionary_encode(a).indices, dtype=np.int64)
        if code is None:
            code = c
        else:
            code = np.unique(code * (int(c.max(initial=0)) + 1) + c, return_inverse=True)[1].astype(np.int64)
    return code if code is not None else np.zeros(0, dtype=np.int64)


def obj(a: pa.Array) -> np.ndarray:
    """A string column as a numpy array of Python ``str``."""
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=object)


#: the largest integer an integer column (GPU count, replicas, batch size) may hold: float64
#: holds every integer up to it exactly, and int64 arithmetic on it cannot overflow
MAX_INT_VALUE = 2.0**53


def num_checks(chk: RowChecks, a: pa.Array, col: str, kind: str = "float") -> np.ndarray:
    """Missing and unparsable values of a numeric column (reasons missing-value, bad-number)."""
    vals, empty, bad = to_int(a) if kind == "int" else to_float(a)
    what = "an integer" if kind == "int" else "a number"
    chk.flag(empty, col, "missing-value", lambda i: "empty value", f"fill in '{col}'")
    chk.flag(bad, col, "bad-number", lambda i: f"not {what}: {a[i].as_py()!r}", f"write '{col}' as {what}")
    if kind == "int":
        # was: 1e30 parsed as a whole number and then wrapped round in int64 (GPU counts became
        # 0 or negative workers and work 0, silently; Pollux raised ZeroDivisionError)
        with np.errstate(invalid="ignore"):
            big = np.abs(vals) > MAX_INT_VALUE
        chk.flag(big, col, "bad-number", lambda i: f"{a[i].as_py()!r} is too large for an integer count "
                 "(more than 2**53)", f"correct '{col}' (check its unit)")
    return vals


#: the longest job a trace row may give (one year, in seconds) unless ARYL_GYM_ALLOW_HUGE=1: a
#: duration of 1e11 s made the episode run for ever (README, "Size limits")
MAX_DURATION_S = 365 * 24 * 3600.0


def duration_check(chk: RowChecks, col: str, d: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):
        m = ~(d > 0) & np.isfinite(d)
    chk.flag(m, col, "nonpositive-duration", lambda i: f"duration {d[i]:g} s is not positive",
             "a job must run for more than 0 s; drop or correct the row")
    if not size_limits_lifted():
        with np.errstate(invalid="ignore"):
            big = np.isfinite(d) & (d > MAX_DURATION_S)
        chk.flag(big, col, "huge-duration",
                 lambda i: f"duration {d[i]:g} s is more than a year ({MAX_DURATION_S:g} s)",
                 "check the value and units.duration (or set ARYL_GYM_ALLOW_HUGE=1)")


#: the most GPUs one trace job may ask for (more is a unit slip or a corrupt row; the mapping's
#: integer arithmetic, workers x growth factor, must not overflow)
MAX_GPUS = 1 << 31


def gpus_check(chk: RowChecks, col: str, g: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):
        m = g < 1
        big = g > MAX_GPUS
    chk.flag(m, col, "zero-gpus", lambda i: f"{int(g[i])} GPUs", "a job needs at least 1 GPU; drop or correct the row")
    chk.flag(big, col, "huge-gpus", lambda i: f"{g[i]:.6g} GPUs, more than {MAX_GPUS:,}",
             "check the value and its unit (units.gpus: milli or percent for GPU shares); drop or correct the row")


def width_checks(chk: RowChecks, tab: CsvTable) -> None:
    for line, nf in tab.bad_width:
        chk.flag_line(line, None, "wrong-field-count", f"{nf} fields but the header has {len(tab.header)}",
                      "give every row the same fields as the header (check the delimiter and quoting)")


def as_i64(v: np.ndarray) -> np.ndarray:
    out = np.zeros(v.size, dtype=np.int64)
    f = np.isfinite(v) & (np.abs(v) <= MAX_INT_VALUE)  # larger ones are bad rows (no cast warning)
    out[f] = v[f].astype(np.int64)
    return out
