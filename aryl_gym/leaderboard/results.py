"""The leaderboard's results: the CSV row schema, reading and appending rows, and the per-episode
series files (``OUT/episodes/SCENARIO/ENTRANT/seedN.json.gz``).

One row per episode (:data:`COLUMNS`): what identifies the episode and how to replay it, every
scalar metric of :class:`~aryl_gym.metrics.EpisodeResult`, then provenance. Rows carry a digest
(``results.csv.sha256``) so a resumed run can tell a complete row from a torn one.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aryl_gym import __version__
from aryl_gym.config import ConfigError
from aryl_gym.episodes import EpisodeOutput
from aryl_gym.fileio import (
    atomic_write_bytes,
    atomic_write_text,
    check_readable_file,
    unique_backup,
)
from aryl_gym.metrics import EpisodeResult
from aryl_gym.provenance import env_version, slug

# ----------------------------------------------------------------------------------------------
# Row schema
# ----------------------------------------------------------------------------------------------

_TYPE_OF = {"int": int, "float": float, "bool": bool}


def _metric_types() -> dict[str, type]:
    """Scalar fields of :class:`EpisodeResult` (its annotations are strings) -> Python type."""
    out: dict[str, type] = {}
    for f in dataclasses.fields(EpisodeResult):
        if f.name in ("scenario", "policy", "seed") or f.name in EpisodeResult.SERIES:
            continue
        ann = str(f.type).split("|")[0].strip()
        if ann in _TYPE_OF:
            out[f.name] = _TYPE_OF[ann]
    return out


#: every scalar metric of SPEC 5, in :class:`EpisodeResult` order, with its type
METRIC_TYPES: dict[str, type] = _metric_types()
#: what identifies an episode and how to replay it
ID_COLUMNS = [
    "suite",
    "scenario",
    "scenario_name",
    "env_id",
    "env_version",
    "seed",
    "policy",
    "kind",
    "source",
    "env_kwargs",
]
#: provenance, after the metrics
META_COLUMNS = ["wall_time_s", "commit", "config_hash", "aryl_gym_version", "finished_at", "note"]
COLUMNS = ID_COLUMNS + list(METRIC_TYPES) + META_COLUMNS
#: metrics that depend on the machine (wall clock), not on the episode: never compared
WALL_METRICS = ("wall_s", "decision_ms_mean", "decision_ms_max")
#: columns that legitimately differ between two runs of the same episode
VOLATILE_COLUMNS = (*WALL_METRICS, "wall_time_s", "finished_at")
#: the simulator timeline columns (``Simulator.acc.timeline``)
TIMELINE_COLUMNS = (
    "t",
    "train_busy_gpus",
    "loan_busy_gpus",
    "loaned_servers",
    "queue_len",
    "running",
    "inference_util",
)
CSV_NAME = "results.csv"
SERIES_DIR = "episodes"

Key = tuple[str, str, int, str]  # (suite, scenario, seed, policy)


def row_key(row: Mapping[str, Any]) -> Key:
    return (str(row["suite"]), str(row["scenario"]), int(row["seed"]), str(row["policy"]))


def parse_row(raw: Mapping[str, str]) -> dict[str, Any]:
    """A CSV row (all strings) -> typed values; raises ValueError on a malformed row."""
    missing = [c for c in COLUMNS if c not in raw or raw[c] is None]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    out: dict[str, Any] = {}
    for c in COLUMNS:
        v = raw[c]
        if c == "seed":
            out[c] = int(v)
        elif c in METRIC_TYPES:
            t = METRIC_TYPES[c]
            if v == "":
                out[c] = None
            elif t is bool:
                if v not in ("True", "False"):
                    raise ValueError(f"{c}: expected True or False, got {v!r}")
                out[c] = v == "True"
            elif t is int:
                out[c] = int(v)
            else:
                x = float(v)
                if not math.isfinite(x):
                    # rows are written with "" for a value that is not finite: "nan" or "inf"
                    # here was typed in by hand (was: accepted, and ranked as if it were a value)
                    raise ValueError(f"{c}: not a finite number: {v!r}")
                out[c] = x
        elif c == "wall_time_s":
            out[c] = float(v)
        else:
            out[c] = v
    return out


@dataclass(frozen=True)
class RowSchema:
    """What a results CSV holds: its columns, how a row (strings) is typed (ValueError when it
    does not parse) and which episode a row is. The leaderboard's is :data:`LEADERBOARD`; the
    reclaim suite has its own, and both share the scan, append, digest and rewrite code here."""

    columns: Sequence[str]
    parse: Callable[[Mapping[str, str]], dict[str, Any]]
    key: Callable[[Mapping[str, Any]], Any]
    #: whose results these are, for messages
    name: str = "a leaderboard suite"


LEADERBOARD = RowSchema(COLUMNS, parse_row, row_key)


#: every results schema in use (another kind of suite adds its own with :func:`register_schema`),
#: so that a folder holding the other kind's results is named as such
_SCHEMAS: list[RowSchema] = [LEADERBOARD]


def register_schema(schema: RowSchema) -> RowSchema:
    """Make ``schema`` known to :func:`scan_rows`' messages; returns it."""
    if all(s.name != schema.name for s in _SCHEMAS):
        _SCHEMAS.append(schema)
    return schema


