"""Real traces: validated loaders and the mapping from a trace job to a :class:`JobSpec`.

Formats (``fmt``; details and examples in ``docs/traces.md``):

* ``philly``: the Philly per-job summary ``timestamp,duration,num_gpus,gpu_time,cluster``
  (``pollux-philly/traces/philly.csv``). Filters: ``vc`` (virtual cluster id, or a list),
  ``time_window``; the upstream file is not sorted, so rows are sorted by time (noted in the report).
* ``pollux``: Pollux workloads ``name,time,application,num_replicas,batch_size``. Job length is
  not a column: it follows from the application's profiles (``traces/<app>/``) as in Pollux's
  simulator (:mod:`aryl_gym.workload.traces_pollux`).
* ``gavel``: Gavel's old 7-field tab-separated ``.trace``; length = ``total_steps`` / V100
  throughput from ``simulation_throughputs.json``.
* ``csv``: any CSV with a column mapping (YAML ``--map`` or ``--columns``/``--units``).
* The inference-utilization series CSV (``time,utilization``) is read by
  :func:`aryl_gym.sim.loaning.load_utilization_csv` (scenario ``inference.mode: csv``).

Validation: every row is checked (missing value, unparsable time or number, duration <= 0,
0 GPUs, a job larger than the training pool, rows out of time order where order matters,
duplicates); a bad row raises :class:`TraceError` naming file, line, column and the fix, or with
``skip_bad_rows`` is skipped and counted by reason in the :class:`LoadReport`. An empty file,
a missing column or a wrong delimiter always raise.

Mapping rules (the one place they are defined; ``docs/traces.md`` restates them)
-------------------------------------------------------------------------------
All draws come from the ``rng`` passed in (the scenario's job stream), in file order.

1. **Family.** A row that names a model maps through :attr:`MappingRules.families`
   (``ResNet-50`` -> ``resnet50``, ``LM`` -> ``lstm``, Pollux apps map to themselves, other names
   are lower-cased). A row without a model (Philly) draws one: with probability
   ``elastic_family_share`` (default: the scenario's ``workload.elastic_fraction``) one of the
   paper's elastic families (resnet50, vgg16, bert, gnmt16), else one of the generator's
   inelastic families, uniformly.
2. **Elastic** iff the family is in ``elastic_families`` (default: the paper's four plus the
   Pollux applications cifar10, deepspeech2, imagenet, yolov3; ncf stays inelastic as Pollux never
   scales it).
3. **GPUs per worker.** The trace's total GPUs ``G`` are kept exactly. Elastic jobs are data-
   parallel with ``g = elastic_gpus_per_worker`` (default 1) GPUs per worker; inelastic jobs use
   one worker when ``G`` fits a training server and is 1, 2, 4 or 8, else the largest
   ``g`` in {8, 4, 2, 1} that divides ``G`` and fits a server. ``w_max = G / g``. Pollux
   replicas are always 1-GPU workers (``w_max = num_replicas``), as in Pollux.
4. **Request and elastic range** (World v1). A job requests the trace's count, ``w_req = G / g``.
   An elastic job requests its base demand, ``w_min = w_req``, and may grow to
   ``w_max = r x w_req`` (capped by the training pool), ``r`` drawn uniformly from the powers of
   two in ``[2, elastic_range]`` (default: the scenario's ``workload.elastic_range``, fitted
   from the Pollux profiles' scalability). Pollux-workload jobs are the exception: their
   replicas were chosen at 50-80% scaling efficiency (TunedJobs), where the profiles show
   efficiency falling, so they keep ``w_max = w_req = num_replicas`` and may shrink to
   ``max(1, ceil(w_req x elastic_min_fraction))``. Inelastic ``w_min = w_req = w_max``.
5. **Type-agnostic** with probability ``type_agnostic_fraction`` (default: the scenario's).
6. **Work** (V100 worker-seconds) ``= duration x w_req x speed(gpu, family)`` where ``duration``
   is the trace's running time on ``gpu`` (the row's GPU type, else ``duration_gpu``, default
   V100; Pollux profiles were measured on T4). So the job runs exactly ``duration`` at its
   request on that GPU type (as the trace recorded it), and GPU-time = work x g / speed.
7. **Predicted work** ``= work x exp(N(0, prediction_sigma))`` (default: the scenario's sigma).
8. **Time.** Submit times are seconds from the episode start: the ``time_window`` start if given,
   else the first job (absolute-time traces: Philly, CSV datetimes) or trace time 0 (relative
   traces). ``time_compression = k`` divides these offsets by ``k`` (arrivals ``k`` times denser,
   durations unchanged: offered load x ``k``).

Assumptions stated: Philly records no GPU model, so durations are taken as V100 seconds; Philly
jobs that failed or were killed count as jobs of their recorded duration; Pollux jobs keep their
workload file's replicas and batch size as ``w_max`` and ``batch_size`` (``app`` names the
profile), so a Pollux-style policy can re-derive goodput from the profiles.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np

from aryl_gym.config import (
    DEFAULT_GPU_TYPES,
    ClusterConfig,
    ConfigError,
    ScenarioConfig,
    load_yaml,
    size_limits_lifted,
)
from aryl_gym.families import INELASTIC_FAMILIES
from aryl_gym.sim.jobs import ELASTIC_FAMILIES, JobSpec, JobSpecBuilder
from aryl_gym.workload.formats import ReadRequest, format_names, get_format, guess_format
from aryl_gym.workload.paths import resolve_data_path
from aryl_gym.workload.traces_formats import (
    CSV_COLUMN_KEYS,
    GPU_UNITS,
    TIME_UNITS,
    LoadReport,
    RowChecks,
    TraceError,
    TraceExtra,
    TraceRows,
    check_delimiter,
    parse_datetime,
)

__all__ = [
    "LoadReport",
    "MappingRules",
    "TraceError",
    "TraceMap",
    "check_time_window",
    "load_map",
    "load_scenario_trace",
    "load_trace",
    "trace_stats",
]


#: the latest submit time a job may have, in seconds after the episode's start (ten years; a
#: trace spanning more is a unit slip or a corrupt row, and the episode's series would not fit)
MAX_SPAN_S = 10 * 365 * 86400.0

#: Trace model names -> our families (Gavel job types, Pollux apps, common names).
DEFAULT_FAMILY_MAP: dict[str, str] = {
    "ResNet-50": "resnet50",
    "ResNet-18": "resnet18",
    "Transformer": "transformer",
    "LM": "lstm",
    "Recommendation": "recommendation",
    "CycleGAN": "gan",
    "A3C": "rl",
    "VGG16": "vgg16",
    "VGG-16": "vgg16",
    "BERT": "bert",
    "GNMT": "gnmt16",
    "GNMT-16": "gnmt16",
}
POLLUX_ELASTIC_APPS = ("cifar10", "deepspeech2", "imagenet", "yolov3")

TRACE_OPTION_KEYS = (
    "vc",
    "time_window",
    "time_compression",
    "max_jobs",
    "skip_bad_rows",
    "duplicates",
    "sort",
    "delimiter",
    "filter",
    "fractional_gpus",
    "profiles",
    "profile_gpu",
    "profile_gpus_per_node",
    "throughputs",
    "gavel_gpu",
    "gavel_extrapolate",
)


#: trace options that only one built-in reader reads (a plugin format may read any option)
FORMAT_ONLY_OPTIONS: dict[str, tuple[str, ...]] = {
    "vc": ("philly",),
    "profiles": ("pollux",),
    "profile_gpu": ("pollux",),
    "profile_gpus_per_node": ("pollux",),
    "throughputs": ("gavel",),
    "gavel_gpu": ("gavel",),
    "gavel_extrapolate": ("gavel",),
    "fractional_gpus": ("csv",),
}
BUILTIN_FORMATS = ("csv", "gavel", "philly", "pollux")


@dataclass(frozen=True)
class MappingRules:
    """Rules from a trace job to a :class:`JobSpec` (see the module docstring). ``None`` fields
    take the scenario's ``workload`` value."""

    elastic_families: tuple[str, ...] = ELASTIC_FAMILIES + POLLUX_ELASTIC_APPS
    elastic_family_share: float | None = None
    elastic_min_fraction: float | None = None
    elastic_range: float | None = None
    elastic_gpus_per_worker: int = 1
    type_agnostic_fraction: float | None = None
    prediction_sigma: float | None = None
    duration_gpu: str = "V100"
    families: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_FAMILY_MAP))

    def resolved(self, cfg: ScenarioConfig | None) -> MappingRules:
        w = cfg.workload if cfg is not None else None

        def pick(v: Any, name: str, default: float) -> float:
            return float(v) if v is not None else float(getattr(w, name) if w else default)

        return replace(
            self,
            elastic_family_share=pick(self.elastic_family_share, "elastic_fraction", 0.03),
            elastic_min_fraction=pick(self.elastic_min_fraction, "elastic_min_fraction", 0.5),
            elastic_range=pick(self.elastic_range, "elastic_range", 4.0),
            type_agnostic_fraction=pick(self.type_agnostic_fraction, "type_agnostic_fraction", 0.21),
            prediction_sigma=pick(self.prediction_sigma, "prediction_sigma", 0.0),
        )

    def family_of(self, model: str) -> str:
        return self.families.get(model, model.strip().lower().replace("-", "").replace(" ", ""))


