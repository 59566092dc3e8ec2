"""Leaderboard suites: a fixed set of scenarios x seeds x policies (SPEC 7).

A suite is a YAML file in ``configs/suites/`` (or any path)::

    name: quick
    description: testbed, 3 seeds, every reference policy and the shipped agent
    scenarios: [testbed]          # names (configs/scenarios/NAME.yaml), YAML paths, or
                                  # {name: X, optional: true} (skipped with a note if unknown)
    seeds: [0, 1, 2]              # a list, or a string such as "0-4"
    baseline: fifo                # ratios in the table are relative to this policy
    env: aryl_gym/Aryl-v1         # the env through which learned agents act
    env_kwargs: {}                # keyword arguments of gym.make for every agent
    policies:                     # reference (heuristic) policies, run natively by the simulator
      - fifo
      - {name: random, optional: true}   # optional: skipped with a note when not registered
    agents:                       # learned agents, acting through the env
      ppo-testbed: ppo-testbed    # NAME: SOURCE (shipped name, path to an SB3 .zip, module:factory)
      mine: {source: my_pkg.agents:make, env_kwargs: {action_mode: sequential}}

Loading is strict in the style of :mod:`aryl_gym.config`: unknown keys, empty lists, duplicate
names, unknown scenarios and unregistered policies are a :class:`~aryl_gym.config.ConfigError`
naming the file, the key and the fix. Agents are *not* resolved here (a model file may be
missing or the env not yet installed); the runner skips an unavailable agent with a note.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError, configs_dir, load_scenario, load_yaml

#: the env learned agents act through unless the suite says otherwise
DEFAULT_ENV_ID = "aryl_gym/Aryl-v1"

_TOP_KEYS = {
    "name",
    "description",
    "scenarios",
    "seeds",
    "baseline",
    "env",
    "env_kwargs",
    "policies",
    "agents",
    "rank_by",
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass(frozen=True)
class Entrant:
    """One competitor of a suite.

    ``kind`` is ``"policy"`` (a registered reference policy run natively by
    :meth:`~aryl_gym.sim.engine.Simulator.run`) or ``"agent"`` (an object with an SB3-style
    ``predict`` that acts through the gym env ``env_id``). ``source`` is how an agent is loaded:
    a shipped name, a path to an SB3 model, or ``module:factory``.
    """

    name: str
    kind: str = "policy"
    source: str = ""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    optional: bool = False


@dataclass(frozen=True)
class Suite:
    """A parsed and validated suite (see the module docstring for the YAML format)."""

    name: str
    description: str
    scenarios: tuple[str, ...]
    seeds: tuple[int, ...]
    entrants: tuple[Entrant, ...]
    baseline: str = "fifo"
    env_id: str = DEFAULT_ENV_ID
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    rank_by: str = "avg_jct"
    source: str = "<dict>"
    #: policies listed as optional that are not registered (skipped with a note)
    missing: tuple[str, ...] = ()
    #: scenarios listed as optional that do not exist here (skipped with a note)
    missing_scenarios: tuple[str, ...] = ()

    @property
    def policies(self) -> list[Entrant]:
        return [e for e in self.entrants if e.kind == "policy"]

    @property
    def agents(self) -> list[Entrant]:
        return [e for e in self.entrants if e.kind == "agent"]

    def with_agents(self, extra: Mapping[str, str]) -> Suite:
        """A copy with user agents ``{name: source}`` added (``--agent NAME=SOURCE``)."""
        names = {e.name for e in self.entrants}
        added = []
        for name, src in extra.items():
            _check_name(name, "--agent", "<command line>")
            if name in names:
                raise ConfigError(
                    f"--agent {name}={src}: the suite already has an entrant named {name!r}; "
                    "pick another name"
                )
            if not src:
                raise ConfigError(f"--agent {name}=: give a source (path, shipped name or module:factory)")
            names.add(name)
            added.append(Entrant(name=name, kind="agent", source=src))
        return _replace(self, entrants=self.entrants + tuple(added))


def _replace(s: Suite, **kw: Any) -> Suite:
    import dataclasses

    return dataclasses.replace(s, **kw)


def suites_dir() -> Path:
    return configs_dir() / "suites"


def list_suites() -> list[str]:
    return sorted(p.stem for p in suites_dir().glob("*.yaml"))


def parse_seeds(value: Any, source: str) -> tuple[int, ...]:
    """``[0, 1, 2]``, ``"0-4"`` or ``"0,2,5"`` -> a tuple of distinct non-negative seeds."""
    seeds: list[int] = []
    if isinstance(value, int) and not isinstance(value, bool):
        seeds = [value]
    elif isinstance(value, str):
        try:
            for part in value.split(","):
                part = part.strip()
                if not part:
                    continue
                if "-" in part[1:]:
                    a, b = (int(x) for x in part.split("-", 1))
                    if b - a + 1 + len(seeds) > 100_000:
                        raise ConfigError(
                            f"{source}: seeds range {part!r} has {b - a + 1:,} seeds; at most "
                            "100,000 per suite (check the range)"
                        )
                    seeds.extend(range(a, b + 1))
                else:
                    seeds.append(int(part))
        except ConfigError:
            raise
        except ValueError:
            raise ConfigError(
                f"{source}: seeds must be a list of integers or a string like '0-4', got {value!r}"
            ) from None
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{source}: seeds must be integers, got {v!r}")
            seeds.append(v)
    else:
        raise ConfigError(f"{source}: seeds must be a list of integers or a string like '0-4'")
    if not seeds:
        raise ConfigError(f"{source}: seeds is empty; give at least one seed")
    if any(s < 0 for s in seeds):
        raise ConfigError(f"{source}: seeds must be >= 0, got {seeds}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{source}: seeds has duplicates: {seeds}")
    return tuple(seeds)


def _check_name(name: Any, where: str, source: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{source}: {where}: name {name!r} must be a non-empty string of letters, digits, "
            "'_', '.', '+', '-' (it names files and TensorBoard runs)"
        )
    return name


def _parse_policies(value: Any, source: str) -> list[Entrant]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{source}: policies must be a list of policy names")
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(Entrant(name=_check_name(item, "policies", source)))
        elif isinstance(item, Mapping):
            bad = sorted(set(item) - {"name", "optional"})
            if bad:
                raise ConfigError(
                    f"{source}: unknown key '{bad[0]}' in a policies entry. Allowed keys: name, optional"
                )
            if "name" not in item:
                raise ConfigError(f"{source}: a policies entry needs 'name'")
            opt = item.get("optional", False)
            if not isinstance(opt, bool):
                raise ConfigError(f"{source}: policies.{item['name']}.optional must be true or false")
            out.append(Entrant(name=_check_name(item["name"], "policies", source), optional=opt))
        else:
            raise ConfigError(f"{source}: policies entries are names or {{name, optional}}, got {item!r}")
    return out


def _parse_agents(value: Any, source: str) -> list[Entrant]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{source}: agents must be a mapping NAME: SOURCE (a shipped name, a path to an SB3 "
            "model, or module:factory)"
        )
    out = []
    for name, spec in value.items():
        _check_name(name, "agents", source)
        env_kwargs: Mapping[str, Any] = {}
        if isinstance(spec, str):
            src = spec
        elif isinstance(spec, Mapping):
            bad = sorted(set(spec) - {"source", "env_kwargs"})
            if bad:
                raise ConfigError(
                    f"{source}: unknown key '{bad[0]}' in agents.{name}. Allowed keys: env_kwargs, source"
                )
            src = spec.get("source", "")
            env_kwargs = spec.get("env_kwargs") or {}
            if not isinstance(env_kwargs, Mapping):
                raise ConfigError(f"{source}: agents.{name}.env_kwargs must be a mapping")
        else:
            raise ConfigError(f"{source}: agents.{name} must be a source string or a mapping")
        if not isinstance(src, str) or not src:
            raise ConfigError(f"{source}: agents.{name}: missing source (shipped name, path or module:factory)")
        out.append(Entrant(name=name, kind="agent", source=src, env_kwargs=dict(env_kwargs)))
    return out


def _parse_scenarios(value: Any, source: str, check: bool) -> tuple[list[str], list[str]]:
    """Scenario entries: names or paths, or ``{name, optional}``; returns (kept, missing)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{source}: scenarios must be a non-empty list of scenario names or paths")
    entries: list[tuple[str, bool]] = []
    for item in value:
        if isinstance(item, str) and item:
            entries.append((item, False))
        elif isinstance(item, Mapping):
            bad = sorted(set(item) - {"name", "optional"})
            if bad:
                raise ConfigError(
                    f"{source}: unknown key '{bad[0]}' in a scenarios entry. Allowed keys: name, optional"
                )
            nm, opt = item.get("name"), item.get("optional", False)
            if not isinstance(nm, str) or not nm or not isinstance(opt, bool):
                raise ConfigError(f"{source}: a scenarios entry needs name (a string) and optional (true/false)")
            entries.append((nm, opt))
        else:
            raise ConfigError(f"{source}: scenarios entries are names, paths or {{name, optional}}, got {item!r}")
    names = [n for n, _ in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: scenarios has duplicates: {dup[0]!r}")
    kept, missing = [], []
    for nm, opt in entries:
        if check:
            try:
                load_scenario(nm)
            except ConfigError as exc:
                if opt:
                    missing.append(nm)
                    continue
                raise ConfigError(f"{source}: scenarios: {exc}") from None
        kept.append(nm)
    if not kept:
        raise ConfigError(f"{source}: none of the suite's scenarios is available ({', '.join(missing)})")
    return kept, missing


def suite_from_dict(
    data: Any, source: str = "<dict>", allow_missing: bool = False, check_scenarios: bool = True
) -> Suite:
    """Build and validate a :class:`Suite`.

    ``allow_missing`` turns an unregistered required policy into a skip (as if it were marked
    ``optional``) instead of an error.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a suite must be a mapping at the top level")
    if data.get("kind") == "reclaim":
        raise ConfigError(
            f"{source}: a reclaim suite (kind: reclaim); run it with aryl-gym leaderboard --suite "
            f"{data.get('name', source)} (aryl_gym.leaderboard.reclaim_suite)"
        )
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{unknown[0]}' in the suite. Allowed keys: {', '.join(sorted(_TOP_KEYS))}"
        )
    for key in ("name", "scenarios", "seeds"):
        if key not in data:
            raise ConfigError(f"{source}: missing key '{key}'")
    name = _check_name(data["name"], "name", source)
    scen, missing_scen = _parse_scenarios(data["scenarios"], source, check_scenarios)
    seeds = parse_seeds(data["seeds"], source)
    entrants = _parse_policies(data.get("policies"), source) + _parse_agents(data.get("agents"), source)
    if not entrants:
        raise ConfigError(f"{source}: the suite has no policies and no agents")
    names = [e.name for e in entrants]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: entrant names must be unique; {dup[0]!r} appears twice")
    from aryl_gym.agents import policy_names

    known = set(policy_names())
    missing = []
    kept = []
    for e in entrants:
        if e.kind == "policy" and e.name not in known:
            if e.optional or allow_missing:
                missing.append(e.name)
                continue
            raise ConfigError(
                f"{source}: policy {e.name!r} is not registered. Known policies: "
                f"{', '.join(sorted(known))}. Fix the name, mark it {{name: {e.name}, optional: true}}, "
                "or pass --allow-missing to skip it with a note"
            )
        kept.append(e)
    baseline = data.get("baseline", "fifo")
    if not isinstance(baseline, str) or baseline not in names:
        raise ConfigError(
            f"{source}: baseline {baseline!r} must be one of the suite's entrants ({', '.join(names)})"
        )
    if baseline in missing:
        raise ConfigError(f"{source}: the baseline policy {baseline!r} is not registered")
    env_id = data.get("env", DEFAULT_ENV_ID)
    if not isinstance(env_id, str) or not env_id:
        raise ConfigError(f"{source}: env must be a gymnasium id such as {DEFAULT_ENV_ID!r}")
    env_kwargs = data.get("env_kwargs") or {}
    if not isinstance(env_kwargs, Mapping):
        raise ConfigError(f"{source}: env_kwargs must be a mapping of gym.make keyword arguments")
    if "scenario" in env_kwargs:
        raise ConfigError(f"{source}: env_kwargs must not set 'scenario' (the suite's scenarios do)")
    rank_by = data.get("rank_by", "avg_jct")
    from aryl_gym.leaderboard.runner import METRIC_TYPES

    if rank_by not in METRIC_TYPES:
        raise ConfigError(
            f"{source}: rank_by {rank_by!r} is not a metric. Metrics: {', '.join(METRIC_TYPES)}"
        )
    desc = data.get("description", "")
    return Suite(
        name=name,
        description=str(desc or "").strip(),
        scenarios=tuple(scen),
        seeds=seeds,
        entrants=tuple(kept),
        baseline=baseline,
        env_id=env_id,
        env_kwargs=dict(env_kwargs),
        rank_by=rank_by,
        source=source,
        missing=tuple(missing),
        missing_scenarios=tuple(missing_scen),
    )


def load_suite(name_or_path: str | os.PathLike[str], allow_missing: bool = False) -> Suite:
    """Load a suite by name (``configs/suites/NAME.yaml``) or by path to a YAML file."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        path = Path(text)
    else:
        path = suites_dir() / f"{text}.yaml"
        if not path.exists():
            raise ConfigError(
                f"unknown suite '{text}'. Known suites: {', '.join(list_suites()) or '(none)'}; "
                "or pass a path to a YAML file"
            )
    data = load_yaml(path)
    return suite_from_dict(data, source=str(path), allow_missing=allow_missing)
