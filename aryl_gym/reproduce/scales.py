"""Scales (which scenario plays each role) and config overrides (sweeps' knobs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from aryl_gym.config import (
    SIZE_OVERRIDE_ENV,
    ConfigError,
    ScenarioConfig,
    load_scenario,
    size_limits_lifted,
    validate_scenario,
)
from aryl_gym.fileio import load_yaml_value

# ----------------------------------------------------------------------------------------------
# Scales and scenarios
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    name: str
    basic: str  # scenario name of the "basic" role
    ideal_base: str  # scenario the "ideal" role derives from (None-like "" = use ``ideal`` as is)
    ideal_direct: str | None  # a scenario used as is for the ideal role
    seeds: int
    slow_seeds: Mapping[str, int] = field(default_factory=dict)


SCALES: dict[str, Scale] = {
    # The paper's Basic is production size (>3,500 GPUs, 15 days); its Ideal at the same size.
    "paper": Scale("paper", "production", "production", None, 3),
    "mid": Scale("mid", "basic", "basic", "ideal", 5),
    "tiny": Scale("tiny", "tiny", "tiny", None, 3),
}


def ideal_overrides() -> dict[str, Any]:
    """The workload fields in which ``ideal.yaml`` differs from ``basic.yaml`` (our Ideal)."""
    b, i = load_scenario("basic").workload, load_scenario("ideal").workload
    return {
        f.name: getattr(i, f.name)
        for f in dataclasses.fields(i)
        if getattr(i, f.name) != getattr(b, f.name)
    }


def role_configs(scale: Scale) -> dict[str, ScenarioConfig]:
    """The scenario config of each role at ``scale``."""
    basic = load_scenario(scale.basic)
    if scale.ideal_direct:
        ideal = load_scenario(scale.ideal_direct)
    else:
        base = load_scenario(scale.ideal_base)
        ideal = dataclasses.replace(
            base.replace(workload=ideal_overrides()),
            name=f"{base.name}-ideal",
            description=f"{base.name} with ideal.yaml's workload settings: {ideal_overrides()}",
        )
    return {"basic": basic, "ideal": ideal}


# ----------------------------------------------------------------------------------------------
# Config overrides (sweeps)
# ----------------------------------------------------------------------------------------------

#: The knobs the paper does not fix (SPEC "World v1" 6) and the values the default sweep tries.
#: Each list holds the scenario's data-derived default and values around it, fixed before any
#: policy's result was looked at; a knob not defined by this checkout's config is skipped.
DEFAULT_SWEEPS: dict[str, tuple[Any, ...]] = {
    "workload.elastic_range": (1.0, 2.0, 4.0),
    "workload.burstiness": (0.0, 0.5, 1.0),
    "inference.headroom": (0.0, 0.1, 0.2),
    "cluster.inf_speed_scale": (0.5, 1.0, 2.0),
    # World v2's shipped loads: production 0.6, basic/ideal 1.3 (the load rule against `baseline`)
    "workload.load": (0.6, 1.0, 1.3, 1.6),
    # World v2: the elastic families' count share at a fixed 36% GPU-time share (philly.csv gives
    # 0.030 over multi-GPU jobs and 0.015 over those of 1 h or more; aryl-gym fit-world)
    "workload.elastic_fraction": (0.015, 0.03, 0.06, 0.12),
    # World v2: the inference series' independent 5-minute noise (v1: 0.02; v2: 0)
    "inference.sample_noise": (0.0, 0.02),
}

_SECTION_NAMES = ("cluster", "inference", "workload", "sim")


def _section_fields(section: str) -> list[str]:
    cfg = ScenarioConfig(name="probe")
    return [f.name for f in dataclasses.fields(getattr(cfg, section))]


def check_key(key: str) -> tuple[str, str]:
    """``section.field`` -> (section, field); ValueError naming the key and the allowed ones."""
    parts = key.split(".")
    if len(parts) != 2 or not all(parts):
        raise ValueError(
            f"--sweep: {key!r} is not a dotted key; use SECTION.FIELD, e.g. workload.load "
            f"(sections: {', '.join(_SECTION_NAMES)})"
        )
    sec, fld = parts
    if sec not in _SECTION_NAMES:
        raise ValueError(
            f"--sweep: unknown section {sec!r} in {key!r}; sections: {', '.join(_SECTION_NAMES)}"
        )
    allowed = _section_fields(sec)
    if fld not in allowed:
        raise ValueError(
            f"--sweep: unknown key {key!r}: section '{sec}' has no field '{fld}'. "
            f"Allowed: {', '.join(sorted(allowed))}"
        )
    return sec, fld


def apply_override(cfg: ScenarioConfig, key: str, value: Any) -> ScenarioConfig:
    """``cfg`` with ``section.field = value``, type- and cross-checked (ValueError on a bad one)."""
    sec, fld = check_key(key)
    try:
        new = cfg.replace(**{sec: {fld: value}})
        validate_scenario(dataclasses.replace(new, source=f"--sweep {key}={value!r}"))
    except ConfigError as exc:
        raise ValueError(str(exc).replace("<override>", f"--sweep {key}={value!r}")) from None
    except TypeError as exc:
        raise ValueError(f"--sweep {key}={value!r}: {exc}") from None
    return new


#: the most values one ``--sweep`` knob takes (each value is a whole table of episodes);
#: ``ARYL_GYM_ALLOW_HUGE=1`` lifts it, as it lifts ``--seeds``'s limit
MAX_SWEEP_VALUES = 100


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> (key, values), values read as YAML scalars (``0.5``, ``true``)."""
    if "=" not in text:
        raise ValueError(f"--sweep {text!r}: use KEY=V1,V2,... e.g. workload.load=0.7,0.85,1.0")
    key, vals = text.split("=", 1)
    key = key.strip()
    check_key(key)
    out: list[Any] = []
    for v in vals.split(","):
        v = v.strip()
        if not v:
            continue
        try:
            out.append(load_yaml_value(v))  # as in the YAML files: 1e-4 is a number
        except yaml.YAMLError:
            raise ValueError(f"--sweep {key}: cannot read value {v!r}") from None
    if not out:
        raise ValueError(f"--sweep {key}: give at least one value after '='")
    if len(out) > MAX_SWEEP_VALUES and not size_limits_lifted():
        # was: 10,000 values were checked, then 10,000 tables of episodes started, with no message
        raise ValueError(f"--sweep {key}: {len(out):,} values; at most {MAX_SWEEP_VALUES} per knob, each "
                         f"runs the whole table (check the list, or set {SIZE_OVERRIDE_ENV}=1 to run it anyway)")
    for i, v in enumerate(out):
        if v in out[:i]:  # was: the same point run and reported twice (20 and 2e1 alike)
            raise ValueError(f"--sweep {key}: value {v!r} is given twice; give each value once")
    return key, out


def resolve_sweeps(texts: Sequence[str], log: Callable[[str], None]) -> list[tuple[str, list[Any]]]:
    """The sweeps of ``--sweep`` flags (``default`` expands to :data:`DEFAULT_SWEEPS`)."""
    out: list[tuple[str, list[Any]]] = []
    for t in texts:
        if t.strip() == "default":
            for key, vals in DEFAULT_SWEEPS.items():
                try:
                    check_key(key)
                except ValueError:
                    log(f"note: default sweep knob {key} is not defined by this checkout's config; skipped")
                    continue
                out.append((key, list(vals)))
        else:
            out.append(parse_sweep(t))
    keys = [k for k, _ in out]
    for i, k in enumerate(keys):
        if k in keys[:i]:  # was: the knob swept twice, its points counted twice
            raise ValueError(f"--sweep {k}: the knob is swept twice (a repeated --sweep, or one that "
                             "--sweep default already includes); give its values in one --sweep")
    return out


