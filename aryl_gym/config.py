"""Scenario configuration: frozen dataclasses loaded from YAML.

Every section is a frozen dataclass. Loading is strict: an unknown key is an error that names the
key, the section and the file, and lists the keys that are allowed. Values are type-checked.

A scenario YAML has the sections ``cluster``, ``inference``, ``workload`` and ``sim`` (see
``configs/scenarios/*.yaml``); ``gpu_types`` may add or override GPU types.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message says where and how to fix it."""


# --------------------------------------------------------------------------------------------
# GPU types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuType:
    """A GPU model.

    ``speed`` maps model family to training speed relative to a V100 (V100 = 1.0); families not
    listed use ``default_speed``. On T4 the factor already includes the smaller local batch that
    T4's 16 GB need (paper Appendix E): the memory check is ``family_memory_gb <= memory_gb``,
    families that do not fit cannot be type-agnostic.
    """

    name: str
    memory_gb: float
    default_speed: float = 1.0
    speed: Mapping[str, float] = field(default_factory=dict)

    def speed_for(self, family: str) -> float:
        return float(self.speed.get(family, self.default_speed))


#: Built-in registry. T4 speeds are ours: about 0.3-0.45 of a V100 depending on the family,
#: consistent with the paper's "3 loaned inference servers ~ 1 training server".
DEFAULT_GPU_TYPES: dict[str, GpuType] = {
    "V100": GpuType("V100", 32.0, 1.0, {}),
    "T4": GpuType(
        "T4",
        16.0,
        0.35,
        {"resnet50": 0.40, "vgg16": 0.33, "bert": 0.30, "gnmt16": 0.38, "cifar10": 0.45},
    ),
    "A100": GpuType("A100", 80.0, 2.2, {}),
    "H100": GpuType("H100", 80.0, 3.5, {}),
}


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    """Two pools of whole servers."""

    train_servers: int = 4
    train_gpus_per_server: int = 8
    train_gpu: str = "V100"
    inf_servers: int = 4
    inf_gpus_per_server: int = 8
    inf_gpu: str = "T4"
    #: Multiplier on the inference GPU type's training speeds (a sensitivity knob; 1 = the
    #: registry's speeds).
    inf_speed_scale: float = 1.0

    @property
    def train_gpus(self) -> int:
        return self.train_servers * self.train_gpus_per_server

    @property
    def inf_gpus(self) -> int:
        return self.inf_servers * self.inf_gpus_per_server


@dataclass(frozen=True)
class InferenceConfig:
    """Inference utilization u(t) and the loan rule (SPEC 1.2).

    ``mode: diurnal`` generates a series (paper Figure 1 shape); ``mode: csv`` reads ``csv``
    (columns ``time`` in seconds and ``utilization`` in [0, 1]); ``mode: constant`` holds
    ``mean`` (used by tests). Servers needed by inference =
    ``ceil(inf_servers * min(1, u + headroom))``.
    """

    mode: str = "diurnal"
    mean: float = 0.65
    peak_to_trough: float = 2.2
    peak_hours: float = 4.0
    peak_center_hour: float = 22.0
    trough_hour: float = 5.0
    day_noise: float = 0.04
    sample_noise: float = 0.02
    sample_seconds: float = 300.0
    headroom: float = 0.10
    csv: str | None = None
    start_hour: float = 0.0


