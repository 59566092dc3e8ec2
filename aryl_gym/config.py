"""Scenario configuration: frozen dataclasses loaded from YAML.

Every section is a frozen dataclass; its annotations carry the constraints
(``Annotated[int, Ge(1)]``). Loading validates a file against them with pydantic in strict mode
(:mod:`aryl_gym.schema`): an unknown key, a wrong type or a value out of range is a
:class:`ConfigError` naming the file, the key path, what was expected and what was found.

A scenario YAML has the sections ``cluster``, ``inference``, ``workload`` and ``sim`` (see
``configs/scenarios/*.yaml``); ``gpu_types`` may add or override GPU types.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, Lt

from aryl_gym.errors import ConfigError  # noqa: E402,F401  (its public home stays here)
from aryl_gym.families import ELASTIC_FAMILIES, INELASTIC_FAMILIES
from aryl_gym.schema import validate

# --------------------------------------------------------------------------------------------
# GPU types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuType:
    """A GPU model.

    ``speed`` maps model family to training speed relative to a V100 (V100 = 1.0); families not
    listed use ``default_speed``. On T4 the factor already includes the smaller local batch that
    T4's 16 GB need (paper Appendix E). ``memory_gb`` is recorded, not checked: whether a job fits
    the inference GPU is its ``type_agnostic`` mark (the paper gives the share of such jobs, not
    per-family memory figures; docs/model.md, "Servers and GPUs").
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
# Field types: constraints read by the schema (aryl_gym.schema); plain types to everything else
# --------------------------------------------------------------------------------------------

#: an integer >= 0
Count = Annotated[int, Ge(0)]
#: an integer >= 1
PosCount = Annotated[int, Ge(1)]
#: a finite number >= 0 (an integer in YAML is accepted)
NonNeg = Annotated[float, Ge(0)]
#: a finite number > 0
Pos = Annotated[float, Gt(0)]
#: a number in [0, 1]
Fraction = Annotated[float, Ge(0), Le(1)]
#: a lag-one correlation in [0, 1)
Rho = Annotated[float, Ge(0), Lt(1)]
#: a Zipf exponent (> 1)
Alpha = Annotated[float, Gt(1)]

# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    """Two pools of whole servers."""

    train_servers: PosCount = 4
    train_gpus_per_server: PosCount = 8
    train_gpu: str = "V100"
    inf_servers: Count = 4
    inf_gpus_per_server: PosCount = 8
    inf_gpu: str = "T4"
    #: Multiplier on the inference GPU type's training speeds (a sensitivity knob; 1 = the
    #: registry's speeds).
    inf_speed_scale: Pos = 1.0

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

    mode: Literal["diurnal", "csv", "constant"] = "diurnal"
    mean: Fraction = 0.65
    peak_to_trough: Annotated[float, Ge(1)] = 2.2
    peak_hours: NonNeg = 4.0
    peak_center_hour: NonNeg = 22.0
    trough_hour: NonNeg = 5.0
    day_noise: NonNeg = 0.04
    #: independent noise on each 5-minute sample (World v1: 0.02; World v2: 0, since no public
    #: trace supports it: aryl_gym.worlds)
    sample_noise: NonNeg = 0.0
    sample_seconds: Pos = 300.0  # (0 divided by zero when the series was built)
    headroom: Fraction = 0.10
    csv: str | None = None
    start_hour: NonNeg = 0.0


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

    generator: Literal["philly-like"] = "philly-like"
    num_jobs: PosCount | None = None
    duration_hours: NonNeg = 24.0
    load: Pos = 0.85
    #: amplitude of the arrival rate's daily cycle, ``1 + a sin(...)``: above 1 the rate would go
    #: negative (was accepted: numpy's error, or a flat rate without a word)
    diurnal_arrivals: Fraction = 0.3
    elastic_fraction: Fraction = 0.03
    #: World v2: the elastic families' share of GPU-time (paper: 36%) the generator keeps at any
    #: ``elastic_fraction`` (a count share) by scaling elastic jobs' requested sizes
    #: (``generator.elastic_size_scale``); None (World v1) draws the sizes unscaled
    elastic_gpu_share: Annotated[float, Gt(0), Lt(1)] | None = None
    #: how ``elastic_size_scale`` measures that share: ``"shapes-100k"`` (World v2's traces: a
    #: fixed sample of 100,000 job shapes, before the per-job duration scatter and clip; the
    #: traces then realise about 0.384 for 0.36) or ``"trace"`` (2,000,000 shapes with the
    #: trace's scatter and clip: the traces realise the target; docs/model.md, "World v2
    #: calibration"). Opt-in: it changes every generated trace that sets ``elastic_gpu_share``
    elastic_share_sample: Literal["shapes-100k", "trace"] = "shapes-100k"
    type_agnostic_fraction: Fraction = 0.21
    all_elastic: bool = False
    elastic_min_fraction: Fraction = 0.5
    elastic_range: Annotated[float, Ge(1)] = 4.0
    burstiness: NonNeg = 1.0
    burst_size_alpha: Alpha = 2.283
    burst_size_max: PosCount = 426
    burst_multi_alpha: Alpha = 3.088
    burst_multi_max: PosCount = 119
    burst_gap_s: NonNeg = 3.27
    burst_rate_sigma: NonNeg = 0.952
    burst_rate_rho: Rho = 0.54
    burst_day_sigma: NonNeg = 0.864
    burst_day_rho: Rho = 0.682
    burst_duration_sigma: NonNeg = 0.433
    elastic_mean_hours: Pos = 14.2  # (0 gave jobs of no work: an error naming a job, not the key)
    duration_median_s: Pos = 1144.0
    duration_sigma: NonNeg = 2.15
    size_duration_exponent: NonNeg = 1.0
    min_duration_s: NonNeg = 60.0
    max_duration_s: NonNeg = 8.0 * 86400.0
    max_job_gpus: Count | None = None
    prediction_sigma: NonNeg = 0.0
    hetero_fraction: Fraction = 0.0
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

    interval: Pos = 60.0
    #: limits of an episode's length (None: none); 0 was accepted and gave an episode over before
    #: its first round (the env crashed on its first commit)
    horizon_hours: Pos | None = None
    max_rounds: PosCount | None = None
    fast_forward: bool = True
    scale_overhead_s: NonNeg = 10.0
    #: per job family; other families pay ``default_relaunch_overhead_s``. Without a trace a key
    #: must be one of the generator's families (:func:`generated_families`)
    relaunch_overhead_s: Mapping[str, NonNeg] = field(
        default_factory=lambda: {
            "resnet50": 120.0,
            "vgg16": 150.0,
            "bert": 250.0,
            "gnmt16": 200.0,
        }
    )
    default_relaunch_overhead_s: NonNeg = 60.0
    first_start_overhead_s: NonNeg = 0.0
    hetero_penalty: Annotated[float, Gt(0), Le(1)] = 0.8
    hetero_rate: Literal["slowest", "sum"] = "slowest"
    #: World v2: no job runs on more GPUs than this (upstream Pollux's replica cap, and below
    #: the batch limit of every profiled application; aryl_gym.sim.goodput); never below a
    #: job's own ``w_max``
    ceiling_gpus: PosCount = 64

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

    def replace(self, **changes: Any) -> ScenarioConfig:
        """A validated copy with whole sections or fields of sections replaced.

        ``cfg.replace(sim={"interval": 30})`` updates one field of a section; a section given
        as a dataclass replaces the whole section. Errors name the source ``<override>``.
        """
        data = _as_input(self)
        source = self.source
        for key, value in changes.items():
            if key == "source":
                source = str(value)
            elif key in _SECTIONS and isinstance(value, Mapping):
                data[key] = {**data[key], **value}
            elif key == "gpu_types" and isinstance(value, Mapping):
                data[key] = {n: _gpu_input(g) for n, g in value.items()}
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                data[key] = _asdict(value)
            else:
                data[key] = value
        new = scenario_from_dict(data, source="<override>")
        return dataclasses.replace(new, source=source)

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
# Loading: the schema (aryl_gym.schema) checks every field; two cross-field rules follow
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuTypeSpec:
    """A ``gpu_types`` entry of a scenario file (the name is its key)."""

    memory_gb: NonNeg = 16.0
    default_speed: Pos = 1.0
    speed: Mapping[str, Pos] = field(default_factory=dict)