def _some(names: list[str], n: int = 6) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "") if names else "-"


def row_digest(values: Sequence[str]) -> str:
    """SHA-256 (16 hex digits) of a row's CSV fields as written (strings, in COLUMNS order)."""
    return hashlib.sha256(json.dumps(list(values)).encode()).hexdigest()[:16]


def digest_path(csv_path: Path) -> Path:
    """The side file holding one digest per row written (``results.csv.digests``)."""
    return csv_path.with_name(csv_path.name + ".digests")


@dataclass
class RowScan:
    """A results CSV read row by row, with what is wrong with which line.

    * ``damaged``: lines that do not parse (a wrong number of fields, a bad value); ``cut`` is
      the subset made of a last line without its newline (an interrupted write);
    * ``duplicated``: lines whose episode already has an identical earlier row;
    * ``conflicting``: lines whose episode already has an earlier row with other numbers;
    * ``edited``: lines whose digest is not in ``results.csv.digests`` (changed after writing);
      ``None`` when there is no digest file (results of an older version: not checked).
    """

    path: Path
    rows: list[dict[str, Any]]  # good rows, first of each episode, typed
    lines: list[int]  # line number of each good row
    damaged: list[tuple[int, str]] = field(default_factory=list)  # (line, why)
    cut: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    conflicting: list[int] = field(default_factory=list)
    edited: list[int] | None = None
    edited_keys: set[Key] = field(default_factory=set)

    @property
    def problems(self) -> int:
        return len(self.damaged) + len(self.duplicated) + len(self.conflicting) + len(self.edited or [])

    def describe(self) -> list[str]:
        """One line per kind of problem (empty when the file is clean)."""
        out = []
        cut = set(self.cut)
        real = [(ln, why) for ln, why in self.damaged if ln not in cut]
        if self.cut:
            out.append(f"{len(self.cut)} incomplete last row (line {self.cut[0]}, cut by an interruption)")
        if real:
            ex = "; ".join(f"line {ln}: {why}" for ln, why in real[:3])
            out.append(f"{len(real)} damaged row(s) that do not parse ({ex})")
        if self.duplicated:
            out.append(f"{len(self.duplicated)} duplicated row(s) (lines {_lines(self.duplicated)}; the first copy is kept)")
        if self.conflicting:
            out.append(
                f"{len(self.conflicting)} conflicting row(s): an episode appears again with other "
                f"numbers (lines {_lines(self.conflicting)})"
            )
        if self.edited:
            out.append(
                f"{len(self.edited)} edited row(s): changed after they were written, their digest is "
                f"not in {digest_path(self.path).name} (lines {_lines(self.edited)})"
            )
        return out



def move_aside(csv_path: Path, say: Any) -> Path:
    """Move a results file (and its digests) to a backup that cannot collide; say where."""
    bak = unique_backup(csv_path)
    os.replace(csv_path, bak)
    dig = digest_path(csv_path)
    if dig.exists():
        os.replace(dig, bak.with_name(bak.name + ".digests"))
    say(f"moved the previous results to {bak}")
    return bak

def _lines(xs: Sequence[int]) -> str:
    head = ", ".join(str(x) for x in xs[:8])
    return head + (f" and {len(xs) - 8} more" if len(xs) > 8 else "")