@dataclass(frozen=True)
class TraceMap:
    """A map file: CSV ``columns``/``units``/``delimiter``/``sort`` and mapping ``rules``."""

    columns: Mapping[str, str] = field(default_factory=dict)
    units: Mapping[str, Any] = field(default_factory=dict)
    delimiter: str = ","
    sort: bool = False
    rules: MappingRules = field(default_factory=MappingRules)
    options: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<map>"


_MAP_KEYS = ("columns", "units", "delimiter", "sort", "rules", "options")
_UNIT_KEYS = ("time", "duration", "time_format", "gpu_type", "gpus")


def _check_fraction(src: str, key: str, v: Any) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1):
        raise ConfigError(f"{src}: rules.{key} must be a number in [0, 1], got {v!r}")


def load_map(spec: str | os.PathLike[str] | Mapping[str, Any] | TraceMap | None) -> TraceMap:
    """A :class:`TraceMap` from a YAML path, a mapping, or ``None`` (defaults). Strict keys."""
    if spec is None:
        return TraceMap()
    if isinstance(spec, TraceMap):
        return spec
    if isinstance(spec, Mapping):
        data, src = spec, "<map>"
    else:
        src = str(spec)
        data = load_yaml(spec)
        if data is None:
            raise ConfigError(f"{src}: empty map file; give at least 'columns:' or 'rules:'")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{src}: a map file must be a mapping with keys {', '.join(_MAP_KEYS)}")
    bad = sorted(set(data) - set(_MAP_KEYS))
    if bad:
        raise ConfigError(f"{src}: unknown key '{bad[0]}'. Allowed keys: {', '.join(_MAP_KEYS)}")
    cols = dict(data.get("columns") or {})
    bad = sorted(set(cols) - set(CSV_COLUMN_KEYS))
    if bad:
        raise ConfigError(f"{src}: unknown column role '{bad[0]}'. Allowed: {', '.join(CSV_COLUMN_KEYS)}")
    for k, v in cols.items():
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{src}: columns.{k} must be a column name (string), got {v!r}")
    units = dict(data.get("units") or {})
    bad = sorted(set(units) - set(_UNIT_KEYS))
    if bad:
        raise ConfigError(f"{src}: unknown key '{bad[0]}' in units. Allowed: {', '.join(_UNIT_KEYS)}")
    if units.get("time", "s") not in (*TIME_UNITS, "datetime"):
        raise ConfigError(f"{src}: units.time must be one of {', '.join(TIME_UNITS)} or datetime, got {units['time']!r}")
    if units.get("duration", "s") not in TIME_UNITS:
        raise ConfigError(f"{src}: units.duration must be one of {', '.join(TIME_UNITS)}, got {units['duration']!r}")
    if units.get("gpus", "count") not in GPU_UNITS:
        raise ConfigError(f"{src}: units.gpus must be one of {', '.join(GPU_UNITS)} (how many make one GPU: "
                          f"1, 1000, 100), got {units['gpus']!r}")
    rd = dict(data.get("rules") or {})
    rfields = {f.name for f in fields(MappingRules)}
    bad = sorted(set(rd) - rfields)
    if bad:
        raise ConfigError(f"{src}: unknown key '{bad[0]}' in rules. Allowed: {', '.join(sorted(rfields))}")
    for k in ("elastic_family_share", "elastic_min_fraction", "type_agnostic_fraction"):
        _check_fraction(src, k, rd.get(k))
    er = rd.get("elastic_range")
    if er is not None and (isinstance(er, bool) or not isinstance(er, (int, float)) or not er >= 1):
        raise ConfigError(f"{src}: rules.elastic_range must be a number >= 1 (1 = no growth), got {er!r}")
    if "elastic_families" in rd:
        rd["elastic_families"] = tuple(rd["elastic_families"])
    if "families" in rd:
        rd["families"] = {**DEFAULT_FAMILY_MAP, **dict(rd["families"])}
    if rd.get("elastic_gpus_per_worker", 1) not in (1, 2, 4, 8):
        raise ConfigError(f"{src}: rules.elastic_gpus_per_worker must be 1, 2, 4 or 8")
    opts = dict(data.get("options") or {})
    _check_options(opts, f"{src}: options")
    delim = check_delimiter(data.get("delimiter", ","), src)
    return TraceMap(cols, units, delim, bool(data.get("sort", False)), MappingRules(**rd), opts, src)