@dataclass(frozen=True)
class ScenarioFile:
    """The top level of a scenario YAML; a missing or empty section takes the defaults."""

    name: str
    description: str | None = ""
    cluster: ClusterConfig | None = None
    inference: InferenceConfig | None = None
    workload: WorkloadConfig | None = None
    sim: SimConfig | None = None
    gpu_types: Mapping[str, GpuTypeSpec] | None = None


_SECTIONS = {
    "cluster": ClusterConfig,
    "inference": InferenceConfig,
    "workload": WorkloadConfig,
    "sim": SimConfig,
}


def _gpu_input(g: Any) -> Any:
    if isinstance(g, GpuType):
        return {"memory_gb": g.memory_gb, "default_speed": g.default_speed, "speed": dict(g.speed)}
    return g


def _as_input(cfg: ScenarioConfig) -> dict[str, Any]:
    """``cfg`` as the mapping a scenario file would hold (for re-validation)."""
    d = cfg.to_dict()
    d["gpu_types"] = {n: _gpu_input(g) for n, g in cfg.gpu_types.items()}
    return d


def scenario_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> ScenarioConfig:
    """Build a validated :class:`ScenarioConfig` from a mapping (as read from YAML)."""

    if isinstance(data, Mapping):
        # an empty section (``sim:``) reads as null: the section's defaults
        data = {k: ({} if v is None and k in _SECTIONS else v) for k, v in data.items()}
    f = validate(ScenarioFile, data, source)
    _check_builtin_overrides(data, source)
    gpu_types = dict(DEFAULT_GPU_TYPES)
    for gname, spec in (f.gpu_types or {}).items():
        gpu_types[gname] = GpuType(gname, spec.memory_gb, spec.default_speed, dict(spec.speed))
    cfg = ScenarioConfig(
        name=f.name,
        description=f.description or "",
        cluster=f.cluster or ClusterConfig(),
        inference=f.inference or InferenceConfig(),
        workload=f.workload or WorkloadConfig(),
        sim=f.sim or SimConfig(),
        gpu_types=gpu_types,
        source=source,
    )
    _cross_check(cfg)
    return cfg


def _check_builtin_overrides(data: Mapping[str, Any], source: str) -> None:
    """A ``gpu_types`` entry named like a built-in type replaces it as a whole: a field it leaves
    out takes :class:`GpuTypeSpec`'s default, not the built-in's. Refused when that differs
    (was: ``T4: {memory_gb: 24}`` made T4 train as fast as a V100, default_speed 1.0 and no
    per-family speeds, without a word)."""
    spec = GpuTypeSpec()
    for gname, entry in (data.get("gpu_types") or {}).items():
        builtin = DEFAULT_GPU_TYPES.get(gname)
        if builtin is None or not isinstance(entry, Mapping):
            continue
        lost = [f"{k} (would be {getattr(spec, k)!r}, the built-in {gname}'s is {getattr(builtin, k)!r})"
                for k in ("memory_gb", "default_speed", "speed")
                if k not in entry and _same(getattr(spec, k)) != _same(getattr(builtin, k))]
        if lost:
            raise ConfigError(
                f"{source}: gpu_types.{gname} replaces the built-in GPU type {gname} as a whole, and leaves "
                f"out {'; '.join(lost)}; give {' and '.join(k.split()[0] for k in lost)} too, or use "
                "another name for a new type")


def _same(v: Any) -> Any:
    return dict(v) if isinstance(v, Mapping) else float(v)


def validate_scenario(cfg: ScenarioConfig) -> None:
    """Check a config built in code (e.g. with ``dataclasses.replace``) as if loaded from a file;
    errors name ``cfg.source``."""
    scenario_from_dict(_as_input(cfg), source=cfg.source)