@dataclass(frozen=True)
class WorkloadConfig:
    """Synthetic workload generator parameters (see :mod:`aryl_gym.workload.generator`).

    ``load`` is the offered load relative to the training pool's GPUs; the arrival rate follows
    from it and the expected GPU-time per job, so scenarios of any size stay comparable.

    World v1 knobs (defaults fitted from public data by :mod:`aryl_gym.workload.fit`; run
    ``aryl-gym fit-world`` to reproduce them):

    * ``elastic_range``: an elastic job may grow from its request ``w_min`` to
      ``w_max = r x w_min``, ``r`` drawn uniformly from the powers of two in
      ``[2, elastic_range]`` (default 4: the median over the six Pollux applications of the
      largest growth that keeps >= 80% per-GPU throughput); 1 = no growth.
    * ``burstiness``: 1 = the batch-arrival process fitted to Philly, 0 = a Poisson process;
      in between (or above) it scales the log-rate modulation and the batch-size tail.
    * ``burst_*``: the fitted batch-arrival parameters (Zipf exponent and cap of the batch size
      for batches of 1-GPU jobs, ``burst_size_*``, and of multi-GPU jobs, ``burst_multi_*``;
      mean gap inside a batch in seconds; standard deviation and lag-one correlation of the
      hour-level and the day-level AR(1) log-rate, within-batch log running-time scatter).

    ``hetero_fraction`` (default 0, off): share of the eligible jobs (elastic, type-agnostic,
    data-parallel families) marked for heterogeneous training (paper 7.2; ``docs/model.md``).
    """

    generator: str = "philly-like"
    num_jobs: int | None = None
    duration_hours: float = 24.0
    load: float = 0.85
    diurnal_arrivals: float = 0.3
    elastic_fraction: float = 0.03
    type_agnostic_fraction: float = 0.21
    all_elastic: bool = False
    elastic_min_fraction: float = 0.5
    elastic_range: float = 4.0
    burstiness: float = 1.0
    burst_size_alpha: float = 2.283
    burst_size_max: int = 426
    burst_multi_alpha: float = 3.088
    burst_multi_max: int = 119
    burst_gap_s: float = 3.27
    burst_rate_sigma: float = 0.952
    burst_rate_rho: float = 0.54
    burst_day_sigma: float = 0.864
    burst_day_rho: float = 0.682
    burst_duration_sigma: float = 0.433
    elastic_mean_hours: float = 14.2
    duration_median_s: float = 1144.0
    duration_sigma: float = 2.15
    size_duration_exponent: float = 1.0
    min_duration_s: float = 60.0
    max_duration_s: float = 8.0 * 86400.0
    max_job_gpus: int | None = None
    prediction_sigma: float = 0.0
    hetero_fraction: float = 0.0
    trace: str | None = None
    trace_format: str | None = None
    trace_map: str | None = None
    trace_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SimConfig:
    """Time and overheads (SPEC 1.3-1.4).

    Heterogeneous training (paper 7.2; ``docs/model.md``): ``hetero_rate`` is the rate model of
    a job running on both GPU types, ``"slowest"`` (every worker at the slower type's pace,
    default) or ``"sum"`` (speeds summed, load-balanced local batches); ``hetero_penalty``
    (default 0.8, ours) multiplies it.
    """

    interval: float = 60.0
    horizon_hours: float | None = None
    max_rounds: int | None = None
    fast_forward: bool = True
    scale_overhead_s: float = 10.0
    relaunch_overhead_s: Mapping[str, float] = field(
        default_factory=lambda: {
            "resnet50": 120.0,
            "vgg16": 150.0,
            "bert": 250.0,
            "gnmt16": 200.0,
        }
    )
    default_relaunch_overhead_s: float = 60.0
    first_start_overhead_s: float = 0.0
    hetero_penalty: float = 0.8
    hetero_rate: str = "slowest"

    def relaunch_for(self, family: str) -> float:
        return float(self.relaunch_overhead_s.get(family, self.default_relaunch_overhead_s))


@dataclass(frozen=True)
class ScenarioConfig:
    name: str
    description: str = ""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    gpu_types: Mapping[str, GpuType] = field(default_factory=lambda: dict(DEFAULT_GPU_TYPES))
    source: str = "<built-in>"

    def replace(self, **sections: Any) -> ScenarioConfig:
        """A copy with whole sections or fields of sections replaced.

        ``cfg.replace(sim={"interval": 30})`` updates one field of a section.
        """
        kwargs: dict[str, Any] = {}
        for key, value in sections.items():
            current = getattr(self, key)
            if isinstance(value, Mapping) and dataclasses.is_dataclass(current):
                kwargs[key] = _build(type(current), {**_asdict(current), **value}, key, "<override>")
            else:
                kwargs[key] = value
        new = dataclasses.replace(self, **kwargs)
        validate_scenario(new)
        return new

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "cluster": _asdict(self.cluster),
            "inference": _asdict(self.inference),
            "workload": _asdict(self.workload),
            "sim": _asdict(self.sim),
        }


def _asdict(obj: Any) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out[f.name] = dict(v) if isinstance(v, Mapping) else v
    return out


# --------------------------------------------------------------------------------------------
# Strict building
# --------------------------------------------------------------------------------------------