def _check_options(opts: dict[str, Any], where: str) -> None:
    bad = sorted(set(opts) - set(TRACE_OPTION_KEYS))
    if bad:
        raise ConfigError(f"{where}: unknown trace option '{bad[0]}'. Allowed: {', '.join(TRACE_OPTION_KEYS)}")
    for key in ("sort", "skip_bad_rows", "gavel_extrapolate"):
        v = opts.get(key)
        # was: any value read as its truth, so sort="false" or --trace-option skip_bad_rows=off
        # (text) sorted the rows or skipped bad rows silently
        if v is not None and not isinstance(v, bool) and not (type(v) is int and v in (0, 1)):
            raise ConfigError(f"{where}: {key} must be true or false, got {v!r}")
    gpn = opts.get("profile_gpus_per_node")
    if type(gpn) is float and gpn.is_integer():
        gpn = opts["profile_gpus_per_node"] = int(gpn)
    if gpn is not None and (isinstance(gpn, bool) or not isinstance(gpn, int) or gpn < 1):
        # was: 0 or a negative count hung the profile computation, 'four' raised ValueError,
        # 4.5 was read as 4
        raise ConfigError(f"{where}: profile_gpus_per_node must be an integer >= 1 (GPUs per node of "
                          f"the profiled cluster; Pollux's testbed had 4), got {gpn!r}")
    if opts.get("duplicates", "error") not in ("error", "keep"):
        raise ConfigError(f"{where}: duplicates must be 'error' (bad rows) or 'keep', got {opts['duplicates']!r}")
    tc = opts.get("time_compression")
    if tc is not None and (isinstance(tc, bool) or not isinstance(tc, (int, float)) or not 0 < tc < math.inf):
        raise ConfigError(f"{where}: time_compression must be a finite number > 0, got {tc!r}")
    mj = opts.get("max_jobs")
    if type(mj) is float and mj.is_integer() and mj <= 2**53:  # max_jobs: 1e3 (YAML reads a float)
        mj = opts["max_jobs"] = int(mj)
    if mj is not None and (isinstance(mj, bool) or not isinstance(mj, int) or mj < 1):
        raise ConfigError(f"{where}: max_jobs must be an integer >= 1, got {mj!r}")
    vc = opts.get("vc")
    if vc is not None:
        items = list(vc) if isinstance(vc, (list, tuple, set, frozenset)) else [vc]
        for v in items:
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise ConfigError(
                    f"{where}: vc {v!r} is not a virtual cluster id: give the id as text, quoted in "
                    "YAML (vc: \"6214e9\"; unquoted, YAML reads 6214e9 as the number 6.214e12)")
        # an integer id (YAML reads vc: 103959 as a number) is its own text
        vc = opts["vc"] = [str(v) for v in items] if isinstance(vc, (list, tuple, set, frozenset)) else str(vc)
    if vc is not None and not [v for s in ([vc] if isinstance(vc, str) else vc) for v in str(s).split(",")
                               if v.strip()]:
        # was: '' read every virtual cluster
        raise ConfigError(f"{where}: vc {vc!r} names no virtual cluster; give one id or a comma-separated "
                          "list (or leave vc out for every cluster)")
    if "delimiter" in opts:
        opts["delimiter"] = check_delimiter(opts["delimiter"], f"{where}: delimiter")  # type: ignore[index]
    if opts.get("fractional_gpus", "error") not in ("error", "ceil"):
        raise ConfigError(f"{where}: fractional_gpus must be 'error' (bad rows, reason fractional-gpu) "
                          f"or 'ceil' (round up to whole GPUs), got {opts['fractional_gpus']!r}")
    if "filter" in opts:
        opts["filter"] = parse_row_filter(opts["filter"], where)  # type: ignore[index]
    check_time_window(opts.get("time_window"), f"{where}: time_window")


def parse_row_filter(spec: Any, where: str) -> dict[str, list[str]]:
    """A row filter: ``{column: value or [values]}`` or the text ``COL=V1|V2;COL2=V``."""
    fix = "give filter as COLUMN=VALUE (e.g. filter=pod_phase=Succeeded, several values V1|V2, several columns ';')"
    if isinstance(spec, Mapping):
        out = {}
        for k, v in spec.items():
            vals = list(v) if isinstance(v, (list, tuple, set)) else [v]
            if not vals:
                raise ConfigError(f"{where}: filter.{k} lists no values; {fix}")
            out[str(k)] = [str(x) for x in vals]
        return out
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{where}: filter {spec!r} is empty or not text; {fix}")
    out = {}
    for part in spec.split(";"):
        if "=" not in part or not part.split("=", 1)[0].strip():
            raise ConfigError(f"{where}: filter part {part!r} has no COLUMN=VALUE; {fix}")
        k, v = part.split("=", 1)
        out[k.strip()] = [x.strip() for x in v.split("|")]
    return out