#: The largest scenario built without ``ARYL_GYM_ALLOW_HUGE=1`` (README, "Size limits"); the
#: production scenario (3,584 GPUs, about 50,000 jobs, 4,320 rounds) is far inside. Beyond them
#: an episode would take hours and gigabytes before saying anything.
SIZE_LIMITS = {"num_jobs": 2_000_000, "servers": 100_000, "gpus_per_server": 64, "rounds": 10_000_000}
SIZE_OVERRIDE_ENV = "ARYL_GYM_ALLOW_HUGE"


def size_limits_lifted() -> bool:
    """Whether ``ARYL_GYM_ALLOW_HUGE`` is set (to anything but ``0``): every size limit is lifted."""
    return os.environ.get(SIZE_OVERRIDE_ENV, "") not in ("", "0")


def check_size(cfg: ScenarioConfig) -> None:
    """A ConfigError before any work when the scenario is beyond :data:`SIZE_LIMITS` (jobs,
    servers, GPUs per server, rounds = the longer of ``workload.duration_hours`` and
    ``sim.horizon_hours`` over ``sim.interval``); ``ARYL_GYM_ALLOW_HUGE=1`` lifts the limits."""
    if size_limits_lifted():
        return
    c, w = cfg.cluster, cfg.workload
    hours = max(float(w.duration_hours), float(cfg.sim.horizon_hours or 0.0))
    found = {
        "num_jobs": (w.num_jobs or 0, "workload.num_jobs"),
        "servers": (c.train_servers + c.inf_servers, "cluster.train_servers + cluster.inf_servers"),
        "gpus_per_server": (max(c.train_gpus_per_server, c.inf_gpus_per_server), "GPUs per server"),
        "rounds": (hours * 3600.0 / float(cfg.sim.interval),
                   "rounds (workload.duration_hours or sim.horizon_hours x 3600 / sim.interval)"),
    }
    for key, (v, what) in found.items():
        if v > SIZE_LIMITS[key]:
            raise ConfigError(
                f"{cfg.source}: {what} is {_count(v)}, above the limit of {SIZE_LIMITS[key]:,} (an "
                "episode of this size would take hours and gigabytes); check the value, or set "
                f"{SIZE_OVERRIDE_ENV}=1 to run it anyway"
            )


def _count(v: float) -> str:
    """``v`` with thousands separators; an integer too large for a float (``train_servers:
    1000...0``: was an OverflowError from this message) by its number of digits."""
    if isinstance(v, int):
        return f"{v:,}" if v < 10**18 else f"a {len(str(v))}-digit number"
    return f"{v:,.0f}"


#: above it ``exp(N(0, sigma))`` overflows (or reaches 0) for a job with ``|z| > 709 / sigma``
MAX_PREDICTION_SIGMA = 100.0


def generated_families() -> tuple[str, ...]:
    """The job families of the synthetic workload (:mod:`aryl_gym.workload.generator`): the
    paper's elastic families, then the generator's inelastic ones. A trace's jobs may have others
    (its model names, :mod:`aryl_gym.workload.traces`)."""
    return ELASTIC_FAMILIES + INELASTIC_FAMILIES


