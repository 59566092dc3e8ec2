"""Leaderboard suites: a fixed set of scenarios x seeds x policies (SPEC 7).

A suite is a YAML file in ``configs/suites/`` (or any path)::

    name: quick
    description: testbed, 3 seeds, every reference policy and the shipped agent
    scenarios: [testbed]          # names (configs/scenarios/NAME.yaml), YAML paths, or
                                  # {name: X, optional: true} (skipped with a note if unknown)
    seeds: [0, 1, 2]              # a list, or a string such as "0-4"
    baseline: baseline            # ratios in the table are relative to this policy
    env: aryl_gym/Aryl-v2         # the env through which learned agents act
    env_kwargs: {}                # keyword arguments of gym.make for every agent
    policies:                     # reference (heuristic) policies, run natively by the simulator
      - baseline
      - {name: random, optional: true}   # optional: skipped with a note when not registered
    agents:                       # learned agents, acting through the env
      ppo-testbed: ppo-testbed    # NAME: SOURCE (shipped name, path to an SB3 .zip, module:factory)
      mine: {source: my_pkg.agents:make, env_kwargs: {action_mode: sequential}}

Loading is strict: the schema :class:`SuiteFile` is checked by pydantic (:mod:`aryl_gym.schema`;
strict types, unknown keys forbidden), then unique names, known scenarios and registered
policies; every failure is a :class:`~aryl_gym.config.ConfigError` naming the file, the key and
the fix. Agents are *not* resolved here (a model file may be
missing or the env not yet installed); the runner skips a suite's unavailable agent with a
note, and stops on an agent given with ``--agent`` that cannot be loaded.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Ge, Le, MinLen
from pydantic import AfterValidator, BeforeValidator

from aryl_gym.agents import policy_names
from aryl_gym.config import ConfigError, configs_dir, load_scenario, load_yaml
from aryl_gym.leaderboard.results import METRIC_TYPES
from aryl_gym.schema import validate

#: the env learned agents act through unless the suite says otherwise
DEFAULT_ENV_ID = "aryl_gym/Aryl-v2"

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
    #: named by the user on the command line (``--agent NAME=SOURCE``): an agent that cannot be
    #: loaded stops the run instead of being skipped with a note, as a suite's own agents are
    explicit: bool = False


@dataclass(frozen=True)
class Suite:
    """A parsed and validated suite (see the module docstring for the YAML format)."""

    name: str
    description: str
    scenarios: tuple[str, ...]
    seeds: tuple[int, ...]
    entrants: tuple[Entrant, ...]
    baseline: str = "baseline"
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
        """A copy with user agents ``{name: source}`` added (``--agent NAME=SOURCE``), marked
        :attr:`Entrant.explicit`: one that cannot be loaded stops the run."""
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
            added.append(Entrant(name=name, kind="agent", source=src, explicit=True))
        return _replace(self, entrants=self.entrants + tuple(added))


def _replace(s: Suite, **kw: Any) -> Suite:
    return dataclasses.replace(s, **kw)


def suites_dir() -> Path:
    return configs_dir() / "suites"


def list_suites() -> list[str]:
    return sorted(p.stem for p in suites_dir().glob("*.yaml"))


def _seed_list(value: Any) -> Any:
    """``"0-4"``, ``"0,2,5"`` or ``3`` -> a list of seeds; a list is returned as is (its items
    are checked by the schema). Raises ValueError with the reason."""
    if isinstance(value, bool):
        raise ValueError("must be a list of integers or a string like '0-4'")
    if isinstance(value, int):
        return [value]
    if not isinstance(value, str):
        return value
    seeds: list[int] = []
    parts = [part.strip() for part in value.split(",")]
    if any(parts) and not all(parts):
        # was: skipped, so '1,,2' named seeds 1 and 2 (a typo of '1,2' or of '1,12') without a word
        raise ValueError("has an empty item (two commas in a row, or a comma at an end); write seeds "
                         "like '0,1,2' or '0-4'")
    if not value.isascii():  # int() takes any script's digits: '١' was seed 1
        raise ValueError("must be written in ASCII digits, like '0-4' or '0,2,5'")
    try:
        for part in parts:
            if not part:
                continue
            if "-" in part[1:]:
                a, b = (int(x) for x in part.split("-", 1))
                if b < a:  # was: "is empty; give at least one seed" (or dropped beside other parts)
                    raise ValueError(f"range {part!r} is empty (end < start); write START-END")
                if b - a + 1 + len(seeds) > MAX_SUITE_SEEDS:
                    # was: "range '60001-120000' has 60,000 seeds; at most 100,000", true of the
                    # range but not of the suite it brought over the limit
                    raise ValueError(
                        f"range {part!r} brings the suite to {b - a + 1 + len(seeds):,} seeds; at most "
                        f"{MAX_SUITE_SEEDS:,} per suite (check the range)"
                    )
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
    except ValueError as exc:
        if "at most" in str(exc) or "START-END" in str(exc):
            raise
        raise ValueError("must be a list of integers or a string like '0-4'") from None
    return seeds


def _distinct_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    if not seeds:
        raise ValueError("is empty; give at least one seed")
    if len(seeds) > MAX_SUITE_SEEDS:  # was: enforced for "A-B" ranges only, not for a list
        raise ValueError(f"has {len(seeds):,} seeds; at most {MAX_SUITE_SEEDS:,} per suite")
    if len(set(seeds)) != len(seeds):
        # was: "has duplicates: [every seed]", the whole list (100,000 numbers for "0-99999,5")
        dup = sorted(x for x, n in Counter(seeds).items() if n > 1)
        more = f" (and {len(dup) - 1:,} more)" if len(dup) > 1 else ""
        raise ValueError(f"has duplicates: seed {dup[0]} is listed more than once{more}; list each seed "
                         "once (check for overlapping ranges)")
    return seeds


#: the most seeds a suite may list (a range beyond this is almost surely a typo)
MAX_SUITE_SEEDS = 100_000
#: the largest seed (the one every command takes: ``aryl-gym simulate --seed``, ``--seeds``;
#: commands/_common.py MAX_SEED). Was: no bound, so a suite ran seed 10**20, which no other
#: command can replay
MAX_SEED = 2**63 - 1

#: seeds of a suite: a list, one integer, or a string such as ``"0-4"`` or ``"0,2,5"``
Seeds = Annotated[
    tuple[Annotated[int, Ge(0), Le(MAX_SEED)], ...], BeforeValidator(_seed_list), AfterValidator(_distinct_seeds)
]


def parse_seeds(value: Any, source: str) -> tuple[int, ...]:
    """``[0, 1, 2]``, ``"0-4"`` or ``"0,2,5"`` -> a tuple of distinct non-negative seeds."""

    return validate(_SeedsOnly, {"seeds": value}, source).seeds


def _named(value: Any) -> Any:
    """A bare name stands for ``{name: NAME}``."""
    return {"name": value} if isinstance(value, str) else value


def _sourced(value: Any) -> Any:
    """A bare string stands for ``{source: SOURCE}``."""
    return {"source": value} if isinstance(value, str) else value


def _listed(value: Any) -> Any:
    """One scenario may be written without the list."""
    return [value] if isinstance(value, str) else value


@dataclass(frozen=True)
class NamedEntry:
    """A ``scenarios`` or ``policies`` entry: a name, or ``{name, optional}``."""

    name: Annotated[str, MinLen(1)]
    optional: bool = False


@dataclass(frozen=True)
class AgentEntry:
    """An ``agents`` value: a source string, or ``{source, env_kwargs}``."""

    source: Annotated[str, MinLen(1)]
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteFile:
    """The schema of a suite YAML (see the module docstring)."""

    name: str
    scenarios: Annotated[list[Annotated[NamedEntry, BeforeValidator(_named)]], BeforeValidator(_listed), MinLen(1)]
    seeds: Seeds
    description: str | None = ""
    baseline: str = "baseline"
    env: Annotated[str, MinLen(1)] = DEFAULT_ENV_ID
    env_kwargs: Mapping[str, Any] | None = None
    policies: list[Annotated[NamedEntry, BeforeValidator(_named)]] | None = None
    agents: Mapping[str, Annotated[AgentEntry, BeforeValidator(_sourced)]] | None = None
    rank_by: str = "avg_jct"


@dataclass(frozen=True)
class _SeedsOnly:
    seeds: Seeds


def _check_name(name: Any, where: str, source: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{source}: {where}: name {name!r} must be a non-empty string of letters, digits, "
            "'_', '.', '+', '-' (it names files and TensorBoard runs)"
        )
    return name


def _beside_suite(name: str, source: str) -> str:
    """A hint for a relative scenario path that is missing from the working directory but sits
    beside the suite file (paths in a suite resolve against the working directory, as on the
    command line; the suite's own folder is not searched)."""
    p = Path(name)
    if p.is_absolute() or p.exists() or not (name.endswith((".yaml", ".yml")) or os.sep in name):
        return ""
    beside = Path(source).parent / p
    if not beside.is_file():
        return ""
    return (f". Scenario paths in a suite are read from the working directory ({os.getcwd()}), not "
            f"from the suite file's folder; the file is at {beside}: list it as {str(beside)!r} or "
            "as an absolute path")


def _scenario_exists(name: str) -> bool:
    """Whether ``name`` names a scenario file (as :func:`~aryl_gym.config.load_scenario` finds it),
    valid or not: an optional scenario is skipped only when it does not exist."""
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        p = Path(name)
    else:
        p = configs_dir() / "scenarios" / f"{name}.yaml"
    try:
        return p.exists()
    except OSError:  # e.g. a name longer than the system allows
        return False


def _check_scenarios(entries: list[NamedEntry], source: str, check: bool) -> tuple[list[str], list[str]]:
    """Scenario entries -> (kept, missing): an unknown optional scenario is skipped."""
    names = [e.name for e in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: scenarios has duplicates: {dup[0]!r}")
    kept, missing = [], []
    files: dict[str, str] = {}  # the scenario file each entry names -> the entry
    for e in entries:
        if check:
            try:
                cfg = load_scenario(e.name)
            except ConfigError as exc:
                if e.optional and not _scenario_exists(e.name):
                    # was: any error, so an existing file with a typo was skipped as "not defined"
                    missing.append(e.name)
                    continue
                raise ConfigError(f"{source}: scenarios: {exc}{_beside_suite(e.name, source)}") from None
            # one file under two names (was: run twice, as two scenarios of the table)
            where = os.path.realpath(cfg.source) if cfg.source and os.path.isfile(cfg.source) else None
            if where is not None:
                if where in files:
                    raise ConfigError(f"{source}: scenarios {files[where]!r} and {e.name!r} are the same "
                                      f"scenario file ({where}); list it once")
                files[where] = e.name
        kept.append(e.name)
    if not kept:
        raise ConfigError(f"{source}: none of the suite's scenarios is available ({', '.join(missing)})")
    return kept, missing



def _check_env(env_id: str, kwargs: Mapping[str, Any], where: str, source: str) -> None:
    """``kwargs`` for the suite's env: never ``scenario`` (the suite's scenarios set it); for an
    aryl_gym allocation env, only its options (docs/env.md), and the id itself registered."""
    if "scenario" in kwargs:
        raise ConfigError(f"{source}: {where} must not set 'scenario' (the suite's scenarios do)")
    # the env table: registering the envs needs no torch
    from aryl_gym.envs import ENTRIES
    from aryl_gym.envs.options import EnvOptions

    if env_id.startswith("aryl_gym/") and env_id not in ENTRIES:
        ids = sorted(k for k in ENTRIES if k.startswith("aryl_gym/"))
        raise ConfigError(f"{source}: env {env_id!r} is not an aryl_gym env; known: {', '.join(ids)}")
    if env_id in ENTRIES:
        names = set(EnvOptions.names()) - {"world_version"}
        bad = sorted(k for k in kwargs if k not in names)
        if bad:  # was: found when each episode ran (or never, without agents)
            raise ConfigError(f"{source}: {where}: unknown env option {bad[0]!r}; options: "
                              f"{', '.join(sorted(names))} (docs/env.md)")


def _check_env_values(env_id: str, kwargs: Mapping[str, Any], where: str, source: str) -> None:
    """The values of an agent's env options (the suite's ``env_kwargs`` with its own over them)
    as the allocation env checks them. Was: only the names were checked here, so
    ``env_kwargs: {window: abc}`` failed every episode of the agent ("FAILED ... window must be
    an integer >= 1"), after the suite had run."""
    # the env table: registering the envs needs no torch
    from aryl_gym.envs import ENTRIES
    from aryl_gym.envs.options import EnvOptions

    entry = ENTRIES.get(env_id)
    if entry is None or not entry[0].endswith(":ArylEnv"):
        return  # another env (a plugin's, the reclaim env) checks its own options
    try:
        EnvOptions.from_kwargs(world_version=entry[2], **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {where}: {exc} (docs/env.md)") from None


def suite_from_dict(
    data: Any, source: str = "<dict>", allow_missing: bool = False, check_scenarios: bool = True
) -> Suite:
    """Build and validate a :class:`Suite`.

    The schema (:class:`SuiteFile`, checked by pydantic in strict mode) checks every key's
    type; then the rules that need more than one key or the registries: unique names, known
    scenarios and policies, the baseline among the entrants, a known ``rank_by`` metric.
    ``allow_missing`` turns an unregistered required policy into a skip (as if it were marked
    ``optional``) instead of an error.
    """

    if isinstance(data, Mapping) and data.get("kind") == "reclaim":
        raise ConfigError(
            f"{source}: a reclaim suite (kind: reclaim); run it with aryl-gym leaderboard --suite "
            f"{data.get('name', source)} (aryl_gym.leaderboard.reclaim_suite)"
        )
    f = validate(SuiteFile, data, source)
    name = _check_name(f.name, "name", source)
    scen, missing_scen = _check_scenarios(f.scenarios, source, check_scenarios)
    entrants = [Entrant(name=_check_name(p.name, "policies", source), optional=p.optional)
                for p in f.policies or []]
    for aname, spec in (f.agents or {}).items():
        _check_name(aname, "agents", source)
        entrants.append(Entrant(name=aname, kind="agent", source=spec.source, env_kwargs=dict(spec.env_kwargs)))
    if not entrants:
        raise ConfigError(f"{source}: the suite has no policies and no agents")
    names = [e.name for e in entrants]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: entrant names must be unique; {dup[0]!r} appears twice")

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
    if f.baseline not in names:
        raise ConfigError(
            f"{source}: baseline {f.baseline!r} must be one of the suite's entrants ({', '.join(names)})"
        )
    if f.baseline in missing:
        raise ConfigError(f"{source}: the baseline policy {f.baseline!r} is not registered")
    env_kwargs = dict(f.env_kwargs or {})
    _check_env(f.env, env_kwargs, "env_kwargs", source)
    for e in kept:
        if e.kind == "agent":  # was: a per-agent scenario dropped, a typo found episode by episode
            _check_env(f.env, e.env_kwargs, f"agents.{e.name}.env_kwargs", source)
            where = f"agents.{e.name}.env_kwargs" + (" (over the suite's env_kwargs)" if env_kwargs else "")
            _check_env_values(f.env, {**env_kwargs, **e.env_kwargs}, where, source)

    if f.rank_by not in METRIC_TYPES:
        raise ConfigError(
            f"{source}: rank_by {f.rank_by!r} is not a metric. Metrics: {', '.join(METRIC_TYPES)}"
        )
    return Suite(
        name=name,
        description=str(f.description or "").strip(),
        scenarios=tuple(scen),
        seeds=f.seeds,
        entrants=tuple(kept),
        baseline=f.baseline,
        env_id=f.env,
        env_kwargs=env_kwargs,
        rank_by=f.rank_by,
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
