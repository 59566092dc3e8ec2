"""Trace formats: one module each in this package, registered on import.

A format module defines ``FORMAT = TraceFormat(...)``: its name, a reader that turns a file into
validated :class:`~aryl_gym.workload.traces_formats.TraceRows`, the column its submit times come
from (for messages), whether those times are absolute dates, and optionally how to recognise a
file by its name. Modules are discovered automatically, so adding a format is one new module (here, or in another
package through the entry-point group ``aryl_gym.trace_formats``);
:func:`~aryl_gym.workload.traces.load_trace` does the format-independent rest (order, time
window, duplicates, ``max_jobs``, mapping to jobs).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aryl_gym.errors import ConfigError

if TYPE_CHECKING:
    from aryl_gym.workload.traces_formats import LoadReport, TraceRows


class TraceMap(Protocol):
    """What readers use of a map (:class:`aryl_gym.workload.traces.TraceMap`)."""

    @property
    def columns(self) -> Mapping[str, str]: ...
    @property
    def units(self) -> Mapping[str, Any]: ...
    @property
    def options(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ReadRequest:
    """What a reader gets: the resolved file, the report to fill, the trace options (the map's
    merged with the caller's), the delimiter (option, else the map's), the map, the data root
    and whether bad rows are skipped."""

    path: Path
    report: LoadReport
    options: Mapping[str, Any]
    delimiter: Any
    tmap: TraceMap
    data_root: str | os.PathLike[str] | None
    skip: bool


@dataclass(frozen=True)
class TraceFormat:
    """One trace format (see the module docstring)."""

    name: str
    #: file -> validated rows (file-level errors raise; bad rows raise or are counted per ``skip``)
    read: Callable[[ReadRequest], TraceRows]
    description: str = ""
    #: the column holding submit times, for messages; ``None``: the map's ``columns.submit``
    time_column: str | None = None
    #: submit times are absolute dates (a time window may then name timestamps)
    absolute_time: Callable[[TraceMap], bool] = lambda tmap: False
    #: rows are always sorted by submit time (else only with option ``sort``)
    always_sort: bool = False
    #: recognises a file of this format by its path (for ``--trace`` without ``--trace-format``)
    guess: Callable[[str], bool] | None = None


_FORMATS: dict[str, TraceFormat] = {}
_loaded = False


def register_trace_format(fmt: TraceFormat) -> TraceFormat:
    if fmt.name in _FORMATS and _FORMATS[fmt.name] is not fmt:
        raise ValueError(f"trace format {fmt.name!r} registered twice")
    _FORMATS[fmt.name] = fmt
    return fmt


#: the entry-point group through which installed packages add trace formats
ENTRY_POINT_GROUP = "aryl_gym.trace_formats"


def _load(force: bool = False) -> None:
    """Register the format modules of this package, then those of installed plugins (an entry
    point in ``aryl_gym.trace_formats`` naming a :class:`TraceFormat` or a module defining
    ``FORMAT``). Once; ``force`` rescans."""
    global _loaded
    if _loaded and not force:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        fmt = getattr(mod, "FORMAT", None)
        if isinstance(fmt, TraceFormat):
            register_trace_format(fmt)

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        fmt = getattr(obj, "FORMAT", obj)
        if not isinstance(fmt, TraceFormat) or fmt.name != ep.name:
            raise ValueError(
                f"trace-format plugin {ep.name!r} ({ep.value}) must name a TraceFormat called {ep.name!r}"
            )
        if _FORMATS.get(fmt.name) is not fmt:
            register_trace_format(fmt)
    _loaded = True


def trace_formats(reload: bool = False) -> dict[str, TraceFormat]:
    """Every registered format by name (built-in modules by name, then plugins)."""
    _load(reload)
    return dict(_FORMATS)


def format_names() -> tuple[str, ...]:
    return tuple(trace_formats())


def get_format(name: str) -> TraceFormat:
    """The format ``name``, or a ConfigError listing the known ones."""

    fmts = trace_formats()
    if name not in fmts:
        raise ConfigError(f"unknown trace format {name!r}; use one of {', '.join(fmts)}")
    return fmts[name]


def guess_format(path: str) -> str | None:
    """The format whose ``guess`` recognises ``path`` (first in name order), or ``None``."""
    for fmt in trace_formats().values():
        if fmt.guess is not None and fmt.guess(path):
            return fmt.name
    return None