def _cross_check(cfg: ScenarioConfig) -> None:
    """The rules that involve more than one field."""
    src = cfg.source
    check_size(cfg)
    c = cfg.cluster
    for key, gpu in (("train_gpu", c.train_gpu), ("inf_gpu", c.inf_gpu)):
        if gpu not in cfg.gpu_types:
            raise ConfigError(
                f"{src}: cluster.{key}: GPU type '{gpu}' is not registered. Known: "
                f"{', '.join(sorted(cfg.gpu_types))}; add it under gpu_types"
            )
    i = cfg.inference
    if i.mode == "csv" and not i.csv:
        raise ConfigError(f"{src}: inference.mode is csv but inference.csv (a path) is not set")
    if i.mode != "csv" and i.csv:  # was: the file was never read
        raise ConfigError(f"{src}: inference.csv is set but inference.mode is {i.mode}, which does not read "
                          "it; set mode: csv to replay the file, or drop inference.csv")
    w = cfg.workload
    if w.min_duration_s > w.max_duration_s:  # was: every job clipped to max_duration_s
        raise ConfigError(f"{src}: workload.min_duration_s ({w.min_duration_s:g}) is above "
                          f"workload.max_duration_s ({w.max_duration_s:g}); give min <= max")
    if w.max_job_gpus == 0:  # was: read as no cap
        raise ConfigError(f"{src}: workload.max_job_gpus must be >= 1 (or left out: no cap), got 0")
    if w.trace is None:
        if not w.max_duration_s > 0:  # was: "job 0: work and pred_work must be finite and positive"
            raise ConfigError(f"{src}: workload.max_duration_s must be > 0 (every generated job's "
                              "running time is clipped to it)")
        given = [k for k, v in (("trace_format", w.trace_format), ("trace_map", w.trace_map),
                                ("trace_options", w.trace_options)) if v]
        if given:  # was: ignored
            raise ConfigError(f"{src}: workload.{given[0]} applies to a trace, but workload.trace is not "
                              "set; set workload.trace (a trace file) or drop it")
    if w.trace is None:
        # the generator's jobs have exactly these families (was: a typo such as 'bret' was
        # ignored, and every bert job paid default_relaunch_overhead_s); a trace's families are
        # its model names, any string, so a scenario with a trace keeps any key
        known = generated_families()
        unknown = sorted(str(k) for k in cfg.sim.relaunch_overhead_s if k not in known)
        if unknown:
            raise ConfigError(f"{src}: sim.relaunch_overhead_s: unknown job family {unknown[0]!r}; the "
                              f"generated workload's families are {', '.join(known)} (other families "
                              "take sim.default_relaunch_overhead_s)")
    if w.prediction_sigma > MAX_PREDICTION_SIGMA:
        # was: "job 12 (cnn): work and pred_work must be finite and positive", on some seeds only
        raise ConfigError(f"{src}: workload.prediction_sigma {w.prediction_sigma:g} is above {MAX_PREDICTION_SIGMA:g}: "
                          "predicted work = work x exp(N(0, prediction_sigma)) overflows to infinity or zero "
                          "for some jobs (sigma 1 already misses by a factor e per standard deviation)")
    if w.trace is None:
        # was: a typo such as 'bret' was ignored and bert jobs ran at the type's default_speed
        known_speed = generated_families() + tuple(
            sorted({k for g in DEFAULT_GPU_TYPES.values() for k in g.speed} - set(generated_families())))
        for gname, gtype in cfg.gpu_types.items():
            bad = sorted(str(k) for k in gtype.speed if k not in known_speed)
            if bad:
                raise ConfigError(f"{src}: gpu_types.{gname}.speed: unknown job family {bad[0]!r}; the generated "
                                  f"workload's families are {', '.join(generated_families())} (other families "
                                  f"run at gpu_types.{gname}.default_speed)")
    if w.elastic_share_sample != "shapes-100k" and w.elastic_gpu_share is None:  # was: ignored
        raise ConfigError(f"{src}: workload.elastic_share_sample only changes how elastic_gpu_share is kept, "
                          "and this scenario does not set workload.elastic_gpu_share; set both or neither")


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
    # fileio imports yaml: keeps it out of import aryl_gym
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
    cfg = scenario_from_dict(data, source=str(path))  # the values' own errors first
    _check_unused_keys(data, str(path))
    return cfg


def _check_unused_keys(data: Any, source: str) -> None:
    """Keys a scenario file sets that its other keys make inert (was: accepted and ignored).
    Only a file's own keys are looked at: a built config carries every default."""
    w = data.get("workload") if isinstance(data, Mapping) else None
    if not isinstance(w, Mapping):
        return
    if w.get("trace") is not None and "load" in w:
        raise ConfigError(f"{source}: workload.load does not apply to a trace (workload.trace): the trace's "
                          "jobs and times are replayed; drop load (trace_options time_compression "
                          "speeds arrivals up)")
    if w.get("trace") is not None and w.get("num_jobs") is not None:
        raise ConfigError(f"{source}: workload.num_jobs does not apply to a trace (workload.trace); keep the "
                          "first N jobs with trace_options: {max_jobs: N} (--max-jobs N)")
    if w.get("num_jobs") is not None and "load" in w:
        raise ConfigError(f"{source}: workload.num_jobs and workload.load are both set; with num_jobs the job "
                          "count is fixed and load is not used: give one of them")