def _read_digests(csv_path: Path) -> set[str] | None:
    p = digest_path(csv_path)
    if not p.exists():
        return None
    try:
        return {ln.strip() for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()}
    except (OSError, UnicodeDecodeError):
        return set()


def scan_rows(path: str | os.PathLike[str], schema: RowSchema = LEADERBOARD) -> RowScan:
    """Read a results CSV and classify its lines (see :class:`RowScan`).

    A header that is not this version's schema is a :class:`ConfigError`; a folder, an
    unreadable or binary file too.
    """

    p = check_readable_file(path, "results CSV")
    try:
        raw_bytes = p.read_bytes()
        # a byte-order mark (a results.csv saved by a spreadsheet) is dropped, as in traces
        text = raw_bytes.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: is not a UTF-8 text CSV (a binary file?); give a results.csv") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if "\x00" in text[:8192]:
        raise ConfigError(f"{p}: is a binary file, not a results CSV; give a results.csv")
    digests = _read_digests(p)
    ends_cleanly = text.endswith("\n")

    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        header = []
    except csv.Error as exc:
        raise ConfigError(f"{p}: not a CSV file ({exc}); give a results.csv") from None
    COLUMNS = list(schema.columns)  # noqa: N806 - this file's schema
    if header != COLUMNS:
        other = next((s for s in _SCHEMAS if s.name != schema.name and list(s.columns) == header), None)
        if other is not None:
            # was: "not this aryl-gym version's results schema (missing: <57 columns>; unexpected:
            # ...)" for the results of the other kind of suite in the same --out
            raise ConfigError(
                f"{p}: holds the results of {other.name}, not of {schema.name}; give this suite its "
                "own --out folder (or --overwrite to move the old results aside)"
            )
        extra = sorted(set(header) - set(COLUMNS))
        miss = sorted(set(COLUMNS) - set(header))
        raise ConfigError(
            f"{p}: its columns are not this aryl-gym version's results schema "
            f"(missing: {_some(miss)}; unexpected: {_some(extra)}); "
            "write to a fresh --out folder, or move the old results aside (leaderboard --overwrite, "
            "seed-study --fresh)"
        )
    scan = RowScan(p, [], [], edited=[] if digests is not None else None)
    first: dict[Any, tuple[int, list[str]]] = {}
    n_lines = text.count("\n") + (0 if ends_cleanly else 1)
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            scan.damaged.append((reader.line_num, f"not CSV: {exc}"))
            continue
        ln = reader.line_num
        if not fields:
            continue
        last = ln >= n_lines
        if len(fields) != len(COLUMNS):
            scan.damaged.append((ln, f"{len(fields)} fields, expected {len(COLUMNS)}"))
            if last and not ends_cleanly:
                scan.cut.append(ln)
            continue
        try:
            row = schema.parse(dict(zip(COLUMNS, fields)))
        except ValueError as exc:
            scan.damaged.append((ln, str(exc)))
            if last and not ends_cleanly:
                scan.cut.append(ln)
            continue
        k = schema.key(row)
        edited = digests is not None and row_digest(fields) not in digests
        if k in first:
            if fields == first[k][1]:
                scan.duplicated.append(ln)
            else:
                scan.conflicting.append(ln)
            continue
        if edited:
            assert scan.edited is not None
            scan.edited.append(ln)
            scan.edited_keys.add(k)
        first[k] = (ln, fields)
        scan.rows.append(row)
        scan.lines.append(ln)
    return scan