# ------------------------------------------------------------------------------------------------
# time window
# ------------------------------------------------------------------------------------------------
def _window_offset(text: str) -> float | None:
    """A window end given as an offset from the first job (``48h``, ``1.5d``, ``3600``), in
    seconds; None for an empty end or a timestamp."""
    s = text.strip()
    for unit in sorted(TIME_UNITS, key=len, reverse=True):
        if s.endswith(unit) and _finite(s[: -len(unit)]) is not None:  # 48h, 1.5d, 1e1h
            return float(s[: -len(unit)]) * TIME_UNITS[unit]
    return _finite(s) if s else None


def check_time_window(spec: Any, name: str = "time_window") -> None:
    """Refuse a window whose offsets cannot select jobs: a negative START offset (the episode
    would start that long before the first job: idle time at the start of every episode), a
    negative END offset (before the first job: no job kept), or an END offset not after the START
    offset. ``name`` is what the message calls the option (``--time-window``,
    ``workload.trace_options: time_window``). Timestamps and the shape are checked on load."""
    if spec is None:
        return
    parts = list(spec) if isinstance(spec, (list, tuple)) else str(spec).split(",")
    if len(parts) != 2:
        return  # parse_time_window says how to write it
    a_text, b_text = (str(x).strip() for x in parts)
    a, b = _window_offset(a_text), _window_offset(b_text)
    if a is not None and a < 0:
        raise ConfigError(
            f"{name} {spec!r}: the start offset {a_text!r} is negative; offsets count from the first "
            f"job's submit time (0 = the first job), so START must be >= 0: give e.g. "
            f"'0h,{b_text or '48h'}' (or a timestamp START on a trace with dates)")
    if b is not None and b < 0:
        raise ConfigError(
            f"{name} {spec!r}: the end offset {b_text!r} is negative, before the first job, so no job "
            "would be kept; give an END offset > 0 from the first job (e.g. '0h,48h')")
    if a is not None and b is not None and not b > a:
        raise ConfigError(
            f"{name} {spec!r}: the end {b_text!r} is not after the start {a_text!r}; give START,END "
            "with END > START (e.g. '0h,48h')")


def _parse_window_end(text: str, absolute: bool, t_first: float) -> float | None:
    s = text.strip()
    if not s:
        return None
    x = _window_offset(s)
    if x is not None:
        return t_first + x
    if not absolute:
        what = "is not a finite number" if s.lower().lstrip("+-") in ("nan", "inf", "infinity") else \
            "is not an offset and this trace has relative times"
        raise ConfigError(f"time_window end {text!r} {what}; give offsets like '2h' or '3600'")
    try:
        return parse_datetime(s)
    except ValueError:
        raise ConfigError(
            f"time_window end {text!r}: give an offset from the first job ('12h', '2d', '3600') "
            "or a timestamp 'YYYY-MM-DD HH:MM:SS'"
        ) from None


