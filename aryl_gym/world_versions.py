"""World versions: which defaults of the shipped scenarios a run uses (SPEC "World v1", "World v2").

The scenario files under ``configs/scenarios/`` describe the **current world, v2**. A world is a
set of knob values, not code: everything the simulator can do is available in every world, and
a world only fixes the shipped scenarios' data-derived knobs. World v1 is kept so that results,
agents and envs made on it stay reproducible (``aryl_gym/Aryl-v1`` draws World v1 episodes;
``aryl_gym/Aryl-v2`` World v2's).

What World v2 changed in the shipped scenarios (docs/model.md, "World v2"):

* ``workload.load``: the load rule re-run against the paper's Baseline as World v2 reads it
  (YARN FIFO, a job that does not fit is passed over; ``agents/fifo.py``);
* ``workload.elastic_gpu_share: 0.36`` on the paper's Basic and Ideal settings (``basic``,
  ``ideal``, ``production``): the elastic families keep the paper's 36% of GPU-time at the
  count share ``elastic_fraction`` taken from the Philly trace;
* ``inference.sample_noise: 0``: the public traces hold no inference-utilisation series, so
  independent 5-minute noise on the paper's smooth diurnal curve is not supported by data.

A scenario that is not shipped (a user's YAML or a ScenarioConfig) is its own world: it is used
as given.
"""

from __future__ import annotations

from typing import Any

from aryl_gym.config import ScenarioConfig, configs_dir, load_scenario

#: the world versions, oldest first
WORLDS: tuple[str, ...] = ("v1", "v2")
#: the world the shipped scenario files describe
CURRENT = "v2"

#: World v1's values of the knobs World v2 changed, per shipped scenario (section -> field -> value)
_V1_COMMON: dict[str, dict[str, Any]] = {"inference": {"sample_noise": 0.02}}
V1_OVERRIDES: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {},
    "testbed": {"workload": {"load": 0.4}},
    "basic": {"workload": {"load": 0.8, "elastic_gpu_share": None}},
    "ideal": {"workload": {"load": 0.8, "elastic_gpu_share": None}},
    "production": {"workload": {"load": 0.6, "elastic_gpu_share": None}},
    "philly-6214e9": {},
    "pollux-w6": {},
}


def check_world(world: object, what: str = "world") -> str:
    """``world`` as a known version name; anything else is a ValueError naming the choices
    (and ``what``, the argument it came from)."""
    if not isinstance(world, str) or world not in WORLDS:
        raise ValueError(f"{what} must be one of {', '.join(WORLDS)}, got {world!r}")
    return str(world)


def is_shipped(cfg: ScenarioConfig) -> bool:
    """Whether ``cfg`` was loaded from a shipped scenario file (``configs/scenarios/NAME.yaml``)."""
    path = configs_dir() / "scenarios" / f"{cfg.name}.yaml"
    try:
        return cfg.name in V1_OVERRIDES and path.resolve().samefile(cfg.source)
    except OSError:
        return False


def in_world(cfg: ScenarioConfig, world: str) -> ScenarioConfig:
    """``cfg`` as the world ``world`` defines it: a shipped scenario in an older world gets that
    world's value of every knob World v2 changed, unless the config was given another value of
    that knob (``load_scenario("testbed").replace(workload={"load": 1.0})`` keeps its load);
    anything else is returned unchanged."""
    world = check_world(world)
    if world == CURRENT or not is_shipped(cfg):
        return cfg
    shipped = load_scenario(cfg.name)
    wanted: dict[str, dict[str, Any]] = {k: dict(v) for k, v in _V1_COMMON.items()}
    for section, fields in V1_OVERRIDES[cfg.name].items():
        wanted.setdefault(section, {}).update(fields)
    changes: dict[str, dict[str, Any]] = {}
    for section, fields in wanted.items():
        for key, value in fields.items():
            if getattr(getattr(cfg, section), key) == getattr(getattr(shipped, section), key):
                changes.setdefault(section, {})[key] = value
    if not changes:
        return cfg
    # keep where the config came from: the world is part of its identity, not its file
    return cfg.replace(**changes, source=cfg.source)