def read_rows(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """Rows of a results CSV, typed (the first of each episode); returns ``(rows, n_bad)``.

    ``n_bad`` counts the lines left out (damaged or duplicated); :func:`scan_rows` says which
    and why. A header that is not this version's schema is a :class:`ConfigError`.
    """
    scan = scan_rows(path)
    return scan.rows, len(scan.damaged) + len(scan.duplicated) + len(scan.conflicting)


def _fmt(v: Any) -> Any:
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    if v is None:
        return ""
    return v


class CsvAppender:
    """Append rows to the results CSV, one ``write`` per row, fsync-ed (so a kill loses none).

    Each row's digest goes to ``results.csv.digests`` first, so :func:`scan_rows` can tell a row
    changed by hand from one written here.
    """

    def __init__(self, path: Path, schema: RowSchema = LEADERBOARD):
        self.path = path
        self.columns = list(schema.columns)
        new = not path.exists() or path.stat().st_size == 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._dfd = os.open(digest_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if new:
            self._write(self._fd, _csv_line(self.columns))
        elif not _ends_with_newline(path):
            self._write(self._fd, "\n")  # a cut last line stays a line of its own

    @staticmethod
    def _write(fd: int, text: str) -> None:
        data = text.encode("utf-8")
        while data:
            n = os.write(fd, data)
            data = data[n:]
        os.fsync(fd)

    def append(self, row: Mapping[str, Any]) -> None:
        fields = [str(_fmt(row[c])) for c in self.columns]
        self._write(self._dfd, row_digest(fields) + "\n")
        self._write(self._fd, _csv_line(fields))

    def close(self) -> None:
        for fd in (self._fd, self._dfd):
            try:
                os.close(fd)
            except OSError:
                pass


def _csv_line(fields: Sequence[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(fields)
    return buf.getvalue()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def rewrite_rows(path: Path, rows: Sequence[Mapping[str, Any]], schema: RowSchema = LEADERBOARD) -> None:
    """Atomically replace ``path`` with exactly ``rows`` (and its digest file to match)."""

    lines = [_csv_line(list(schema.columns))]
    digests = []
    for r in rows:
        fields = [str(_fmt(r[c])) for c in schema.columns]
        lines.append(_csv_line(fields))
        digests.append(row_digest(fields) + "\n")
    atomic_write_text(digest_path(path), "".join(digests))
    atomic_write_text(path, "".join(lines))


def make_row(out: EpisodeOutput) -> dict[str, Any]:
    """The row of a finished episode (:data:`COLUMNS`)."""
    task, res = out.task, out.result
    assert res is not None
    d = res.to_dict()
    env_id, env_kwargs = out.env_used
    agent = task.agent is not None
    row: dict[str, Any] = {
        "suite": task.suite,
        "scenario": task.scenario_name,
        "scenario_name": res.scenario,
        "env_id": env_id,
        "env_version": env_version(env_id),
        "seed": task.seed,
        "policy": task.policy,
        "kind": "agent" if agent else "policy",
        "source": task.agent if agent else "",
        "env_kwargs": json.dumps(dict(env_kwargs), sort_keys=True, default=str) if agent else "",
    }
    for k, t in METRIC_TYPES.items():
        v = d.get(k)
        if v is not None and t is float:
            v = float(v)
        row[k] = v
    row.update(
        wall_time_s=round(out.wall_s, 6),
        commit=task.commit,
        config_hash=task.config_hash,
        aryl_gym_version=__version__,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        note=out.note,
    )
    return row


def make_series(res: EpisodeResult, timeline: list[Any] | None) -> dict[str, Any]:
    return {
        "combined_usage_hourly": [float(x) for x in res.combined_usage_hourly],
        "jcts": [float(x) for x in res.jcts],
        "queue_times": [float(x) for x in res.queue_times],
        "timeline_columns": list(TIMELINE_COLUMNS),
        "timeline": [[float(x) for x in r] for r in timeline] if timeline is not None else None,
    }


# ----------------------------------------------------------------------------------------------
# Series files
# ----------------------------------------------------------------------------------------------


def series_path(out_dir: Path, scenario: str, policy: str, seed: int) -> Path:
    return out_dir / SERIES_DIR / slug(scenario) / slug(policy) / f"seed{seed}.json.gz"


def write_series(path: Path, series: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(series, separators=(",", ":"))
    atomic_write_bytes(path, gzip.compress(text.encode("utf-8"), mtime=0))


def read_series(path: Path) -> dict[str, Any] | None:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError, EOFError, zlib.error):  # EOFError: a cut .gz (was: a traceback)
        return None


def series_for(out_dir: Path, rows: Iterable[Mapping[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Series of each row that has its file (missing or unreadable files are left out)."""
    out: dict[Key, dict[str, Any]] = {}
    for r in rows:
        s = read_series(series_path(out_dir, r["scenario"], r["policy"], int(r["seed"])))
        if s is not None:
            out[row_key(r)] = s
    return out