def _check_optional(value: Any, annotation: str, key: str, section: str, source: str) -> Any:
    """A field whose default is None: its annotation (``int | None`` ...) says the type."""
    kind = annotation.split("|")[0].strip()
    where = f"{source}: {section}.{key}"
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer (or omitted), got {value!r}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number (or omitted), got {value!r}")
    elif kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string (or omitted), got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value < 0 or value in (float("inf"),):
            raise ConfigError(f"{where} must be a finite number >= 0, got {value!r}")
    return value


def _check_type(
    value: Any, default: Any, key: str, section: str, source: str, annotation: str = ""
) -> Any:
    if value is None:
        return value
    if default is None:
        return _check_optional(value, annotation, key, section, source)
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{source}: {section}.{key} must be a mapping (key: value lines), got {value!r}"
            )
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {section}.{key} must be true or false, got {value!r}")
        return value
    if isinstance(default, int) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {section}.{key} must be an integer, got {value!r}")
        if value < 0:
            raise ConfigError(f"{source}: {section}.{key} must be >= 0, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {section}.{key} must be a number, got {value!r}")
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{source}: {section}.{key} must be a finite number, got {value!r}")
        if value < 0:
            raise ConfigError(f"{source}: {section}.{key} must be >= 0, got {value!r}")
        return value
    if isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{source}: {section}.{key} must be a string, got {value!r}")
    return value


def _build(cls: type, data: Mapping[str, Any], section: str, source: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: section '{section}' must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{unknown[0]}' in section '{section}'. "
            f"Allowed keys: {', '.join(sorted(fields))}"
        )
    probe = cls()
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _check_type(value, getattr(probe, key), key, section, source, str(fields[key].type))
    return cls(**kwargs)


_SECTIONS = {
    "cluster": ClusterConfig,
    "inference": InferenceConfig,
    "workload": WorkloadConfig,
    "sim": SimConfig,
}