def _finite(text: str) -> float | None:
    """``text`` as a finite number (``3600``, ``1.5``, ``1e1``), else None."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def parse_time_window(spec: Any, absolute: bool, t_first: float) -> tuple[float | None, float | None]:
    """``"START,END"`` (either may be empty) or a two-element list -> absolute trace seconds."""
    if spec is None:
        return None, None
    parts = list(spec) if isinstance(spec, (list, tuple)) else str(spec).split(",")
    if len(parts) != 2:
        raise ConfigError(f"time_window {spec!r}: give 'START,END' (e.g. '0h,48h' or '2017-10-01 00:00:00,2017-10-08 00:00:00')")
    check_time_window(spec)
    a = _parse_window_end(str(parts[0]), absolute, t_first)
    b = _parse_window_end(str(parts[1]), absolute, t_first)
    if a is None and b is None:  # was: ',' read the whole trace
        raise ConfigError(f"time_window {spec!r}: give a START, an END or both (e.g. '0h,48h', '12h,'); "
                          "leave time_window out for the whole trace")
    if a is not None and b is not None and not b > a:
        raise ConfigError(f"time_window {spec!r}: the end must be after the start")
    return a, b


# ------------------------------------------------------------------------------------------------
# the pipeline
# ------------------------------------------------------------------------------------------------
def _split_gpus(total: int, server_gpus: int, elastic: bool, elastic_g: int,
                servers: int | None = None) -> tuple[int, int]:
    """(g, w_max) with g * w_max == total; g in {1,2,4,8}, g <= server_gpus (rule 3): the largest
    such g whose workers the ``servers`` training servers hold (a worker never spans servers:
    ``servers x (server_gpus // g)`` of them; g = 1 always fits a job that fits the pool), else
    the largest. Was: the largest g, so 12 GPUs on two 6-GPU servers were 3 workers of 4 (room
    for 2) rather than 6 of 2, and the trace was refused. Where g divides a server's GPUs (4- and
    8-GPU servers) the two agree."""
    cap = min(8, server_gpus)
    cands = [c for c in (8, 4, 2, 1) if c <= cap and total % c == 0]
    if elastic:
        cands = [c for c in cands if c <= elastic_g] or [1]
    if servers is not None:
        cands = [c for c in cands if total // c <= servers * (server_gpus // c)] or cands
    g = cands[0]
    return g, total // g


def _gpu_types(cfg: ScenarioConfig | None) -> Mapping[str, Any]:
    return cfg.gpu_types if cfg is not None else DEFAULT_GPU_TYPES


def _check_gpu_options(fmt: str, options: Mapping[str, Any], tmap: TraceMap, cfg: ScenarioConfig | None) -> None:
    """A GPU type named by an option for every row (Pollux ``profile_gpu``, a csv map's
    ``units.gpu_type`` without a ``gpu_type`` column) must be registered. Was: each row failed
    with "column 'gpu_type': GPU type ... is not registered" at line 2, naming a column the file
    does not have (and --skip-bad-rows skipped every row)."""
    types = _gpu_types(cfg)
    given: list[tuple[str, Any]] = []
    if fmt == "pollux":
        given.append(("trace option profile_gpu", options.get("profile_gpu", "T4")))
    if fmt == "csv" and not tmap.columns.get("gpu_type") and tmap.units.get("gpu_type"):
        given.append((f"{tmap.source}: units.gpu_type", tmap.units["gpu_type"]))
    elif fmt == "philly" or (fmt == "csv" and not tmap.columns.get("gpu_type")):
        given.append((f"{tmap.source}: rules.duration_gpu", tmap.rules.duration_gpu))
    for where, name in given:
        if not isinstance(name, str) or not (
                name in types or any(k.lower() == name.lower() for k in types)):
            raise ConfigError(f"{where} {name!r} is not a registered GPU type; use one of "
                              f"{', '.join(sorted(types))} or add it under gpu_types in the scenario")


def _as_scenario(cluster: ScenarioConfig | ClusterConfig | None) -> ScenarioConfig | None:
    if cluster is None or isinstance(cluster, ScenarioConfig):
        return cluster
    if isinstance(cluster, ClusterConfig):
        return ScenarioConfig(name="<cluster>", cluster=cluster)
    raise TypeError(f"cluster must be a ScenarioConfig or ClusterConfig, got {type(cluster).__name__}")


def load_trace(
    path: str | os.PathLike[str],
    fmt: str,
    map: str | os.PathLike[str] | Mapping[str, Any] | TraceMap | None = None,
    cluster: ScenarioConfig | ClusterConfig | None = None,
    rng: np.random.Generator | None = None,
    skip_bad_rows: bool = False,
    data_root: str | os.PathLike[str] | None = None,
    **opts: Any,
) -> tuple[list[JobSpec], LoadReport]:
    """Load, validate and map a trace to :class:`JobSpec` s (ids 0..n-1 in submit order).

    Args:
        path: the trace file (absolute, existing, or relative to the data root).
        fmt: ``philly``, ``pollux``, ``gavel`` or ``csv``.
        map: a map file / mapping / :class:`TraceMap`: CSV columns and units, mapping ``rules``,
            default ``options``. Required for ``csv`` (or pass ``columns=`` in ``opts``).
        cluster: the scenario (or its cluster section) the jobs are for: sizes are checked
            against its training pool, GPUs split by its server size, rule defaults taken from
            its ``workload``; ``None`` skips the size check (as ``trace-info`` does).
        rng: generator for the seeded mapping draws (default: ``default_rng(0)``).
        skip_bad_rows: skip and count bad rows instead of raising :class:`TraceError`.
        data_root: the folder holding ``traces/`` (default ``$ARYL_GYM_DATA`` or ``../shared``).
        **opts: trace options (``vc``, ``time_window``, ``time_compression``, ``max_jobs``,
            ``duplicates``, ``sort``, ``delimiter``, ``profiles``, ``profile_gpu``,
            ``profile_gpus_per_node``, ``throughputs``, ``gavel_gpu``, ``gavel_extrapolate``;
            for ``csv`` also ``columns`` and ``units`` dicts). They override the map's options.

    Returns:
        ``(jobs, report)``.
    """
    spec = get_format(fmt)
    cfg = _as_scenario(cluster)
    tmap = load_map(map)
    csv_cols = opts.pop("columns", None)
    csv_units = opts.pop("units", None)
    if csv_cols is not None or csv_units is not None:
        checked = load_map({"columns": {**tmap.columns, **(csv_cols or {})},
                            "units": {**tmap.units, **(csv_units or {})}})
        tmap = replace(tmap, columns=checked.columns, units=checked.units)
    options = {**tmap.options, **opts}
    _check_options(options, "trace options")
    for key, fmts in FORMAT_ONLY_OPTIONS.items():  # was: ignored by the other readers
        if options.get(key) is not None and fmt not in fmts and fmt in BUILTIN_FORMATS:
            raise ConfigError(
                f"trace options: {key} applies to {' and '.join(fmts)} traces only; this trace is "
                f"read as {fmt}: drop {key}" + (" (--vc)" if key == "vc" else "")
            )
    if not isinstance(skip_bad_rows, bool) and not (type(skip_bad_rows) is int and skip_bad_rows in (0, 1)):
        raise ConfigError(f"skip_bad_rows must be true or false, got {skip_bad_rows!r}")  # was: "false" skipped
    _check_gpu_options(fmt, options, tmap, cfg)
    skip = bool(skip_bad_rows or options.pop("skip_bad_rows", False))
    p = resolve_data_path(str(path), data_root)
    report = LoadReport(str(path), fmt)
    rules = tmap.rules.resolved(cfg)
    rng = rng if rng is not None else np.random.default_rng(0)
    delim = options.get("delimiter", tmap.delimiter)

    # 1. read and validate rows (vectorised; file-level errors always raise) ----------------------
    rows = spec.read(ReadRequest(p, report, options, delim, tmap, data_root, skip))
    if report.rows == 0:
        raise TraceError(p, "no data rows (empty trace)", "give a file with at least one job row", 2)
    absolute = spec.absolute_time(tmap)
    time_col = spec.time_column or tmap.columns.get("submit")
    if not absolute:
        # relative submit times are seconds from the trace's start (the episode's time 0): a
        # negative one was accepted by the gavel and csv readers, and the episode then failed in
        # the simulator with "job 0 (...): submit time must be finite and >= 0", naming no file,
        # line or fix, and beyond the reach of --skip-bad-rows
        chk = RowChecks(p, rows.line, report, skip)
        chk.flag(rows.submit < 0, time_col, "bad-time",
                 lambda i: f"negative submit time {rows.submit[i]:.12g} s",
                 "relative submit times are seconds >= 0 from the trace's start (for dates set "
                 "units.time: datetime)")
        rows = rows.take(np.flatnonzero(chk.finish()))

    # 2. order: sort, or reject rows earlier than the latest kept row (a running maximum) -------
    sort = spec.always_sort or bool(options.get("sort", tmap.sort))
    sub = rows.submit
    if len(rows) > 1:
        prev_max = np.maximum.accumulate(sub)[:-1]
        late = np.concatenate(([False], sub[1:] < prev_max))
    else:
        late = np.zeros(len(rows), dtype=bool)
    if sort:
        if late.any():
            rows = rows.take(np.lexsort((rows.line, sub)))
            report.notes.append("rows were not in time order; sorted by submit time (ties by line)")
    elif late.any():
        pos = np.arange(len(rows))
        last_kept = np.maximum.accumulate(np.where(late, -1, pos))
        prev = np.concatenate(([0], last_kept[:-1]))
        chk = RowChecks(p, rows.line, report, skip, order=pos)
        chk.flag(late, time_col, "unsorted",
                 lambda i: (f"submit time {_fmt_time(sub[i], absolute)} is before the previous row's "
                            f"{_fmt_time(sub[prev[i]], absolute)} (line {rows.line[prev[i]]})"),
                 "sort the file by submit time, or set sort: true (map) / --trace-option sort=true")
        rows = rows.take(np.flatnonzero(chk.finish()))

    # 3. time window ---------------------------------------------------------------------------
    t_first = float(rows.submit[0]) if len(rows) else 0.0
    w0, w1 = parse_time_window(options.get("time_window"), absolute, t_first)
    if w0 is not None or w1 is not None:
        out = np.zeros(len(rows), dtype=bool)
        if w0 is not None:
            out |= rows.submit < w0
        if w1 is not None:
            out |= rows.submit >= w1
        if len(rows) and out.all():
            # was: "no jobs left after filters and skipped rows", without the span a window
            # must fall in (a window in the wrong year, or offsets beyond the trace's end)
            lo, hi = float(rows.submit.min()), float(rows.submit.max())
            unit = "" if absolute else " s"
            raise TraceError(
                p, f"time_window {options.get('time_window')!r} selects none of the {len(rows):,} jobs "
                f"(after the other filters): they are submitted from {_fmt_time(lo, absolute)}{unit} to "
                f"{_fmt_time(hi, absolute)}{unit}, offsets 0 to {(hi - t_first) / 3600:.6g}h from the first job",
                "give a window within that span (offsets such as '0h,48h' count from the first job)",
                column=time_col)
        if out.any():
            report.filtered["outside time window"] += int(out.sum())
            rows = rows.take(np.flatnonzero(~out))

    # 4. duplicates (within the window), then max_jobs ---------------------------------------
    if options.get("duplicates", "error") != "keep" and len(rows):
        _, first = np.unique(rows.key, return_index=True)
        first_of = np.empty(int(rows.key.max()) + 1, dtype=np.int64)
        first_of[rows.key[first]] = first
        src = first_of[rows.key]
        dup = src != np.arange(len(rows))
        if dup.any():
            chk = RowChecks(p, rows.line, report, skip, order=np.arange(len(rows)))
            chk.flag(dup, None, "duplicate", lambda i: f"same job as line {rows.line[src[i]]}",
                     "remove the repeated row, or set trace option duplicates=keep if they are distinct jobs")
            rows = rows.take(np.flatnonzero(chk.finish()))

    mj = options.get("max_jobs")
    if mj is not None and len(rows) > mj:
        report.filtered["beyond max_jobs"] += len(rows) - mj
        rows = rows.take(np.arange(mj))

    _release_freed_memory()
    # 5. map to JobSpec -----------------------------------------------------------------------------
    origin = w0 if w0 is not None else ((float(rows.submit[0]) if len(rows) else 0.0) if absolute else 0.0)
    k = float(options.get("time_compression") or 1.0)
    if len(rows) and not size_limits_lifted():
        # was: accepted; a submit time of 1e300 s (a unit slip, a corrupt row) then failed
        # building the episode's inference series ("Maximum allowed size exceeded", no file named)
        off = (rows.submit - origin) / k
        chk = RowChecks(p, rows.line, report, skip, order=np.arange(len(rows)))
        chk.flag(off > MAX_SPAN_S, time_col, "huge-time",
                 lambda i: (f"submit time {_fmt_time(float(rows.submit[i]), absolute)} is {off[i]:.6g} s "
                            f"after the episode's start, more than {MAX_SPAN_S / (365 * 86400):g} years"
                            if absolute else f"submit time {off[i]:.6g} s is more than "
                            f"{MAX_SPAN_S / (365 * 86400):g} years after the episode's start"),
                 "check the time unit (units.time)" + (f", time_compression {k:g}" if k != 1.0 else "")
                 + " and the row, select part of the trace with time_window (or set ARYL_GYM_ALLOW_HUGE=1)")
        rows = rows.take(np.flatnonzero(chk.finish()))
    jobs = _map_rows(p, rows, rules, cfg, rng, origin, k, report, skip)
    report.jobs = len(jobs)
    if not jobs:
        raise TraceError(p, "no jobs left after filters and skipped rows",
                         "check the virtual cluster, time window and the report's skip reasons:\n" + report.summary())
    return jobs, report


def _fmt_time(x: float, absolute: bool) -> str:
    """A submit time for a message: a timestamp for absolute traces, else seconds in full
    (was ``{x:g}``: 1507532515 and 1507532475 both read 1.50753e+09)."""
    if absolute and math.isfinite(x):
        try:
            return (datetime(1970, 1, 1) + timedelta(seconds=x)).isoformat(sep=" ")
        except OverflowError:
            pass
    return f"{x:.12g}"


def _release_freed_memory() -> None:
    """Hand the read stage's freed buffers back to the OS before a million objects are built
    (pyarrow's pool and, on glibc, the C heap, which otherwise keeps them)."""
    try:
        # an optional dependency: its absence is handled here
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _map_rows(p: Path, rows: TraceRows, rules: MappingRules, cfg: ScenarioConfig | None,
              rng: np.random.Generator, origin: float, k: float, report: LoadReport,
              skip: bool) -> list[JobSpec]:
    n = len(rows)
    # Draws in a fixed order, one vector each (rules 1, 5, 7).
    u_fam = rng.random(n)
    i_fam = rng.integers(0, 1 << 30, n)
    u_ta = rng.random(n)
    sigma = float(rules.prediction_sigma or 0.0)
    err = np.exp(sigma * rng.standard_normal(n)) if sigma > 0 else np.ones(n)
    er = float(rules.elastic_range or 1.0)
    factors = np.array([2**i for i in range(1, 31) if 2**i <= er + 1e-9] or [1], dtype=np.int64)
    r_draw = factors[rng.integers(0, len(factors), n)]  # World v1 growth factor (rule 4)
    server = cfg.cluster.train_gpus_per_server if cfg else 8
    pool = cfg.cluster.train_gpus if cfg else None
    types = _gpu_types(cfg)
    el_set = set(rules.elastic_families)
    share = float(rules.elastic_family_share or 0.0)
    # 1. family: named models through the map (once per distinct name), else the draws;
    # families as integer codes into ``fam_names``
    fam_names: list[str] = list(ELASTIC_FAMILIES) + list(INELASTIC_FAMILIES)
    n_el = len(ELASTIC_FAMILIES)
    fam = np.where(u_fam < share, i_fam % n_el, n_el + i_fam % len(INELASTIC_FAMILIES)).astype(np.int64)
    if rows.model is not None and n:
        mcodes, mnames = _dict_codes(rows.model)
        for j, mname in enumerate(mnames):
            if mname:
                f = rules.family_of(mname)
                if f not in fam_names:
                    fam_names.append(f)
                fam[mcodes == j] = fam_names.index(f)
    el_of = np.array([f in el_set for f in fam_names], dtype=bool)
    elastic = el_of[fam]
    # 3./4. GPUs per worker and the worker range (once per distinct size)
    gpus = rows.gpus
    if rows.one_gpu_workers:
        g = np.ones(n, dtype=np.int64)
        w_max = gpus.copy()
    else:
        pair = gpus * 2 + elastic
        up, pinv = np.unique(pair, return_inverse=True)
        n_srv = cfg.cluster.train_servers if cfg else None
        split = [_split_gpus(int(q) // 2, server, bool(q % 2), rules.elastic_gpus_per_worker, n_srv)
                 for q in up.tolist()]
        g = np.array([s[0] for s in split], dtype=np.int64)[pinv.reshape(-1)]
        w_max = np.array([s[1] for s in split], dtype=np.int64)[pinv.reshape(-1)]
    # the request: the trace's GPU count in workers (rule 4)
    w_req = w_max.copy()
    w_min = w_max.copy()
    if rows.one_gpu_workers:
        # Pollux workloads: replicas chosen at 50-80% scaling efficiency (TunedJobs), already at
        # the edge of efficient scaling, so they may shrink but not grow
        frac = float(rules.elastic_min_fraction or 0.0)
        if elastic.any():
            uw, winv = np.unique(w_max[elastic], return_inverse=True)
            w_min[elastic] = np.array([max(1, math.ceil(w * frac - 1e-9)) for w in uw.tolist()], dtype=np.int64)[winv.reshape(-1)]
    elif elastic.any():
        # World v1: request the base demand, grow to r x request (capped by the training pool)
        # (and by the workers the training servers hold: the same where g divides a server)
        if cfg is not None and pool is not None:
            hold = np.minimum(pool // g, cfg.cluster.train_servers * (server // g))
        else:
            hold = (1 << 30) // g
        cap = np.maximum(hold, w_req)
        w_max = np.where(elastic, np.minimum(w_req * r_draw, cap), w_req).astype(np.int64)
    # 6. work on the row's GPU type (speed once per distinct (type, family))
    if rows.gpu_type is not None and n:
        gcodes, gnames = _dict_codes(rows.gpu_type)
        gnames = [x or rules.duration_gpu for x in gnames] + [rules.duration_gpu]
        gcodes[gcodes < 0] = len(gnames) - 1
    else:
        gcodes, gnames = np.zeros(n, dtype=np.int64), [rules.duration_gpu]
    combo = gcodes * len(fam_names) + fam
    uc, cinv = np.unique(combo, return_inverse=True)
    cinv = cinv.reshape(-1)
    sp = np.zeros(len(uc))
    unk = np.zeros(len(uc), dtype=bool)
    for j, cc in enumerate(uc.tolist()):
        gn, fm = gnames[cc // len(fam_names)], fam_names[cc % len(fam_names)]
        gt = types.get(gn) or next((v for kk, v in types.items() if kk.lower() == gn.lower()), None)
        if gt is None:
            unk[j] = True
        else:
            sp[j] = gt.speed_for(fm)
    speed, unknown = sp[cinv], unk[cinv]
    gname_of = np.array(gnames + [None], dtype=object)[:-1]
    chk = RowChecks(p, rows.line, report, skip, order=np.arange(n))
    if pool is not None:
        chk.flag(gpus > pool, None, "too-big", lambda i: f"job needs {gpus[i]} GPUs but the training pool has {pool}",
                 "use a bigger cluster (--train-servers) or drop the job")
    chk.flag(unknown, "gpu_type", "unknown-gpu", lambda i: f"GPU type {gname_of[gcodes[i]]!r} is not registered",
             f"use one of {', '.join(sorted(types))} or add it under gpu_types in the scenario")
    ok = chk.finish()
    work = rows.duration * w_req.astype(np.float64) * speed  # V100 worker-seconds, at the request
    pred = work * err
    ta = u_ta < float(rules.type_agnostic_fraction or 0.0)
    idx = np.flatnonzero(ok)
    del u_fam, i_fam, u_ta, err, combo, cinv, speed, unknown, ok  # free before the objects are built
    fam_obj = np.array(fam_names, dtype=object)
    empty: dict[str, Any] = {}
    jobs: list[JobSpec] = []
    # JobSpecs built in chunks: positional fields, one column each, built in C (map) rather than
    # a Python loop; chunks bound the temporary lists of Python values. The cyclic garbage
    # collector is paused meanwhile: these objects hold no cycles, and its passes over a heap
    # growing by a million objects would cost more than building them.
    build = cast(Callable[..., JobSpec], JobSpecBuilder)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for lo in range(0, idx.size, _CHUNK):
            ix = idx[lo:lo + _CHUNK]
            m = ix.size
            nones = [None] * m
            # submit offsets rounded to ms as round(x, 3); whole seconds need no rounding (exactly)
            off = (rows.submit[ix] - origin) / k
            whole = (off == np.floor(off)) & (np.abs(off) < 2.0 ** 52)
            submit = off.tolist()
            for j in np.flatnonzero(~whole).tolist():
                submit[j] = round(submit[j], 3)
            base = rows.base[ix].tolist() if rows.base is not None else nones
            extras = map(tuple.__new__, itertools.repeat(TraceExtra, m),
                         zip([b if b is not None else empty for b in base], rows.line[ix].tolist(),
                             gpus[ix].tolist(), _shared(rows.duration[ix])))
            jobs.extend(map(
                build, range(lo, lo + m), submit, fam_obj[fam[ix]].tolist(), g[ix].tolist(),
                w_min[ix].tolist(), w_max[ix].tolist(), elastic[ix].tolist(), ta[ix].tolist(),
                _shared(work[ix]), _shared(pred[ix]), rows.name[ix].tolist(),
                rows.app[ix].tolist() if rows.app is not None else nones,
                _shared(rows.batch_size[ix]) if rows.batch_size is not None else nones,
                rows.scaling[ix].tolist() if rows.scaling is not None else nones,
                extras, w_req[ix].tolist(), itertools.repeat(False, m),
            ))
    finally:
        if gc_was_on:
            gc.enable()
    return jobs


_CHUNK = 1 << 16


def _shared(a: np.ndarray) -> list[Any]:
    """``a.tolist()``, with one Python object per distinct value when values repeat a lot (a
    Pollux workload has a few hundred configurations): equal values, less memory."""
    if a.dtype == object or a.size < 1024:
        return a.tolist()
    u, inv = np.unique(a, return_inverse=True)
    if u.size * 4 > a.size or (a.dtype.kind == "f" and np.isnan(u).any()):
        return a.tolist()
    return np.array(u.tolist() + [None], dtype=object)[:-1][inv.reshape(-1)].tolist()


def _dict_codes(a: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Integer codes of an object array of ``str``/``None`` (None and "" -> -1) and the names."""
    # pyarrow (about 0.3 s to import): only when a trace is read
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(pa.array(a, type=pa.string(), from_pandas=True))
    codes = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)
    names = enc.dictionary.to_pylist()
    for j, nm in enumerate(names):
        if not nm:
            codes[codes == j] = -1
    return codes, names


# ------------------------------------------------------------------------------------------------
# scenarios and statistics
# ------------------------------------------------------------------------------------------------
def load_scenario_trace(cfg: ScenarioConfig, rng: np.random.Generator, data_root: str | None = None) -> list[JobSpec]:
    """The jobs of a scenario whose ``workload.trace`` is set (used by :mod:`aryl_gym.scenario`).

    ``workload.trace_format`` (default ``philly`` for ``.csv`` files named philly, ``gavel`` for
    ``.trace``), ``workload.trace_map`` (a map YAML, relative to the scenario file or the data root)
    and ``workload.trace_options`` (see :data:`TRACE_OPTION_KEYS`) configure the load.
    """
    jobs, _ = load_scenario_trace_report(cfg, rng, data_root)
    return jobs


def load_scenario_trace_report(cfg: ScenarioConfig, rng: np.random.Generator,
                               data_root: str | None = None) -> tuple[list[JobSpec], LoadReport]:
    w = cfg.workload
    if not w.trace:
        raise ConfigError(f"{cfg.source}: workload.trace is not set")
    fmt = w.trace_format or guess_format(w.trace)
    if fmt is None:
        raise ConfigError(f"{cfg.source}: set workload.trace_format to one of {', '.join(format_names())}")
    opts = dict(w.trace_options or {})
    _check_options(opts, f"{cfg.source}: workload.trace_options")
    tmap: Any = None
    if w.trace_map:
        cand = Path(cfg.source).parent / w.trace_map if cfg.source and not cfg.source.startswith("<") else None
        tmap = cand if cand is not None and cand.exists() else resolve_data_path(w.trace_map, data_root)
    return load_trace(w.trace, fmt, map=tmap, cluster=cfg, rng=rng, data_root=data_root, **opts)


def trace_stats(jobs: Sequence[JobSpec]) -> dict[str, Any]:
    """Rows, span, GPU-size histogram, duration quantiles (at w_max on the job's own GPU)."""
    if not jobs:
        return {"jobs": 0}
    sub = np.array([j.submit for j in jobs])
    gpus = np.array([j.g * j.w_max for j in jobs])
    dur = np.array([j.extra.get("trace_duration_s") or j.work / j.w_max for j in jobs], dtype=float)
    hist: dict[int, int] = {}
    for gg in gpus.tolist():
        hist[int(gg)] = hist.get(int(gg), 0) + 1
    return {
        "jobs": len(jobs),
        "span_h": float(sub.max() - sub.min()) / 3600.0,
        "gpu_hist": dict(sorted(hist.items())),
        "duration_q": {q: float(np.quantile(dur, q / 100)) for q in (0, 10, 50, 90, 99, 100)},
        "gpu_hours": float((dur * gpus).sum() / 3600.0),
        "elastic": int(sum(j.elastic for j in jobs)),
        "type_agnostic": int(sum(j.type_agnostic for j in jobs)),
        "families": dict(sorted({f: sum(j.family == f for j in jobs) for f in {j.family for j in jobs}}.items())),
    }