def scenario_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> ScenarioConfig:
    """Build a validated :class:`ScenarioConfig` from a mapping (as read from YAML)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a scenario must be a mapping at the top level")
    allowed = {"name", "description", "gpu_types", *_SECTIONS}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{unknown[0]}' at the top level. Allowed keys: "
            f"{', '.join(sorted(allowed))}"
        )
    if "name" not in data:
        raise ConfigError(f"{source}: missing key 'name'")
    sections = {k: _build(cls, data.get(k) or {}, k, source) for k, cls in _SECTIONS.items()}
    gpu_types = dict(DEFAULT_GPU_TYPES)
    for gname, gdata in (data.get("gpu_types") or {}).items():
        if not isinstance(gdata, Mapping):
            raise ConfigError(f"{source}: gpu_types.{gname} must be a mapping")
        bad = sorted(set(gdata) - {"memory_gb", "default_speed", "speed"})
        if bad:
            raise ConfigError(
                f"{source}: unknown key '{bad[0]}' in gpu_types.{gname}. "
                "Allowed keys: default_speed, memory_gb, speed"
            )
        gpu_types[gname] = GpuType(
            gname,
            float(gdata.get("memory_gb", 16.0)),
            float(gdata.get("default_speed", 1.0)),
            dict(gdata.get("speed", {})),
        )
    cfg = ScenarioConfig(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        gpu_types=gpu_types,
        source=source,
        **sections,
    )
    validate_scenario(cfg)
    return cfg


def validate_scenario(cfg: ScenarioConfig) -> None:
    """Cross-field checks with actionable messages."""
    src = cfg.source
    c = cfg.cluster
    for gpu in (c.train_gpu, c.inf_gpu):
        if gpu not in cfg.gpu_types:
            raise ConfigError(
                f"{src}: cluster GPU type '{gpu}' is not registered. Known: "
                f"{', '.join(sorted(cfg.gpu_types))}; add it under gpu_types"
            )
    if c.train_servers < 1 or c.train_gpus_per_server < 1:
        raise ConfigError(f"{src}: cluster needs at least one training server with >= 1 GPU")
    if c.inf_servers < 0 or c.inf_gpus_per_server < 1:
        raise ConfigError(f"{src}: cluster.inf_servers must be >= 0 and inf_gpus_per_server >= 1")
    i = cfg.inference
    if i.mode not in ("diurnal", "csv", "constant"):
        raise ConfigError(f"{src}: inference.mode must be diurnal, csv or constant, got {i.mode!r}")
    if i.mode == "csv" and not i.csv:
        raise ConfigError(f"{src}: inference.mode is csv but inference.csv (a path) is not set")
    if not 0.0 <= i.mean <= 1.0:
        raise ConfigError(f"{src}: inference.mean must be in [0, 1], got {i.mean}")
    if i.peak_to_trough < 1.0:
        raise ConfigError(f"{src}: inference.peak_to_trough must be >= 1, got {i.peak_to_trough}")
    if not 0.0 <= i.headroom <= 1.0:
        raise ConfigError(f"{src}: inference.headroom must be in [0, 1], got {i.headroom}")
    s = cfg.sim
    if not s.interval > 0:
        raise ConfigError(f"{src}: sim.interval must be > 0 seconds, got {s.interval}")
    w = cfg.workload
    if w.num_jobs is not None and w.num_jobs < 1:
        raise ConfigError(f"{src}: workload.num_jobs must be >= 1 (or omitted to use load), got {w.num_jobs}")
    if not w.load > 0:
        raise ConfigError(f"{src}: workload.load must be > 0, got {w.load}")
    for name in (
        "elastic_fraction",
        "type_agnostic_fraction",
        "elastic_min_fraction",
        "hetero_fraction",
    ):
        v = getattr(w, name)
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"{src}: workload.{name} must be in [0, 1], got {v}")
    if not w.elastic_range >= 1.0:
        raise ConfigError(
            f"{src}: workload.elastic_range must be >= 1 (1 = elastic jobs cannot grow), "
            f"got {w.elastic_range}"
        )
    for name in ("burst_size_alpha", "burst_multi_alpha"):
        if not getattr(w, name) > 1.0:
            raise ConfigError(f"{src}: workload.{name} must be > 1, got {getattr(w, name)}")
    for name in ("burst_size_max", "burst_multi_max"):
        if getattr(w, name) < 1:
            raise ConfigError(f"{src}: workload.{name} must be >= 1, got {getattr(w, name)}")
    for name in ("burst_rate_rho", "burst_day_rho"):
        if not getattr(w, name) < 1.0:
            raise ConfigError(f"{src}: workload.{name} must be in [0, 1), got {getattr(w, name)}")
    if not c.inf_speed_scale > 0:
        raise ConfigError(f"{src}: cluster.inf_speed_scale must be > 0, got {c.inf_speed_scale}")
    if s.hetero_rate not in ("slowest", "sum"):
        raise ConfigError(
            f"{src}: sim.hetero_rate must be 'slowest' (every worker at the slower GPU's pace) "
            f"or 'sum' (load-balanced: the sum of per-worker speeds), got {s.hetero_rate!r}"
        )
    if not 0.0 < s.hetero_penalty <= 1.0:
        raise ConfigError(
            f"{src}: sim.hetero_penalty must be in (0, 1] (the rate multiplier of a job running "
            f"on both GPU types), got {s.hetero_penalty}"
        )


# --------------------------------------------------------------------------------------------
# Scenario files
# --------------------------------------------------------------------------------------------


def configs_dir() -> Path:
    """The folder holding ``scenarios/``, ``algos/`` and ``suites/``.

    ``ARYL_GYM_CONFIGS`` overrides; otherwise the repository's ``configs/`` (a checkout or an
    editable install), else the copy installed inside the package (``aryl_gym/configs``).
    """
    env = os.environ.get("ARYL_GYM_CONFIGS")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parent.parent / "configs"
    if (repo / "scenarios").is_dir():
        return repo
    return Path(__file__).resolve().parent / "configs"


def list_scenarios() -> list[str]:
    return sorted(p.stem for p in (configs_dir() / "scenarios").glob("*.yaml"))


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """Strict YAML (duplicate keys rejected); folders, unreadable or binary files are ConfigErrors."""
    from aryl_gym.fileio import load_yaml_file

    return load_yaml_file(path)


def load_scenario(name_or_path: str | os.PathLike[str]) -> ScenarioConfig:
    """Load a scenario by name (``configs/scenarios/NAME.yaml``) or by path to a YAML file."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        path = Path(text)
    else:
        path = configs_dir() / "scenarios" / f"{text}.yaml"
        if not path.exists():
            raise ConfigError(
                f"unknown scenario '{text}'. Known scenarios: {', '.join(list_scenarios())}; "
                "or pass a path to a YAML file"
            )
    data = load_yaml(path)
    return scenario_from_dict(data, source=str(path))
