"""The ``reclaim`` leaderboard: reclaim rules ranked by their gap to the exact optimum.

A reclaim suite is a YAML file with ``kind: reclaim`` (``configs/suites/reclaim.yaml``)::

    name: reclaim
    kind: reclaim
    description: ...
    instances:                          # where the reclaim events come from (concatenated)
      - {scenario: basic, seeds: 0-2}   # events of episodes under Aryl (cached in OUT/snapshots/)
      - {scenario: production, seeds: [0], optional: true}
      - {synthetic: 40, servers: [20, 200], seed: 0, elastic: 0.5}
      - {snapshots: path/to/saved.npz}  # from aryl-gym reclaim-study --save-snapshots
    nontrivial_only: true               # drop events with at least n idle loaned servers
    seed: 0                             # seed of the random rule
    policies: [optimum, aryl, default, random]
    agents: {}                          # NAME: SOURCE, acting through ArylReclaim (snapshot mode)

Every instance is a snapshot (:mod:`aryl_gym.reclaim_snapshots`); every entrant picks ``n``
loaned servers on it; the optimum (:func:`aryl_gym.agents.reclaim.milp_reclaim`) gives the
fewest preemptions possible. The table ranks entrants by the **optimality gap** -- total
preempted jobs over the optimum's, minus one -- with a paired bootstrap 95% interval over
instances, and shows the mean extra preemptions per instance (95% t interval), the share of
instances where the entrant is optimal, the overlap of its choice with the optimum's and its
time per decision. Learned agents act through the reclaim env in snapshot mode
(``ArylReclaimEnv(snapshots=...)``), one episode per instance (``options={"index": i}``).

Outputs in ``OUT/``: ``results.csv`` (one row per instance and entrant, appended as they
finish; ``--resume`` keeps finished rows), ``leaderboard.md``, ``leaderboard.json`` and the
recorded snapshots ``snapshots/SCENARIO-seedN.npz`` (reused by later runs).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from annotated_types import Ge, Le, MinLen
from pydantic import AfterValidator

from aryl_gym.agents.reclaim import (
    aryl_reclaim,
    default_reclaim_instance,
    milp_reclaim,
    overlap,
    reclaim_preemptions,
)
from aryl_gym.commands._common import strict_json
from aryl_gym.commands._common import table as text_table
from aryl_gym.commands.reclaim_study import trivial
from aryl_gym.config import ConfigError, list_scenarios, load_scenario, load_yaml
from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.episodes import AgentUnavailable, load_agent
from aryl_gym.fileio import (
    DirLock,
    atomic_write_text,
    check_out_folder,
    claim_folder,
    unique_backup,
)
from aryl_gym.leaderboard.results import (
    CsvAppender,
    RowSchema,
    digest_path,
    move_aside,
    register_schema,
    rewrite_rows,
    scan_rows,
)
from aryl_gym.leaderboard.runner import prepare_out_dir
from aryl_gym.leaderboard.suites import Seeds, _check_name, suites_dir
from aryl_gym.provenance import config_hash
from aryl_gym.reclaim_snapshots import (
    load_snapshots,
    record_snapshots,
    save_snapshots,
    synthetic_snapshots,
)
from aryl_gym.rollout import play
from aryl_gym.schema import validate
from aryl_gym.stats import bootstrap_replicates, percentile_interval, t_half_width

KIND = "reclaim"
RULES = ("optimum", "aryl", "default", "random")
CSV_COLUMNS = [
    "suite",
    "instance",
    "source",
    "servers",
    "n",
    "entrant",
    "kind",
    "preemptions",
    "optimal_preemptions",
    "overlap",
    "ms",
    "note",
]


@dataclass(frozen=True)
class ReclaimSuite:
    name: str
    description: str
    instances: tuple[Mapping[str, Any], ...]
    policies: tuple[str, ...]
    agents: Mapping[str, str] = field(default_factory=dict)
    nontrivial_only: bool = True
    seed: int = 0
    source: str = "<dict>"


# ------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------
def _suite_path(name_or_path: str | os.PathLike[str]) -> Path | None:
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return Path(text)
    p = suites_dir() / f"{text}.yaml"
    return p if p.exists() else None


def is_reclaim_suite(name_or_path: str | os.PathLike[str]) -> bool:
    """Whether the suite file says ``kind: reclaim`` (False when it cannot be read)."""
    p = _suite_path(name_or_path)
    if p is None or not p.is_file():
        return False
    try:
        data = load_yaml(p)
    except ConfigError:
        return False
    return isinstance(data, Mapping) and data.get("kind") == KIND


def _min_le_max(v: tuple[int, int]) -> tuple[int, int]:
    if v[0] > v[1]:
        raise ValueError("must be [min, max] with min <= max")
    return v


@dataclass(frozen=True)
class ScenarioInstances:
    """Reclaim events of episodes of a scenario under Aryl (recorded, cached)."""

    scenario: Annotated[str, MinLen(1)]
    seeds: Seeds = (0,)
    optional: bool = False


@dataclass(frozen=True)
class SyntheticInstances:
    """``synthetic`` random instances with ``servers: [min, max]`` loaned servers."""

    synthetic: Annotated[int, Ge(1)]
    servers: Annotated[
        tuple[Annotated[int, Ge(2), Le(400)], Annotated[int, Ge(2), Le(400)]], AfterValidator(_min_le_max)
    ] = (4, 200)
    seed: Annotated[int, Ge(0)] = 0
    elastic: Annotated[float, Ge(0), Le(1)] = 0.5


@dataclass(frozen=True)
class SnapshotInstances:
    """Saved snapshots (``aryl-gym reclaim-study --save-snapshots``)."""

    snapshots: Annotated[str, MinLen(1)]
    optional: bool = False


_INSTANCE_KINDS: dict[str, type] = {
    "scenario": ScenarioInstances,
    "synthetic": SyntheticInstances,
    "snapshots": SnapshotInstances,
}


@dataclass(frozen=True)
class ReclaimSuiteFile:
    """The schema of a reclaim suite YAML (see the module docstring); each ``instances`` entry
    is checked against the schema of its kind."""

    name: str
    kind: str
    instances: Annotated[list[Mapping[str, Any]], MinLen(1)]
    description: str | None = ""
    nontrivial_only: bool = True
    seed: Annotated[int, Ge(0)] = 0
    policies: tuple[str, ...] = RULES
    agents: Mapping[str, Annotated[str, MinLen(1)]] | None = None


def _instance_entry(item: Mapping[str, Any], source: str, i: int) -> dict[str, Any]:
    """One ``instances`` entry checked against the schema of its kind; returned as given, with
    ``seeds`` parsed."""

    kinds = [k for k in _INSTANCE_KINDS if k in item]
    if len(kinds) != 1:
        raise ConfigError(f"{source}: instances[{i}]: give exactly one of scenario, synthetic, snapshots")
    checked: Any = validate(_INSTANCE_KINDS[kinds[0]], item, source, prefix=("instances", i))
    out = dict(item)
    if isinstance(checked, ScenarioInstances):
        out["seeds"] = checked.seeds
    return out


def reclaim_suite_from_dict(data: Any, source: str = "<dict>") -> ReclaimSuite:
    """Build and validate a :class:`ReclaimSuite`: the schema :class:`ReclaimSuiteFile`
    (pydantic, strict, unknown keys forbidden), then the reclaim rules and names."""

    if isinstance(data, Mapping) and data.get("kind", KIND) != KIND:
        raise ConfigError(f"{source}: a reclaim suite needs 'kind: reclaim'")
    f = validate(ReclaimSuiteFile, data, source)
    name = _check_name(f.name, "name", source)
    entries = tuple(_instance_entry(it, source, i) for i, it in enumerate(f.instances))
    pols = list(f.policies)
    bad = [p for p in pols if p not in RULES]
    if bad:
        raise ConfigError(f"{source}: unknown reclaim rule {bad[0]!r}. Known: {', '.join(RULES)}")
    if len(set(pols)) != len(pols):
        raise ConfigError(f"{source}: policies has duplicates")
    agents = dict(f.agents or {})
    for a in agents:
        _check_name(a, "agents", source)
        if a in pols:
            raise ConfigError(f"{source}: agent name {a!r} clashes with a reclaim rule")
    return ReclaimSuite(
        name=name,
        description=" ".join(str(f.description or "").split()),
        instances=entries,
        policies=tuple(pols),
        agents=agents,
        nontrivial_only=f.nontrivial_only,
        seed=f.seed,
        source=source,
    )


def load_reclaim_suite(name_or_path: str | os.PathLike[str]) -> ReclaimSuite:
    p = _suite_path(name_or_path)
    if p is None:
        raise ConfigError(f"unknown suite '{name_or_path}'")
    return reclaim_suite_from_dict(load_yaml(p), source=str(p))


# ------------------------------------------------------------------------------------------------
# instances
# ------------------------------------------------------------------------------------------------
def build_instances(
    suite: ReclaimSuite, cache_dir: Path | None, data_root: str | None = None
) -> tuple[list[tuple[str, Any]], list[str]]:
    """(instance key, snapshot) pairs in suite order, and notes. Recorded episodes are cached
    in ``cache_dir`` as ``SCENARIO-seedN.npz``."""

    out: list[tuple[str, Any]] = []
    notes: list[str] = []
    for e in suite.instances:
        if "scenario" in e:
            sc = str(e["scenario"])
            for seed in e["seeds"]:
                try:
                    # was: Path(sc).stem, so a scenario file basic.yaml of another folder (or another
                    # suite entry of the same stem) read the shipped basic's cached events and gave
                    # instance keys that collided with them
                    tag = _scenario_tag(sc)
                except (ConfigError, FileNotFoundError) as exc:
                    if e.get("optional"):
                        notes.append(f"skipped optional instances {sc} seed {seed}: {exc}")
                        continue
                    raise
                cache = cache_dir / f"{tag}-seed{seed}.npz" if cache_dir is not None else None
                if cache is not None and cache.is_file():
                    snaps = load_snapshots(cache)
                else:
                    try:
                        snaps = record_snapshots(sc, [seed], data_root=data_root)
                    except (ConfigError, FileNotFoundError) as exc:
                        if e.get("optional"):
                            notes.append(f"skipped optional instances {sc} seed {seed}: {exc}")
                            continue
                        raise
                    if cache is not None:
                        save_snapshots(cache, snaps)
                out.extend((f"{tag}/seed{seed}#{k}", sn) for k, sn in enumerate(snaps))
        elif "synthetic" in e:
            lo, hi = e.get("servers", [4, 200])
            sd = int(e.get("seed", 0))
            snaps = synthetic_snapshots(int(e["synthetic"]), lo, hi, sd, float(e.get("elastic", 0.5)))
            out.extend((f"synthetic{lo}-{hi}/seed{sd}#{k}", sn) for k, sn in enumerate(snaps))
        else:
            path = Path(str(e["snapshots"]))
            if not path.is_file() and e.get("optional"):
                notes.append(f"skipped optional snapshots {path}: no such file")
                continue
            snaps = load_snapshots(path)
            out.extend((f"{path.name}#{k}", sn) for k, sn in enumerate(snaps))
    seen: dict[str, int] = {}
    for k, _ in out:
        seen[k] = seen.get(k, 0) + 1
    dup = sorted(k for k, c in seen.items() if c > 1)
    if dup:
        # was: played and written twice under one key, and the table kept one of them (its figures
        # did not match the rows of results.csv)
        raise ConfigError(
            f"{suite.source}: instance {dup[0]} is given twice"
            + (f" (and {len(dup) - 1} more)" if len(dup) > 1 else "")
            + "; each reclaim event may appear once (give synthetic entries different seeds or server "
            "ranges, and snapshot files different names)"
        )
    total = len(out)
    if suite.nontrivial_only:
        out = [(k, sn) for k, sn in out if not trivial(sn)]
        notes.append(
            f"{total - len(out)} of {total} reclaim events were trivial (at least n idle loaned "
            "servers) and left out"
        )
    out = [(k, sn) for k, sn in out if sn.n > 0]
    return out, notes


def _scenario_tag(sc: str) -> str:
    """A scenario's name in instance keys and the event cache (``SCENARIO-seedN.npz``): a shipped
    scenario's own name, else the YAML's stem with the hash of its configuration (the rule of
    ``aryl-gym train-reclaim``'s cache), so two files of one stem never share events."""
    if sc in list_scenarios():
        return sc
    return f"{Path(sc).stem}-{config_hash(load_scenario(sc))[:8]}"


def as_played(sn: Any, picks: Sequence[int]) -> list[int]:
    """The servers the simulator would return for ``picks`` on event ``sn``: the valid picks
    (loaned, first occurrence) completed, when short, with the simulator's default rule (fewest
    busy GPUs first), as its loan phase completes an invalid answer
    (:meth:`~aryl_gym.sim.engine.Simulator.loan_phase`)."""
    loaned = set(int(s) for s in sn.inst.loaned)
    out: list[int] = []
    for s in picks:
        s = int(s)
        if s in loaned and s not in out:
            out.append(s)
    if len(out) != sn.n:
        rest = [s for s in default_reclaim_instance(sn.inst, len(loaned)) if s not in out]
        out = (out + rest)[: sn.n]
    return out


# ------------------------------------------------------------------------------------------------
# entrants
# ------------------------------------------------------------------------------------------------
def random_reclaim(inst: Any, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` loaned servers uniformly at random."""
    return sorted(int(s) for s in rng.choice(sorted(inst.loaned), size=n, replace=False))


def _rule(name: str, seed: int) -> Callable[[int, Any], list[int]]:
    if name == "optimum":
        return lambda i, sn: milp_reclaim(sn.inst, sn.n)
    if name == "aryl":
        return lambda i, sn: aryl_reclaim(sn.inst, sn.n)
    if name == "default":
        return lambda i, sn: default_reclaim_instance(sn.inst, sn.n)
    if name == "random":
        return lambda i, sn: random_reclaim(sn.inst, sn.n, np.random.default_rng([seed, i]))
    raise ValueError(f"unknown reclaim rule {name!r}")


class _AgentPlayer:
    """Plays one instance through ``ArylReclaimEnv`` in snapshot mode with an SB3-style agent.

    A learned reclaim agent (a shipped name such as ``reclaim-v1`` or a weights ``.npz``,
    :mod:`aryl_gym.agents.reclaim_learned`) is loaded by its own loader; any other source by the
    episode runner's (:func:`~aryl_gym.episodes.load_agent`). An agent with a
    ``reclaim_env_kwargs`` mapping (e.g. ``{"observation": "v1"}``) acts through an env built
    with those options."""

    def __init__(self, source: str, snaps: Sequence[Any]):
        self.env = ArylReclaimEnv(snapshots=list(snaps))
        # numpy only: the learned reclaim agent needs no torch
        from aryl_gym.agents.reclaim_learned import is_reclaim_agent_source, load_reclaim_agent

        if is_reclaim_agent_source(source):
            try:
                self.agent = load_reclaim_agent(source)
            except ValueError as exc:
                raise AgentUnavailable(f"could not load reclaim agent {source!r}: {exc}") from None
        else:
            self.agent = load_agent(source, self.env)
        kw = getattr(self.agent, "reclaim_env_kwargs", None)
        if kw:
            try:
                self.env = ArylReclaimEnv(snapshots=list(snaps), **dict(kw))
            except (TypeError, ValueError) as exc:
                raise AgentUnavailable(f"agent {source!r} asks for env options {dict(kw)}: {exc}") from None

    def __call__(self, i: int, sn: Any) -> list[int]:
        env = self.env
        play(self.agent, env, options={"index": i}, max_steps=10 * env.n_inf + 10)
        return list(env.picks)


# ------------------------------------------------------------------------------------------------
# running and reporting
# ------------------------------------------------------------------------------------------------
@dataclass
class ReclaimOutputs:
    table: str
    markdown: Path
    json: Path
    csv: Path
    rows: list[dict[str, Any]]
    notes: list[str]
    wall_s: float
    #: what ``leaderboard.json`` holds (``gap`` infinite where the optimum preempts nothing
    #: and the entrant does: written as null)
    data: dict[str, Any] = field(default_factory=dict)


_INT_COLUMNS = ("servers", "n", "preemptions", "optimal_preemptions")
_FLOAT_COLUMNS = ("overlap", "ms")


def parse_reclaim_row(raw: Mapping[str, str]) -> dict[str, Any]:
    """A reclaim results row (strings) -> typed values; ValueError naming the bad field."""
    missing = [c for c in CSV_COLUMNS if raw.get(c) is None]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)}")
    out: dict[str, Any] = dict(raw)
    for c in ("suite", "instance", "entrant", "kind"):
        if not raw[c]:
            raise ValueError(f"{c}: empty")
    for c in _INT_COLUMNS:
        try:
            out[c] = int(raw[c])
        except ValueError:
            raise ValueError(f"{c}: expected a whole number, got {raw[c]!r}") from None
        if out[c] < 0:
            raise ValueError(f"{c}: {out[c]} is negative")
    for c in _FLOAT_COLUMNS:
        try:
            out[c] = float(raw[c])
        except ValueError:
            raise ValueError(f"{c}: expected a number, got {raw[c]!r}") from None
        if not math.isfinite(out[c]) or out[c] < 0:
            raise ValueError(f"{c}: {out[c]} is not a finite number >= 0")
    if out["overlap"] > 1:
        raise ValueError(f"overlap: {out['overlap']} is above 1")
    if out["preemptions"] < out["optimal_preemptions"] and not out["note"]:
        raise ValueError(f"preemptions: {out['preemptions']} is below the optimum's {out['optimal_preemptions']}")
    return out


#: the reclaim suite's results CSV, read and written by the leaderboard's machinery (digests,
#: scan of damaged / duplicated / edited rows, atomic rewrite)
RECLAIM_SCHEMA = register_schema(RowSchema(
    CSV_COLUMNS, parse_reclaim_row, lambda r: (str(r["instance"]), str(r["entrant"])),
    name="a reclaim suite (kind: reclaim)"))


def _resume_rows(csv_path: Path, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The trustworthy rows of an existing reclaim CSV; the others are reported with their
    lines, the file as it was is backed up, and their decisions are played again."""
    scan = scan_rows(csv_path, RECLAIM_SCHEMA)
    edited = set(scan.edited or [])
    rows = [r for r, ln in zip(scan.rows, scan.lines) if ln not in edited]
    if scan.problems:
        bak = unique_backup(csv_path)
        shutil.copy2(csv_path, bak)
        for line in scan.describe():
            say(f"{csv_path}: {line}")
        say(f"kept {len(rows)} good row(s); the rows above are left out (played again). The file "
            f"as it was is saved as {bak}")
        rewrite_rows(csv_path, rows, RECLAIM_SCHEMA)
    elif scan.edited is None and scan.rows:
        say(f"note: {csv_path} has no {digest_path(csv_path).name} (deleted, or written by a version before digests): "
            "hand edits cannot be detected")
    return rows


def run_reclaim_suite(
    suite: ReclaimSuite,
    out_dir: str | os.PathLike[str],
    extra_agents: Mapping[str, str] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    data_root: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> ReclaimOutputs:
    wall0 = time.perf_counter()
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    agents = dict(suite.agents)
    for k, v in (extra_agents or {}).items():  # checked before anything is moved
        if k in agents or k in suite.policies:
            raise ValueError(f"--agent {k}=...: the suite already has an entrant named {k!r}")
        agents[k] = v
    check_out_folder(out_dir, "leaderboard")  # before its lock file is made in a user's folder
    out = prepare_out_dir(out_dir)
    # the leaderboard's lock and folder discipline: one run per folder, backups that cannot
    # collide, rows with digests
    with DirLock(out):
        claim_folder(out, "leaderboard")
        return _run_locked(suite, out, agents, resume, overwrite, data_root, progress, say, wall0,
                           named=set(extra_agents or {}))


def _run_locked(suite: ReclaimSuite, out: Path, agents: dict[str, str], resume: bool, overwrite: bool,
                data_root: str | None, progress: bool, say: Callable[[str], None],
                wall0: float, named: set[str] | None = None) -> ReclaimOutputs:
    csv_path = out / "results.csv"
    has_rows = csv_path.exists() and csv_path.stat().st_size > 0
    if has_rows and not (resume or overwrite):
        raise ValueError(
            f"{csv_path} exists; pass --resume to keep its finished rows or --overwrite to start afresh"
        )
    instances, notes = build_instances(suite, out / "snapshots", data_root)
    if not instances:
        raise ValueError(f"suite {suite.name}: no reclaim instances to play")
    snaps = [sn for _, sn in instances]
    entrants: dict[str, tuple[str, Callable[[int, Any], list[int]]]] = {
        p: ("policy", _rule(p, suite.seed)) for p in suite.policies
    }
    if "optimum" not in entrants:
        entrants["optimum"] = ("policy", _rule("optimum", suite.seed))
    # the agents are loaded before the old rows are moved aside: one named with --agent that
    # cannot be loaded stops the run (was: skipped with a note, exit 0); the suite's own are
    # skipped with a note
    for name, src in agents.items():
        try:
            entrants[name] = ("agent", _AgentPlayer(src, snaps))
        except (AgentUnavailable, ImportError, FileNotFoundError) as exc:
            if name in (named or set()):
                why = " ".join(str(exc).split())
                raise ConfigError(f"--agent {name}={src}: cannot load this agent: {why}. Fix or replace "
                                  f"{src}, or leave this --agent out") from None
            notes.append(f"skipped agent {name} ({src}): {exc}")
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if has_rows and overwrite:
        move_aside(csv_path, say)
    opt_known: dict[int, tuple[list[int], float]] = {}  # the optimum of resumed instances, solved once
    if has_rows and not overwrite:
        kept = _resume_rows(csv_path, say)
        for r in kept:
            done[(r["instance"], r["entrant"])] = r
        # a row is kept only for the event it was played on (was: matched by key alone, so an edited
        # suite file -- another elastic share or count of a synthetic entry, another trace -- kept
        # the old events' rows beside the new events' optimum, and the table mixed them)
        with_rows = {k for k, _ in done}
        stale: set[str] = set()
        for i, (key, sn) in enumerate(instances):
            if key not in with_rows:
                continue
            tic = time.perf_counter()
            picks = milp_reclaim(sn.inst, sn.n)
            opt_known[i] = (picks, 1000 * (time.perf_counter() - tic))
            now = (sn.servers, sn.n, sn.source, reclaim_preemptions(sn.inst, picks))
            if any(r["instance"] == key and (int(r["servers"]), int(r["n"]), str(r["source"]),
                                             int(r["optimal_preemptions"])) != now for r in done.values()):
                stale.add(key)
        if stale:
            bak = unique_backup(csv_path)
            shutil.copy2(csv_path, bak)
            say(f"{csv_path}: the rows of {len(stale)} instance(s) were played on other events than this suite's "
                f"(e.g. {sorted(stale)[0]}; the suite file changed): played again. The file as it was is saved "
                f"as {bak}")
            done = {k: r for k, r in done.items() if k[0] not in stale}
            rewrite_rows(csv_path, [r for r in kept if r["instance"] not in stale], RECLAIM_SCHEMA)
            for i, (key, _) in enumerate(instances):
                if key in stale:
                    opt_known.pop(i, None)  # timed again with its new row
    app = CsvAppender(csv_path, RECLAIM_SCHEMA)
    try:
        opt_pick: dict[int, list[int]] = {}
        for i, (key, sn) in enumerate(instances):
            if progress and i % 25 == 0:
                print(f"  instance {i}/{len(instances)} ...", file=sys.stderr, flush=True)
            order = ["optimum"] + [e for e in entrants if e != "optimum"]
            opt_pre: int | None = None
            for name in order:
                kind, fn = entrants[name]
                prev = done.get((key, name))
                if prev is not None and name != "optimum":
                    continue
                if name == "optimum" and i in opt_known:
                    picks, ms = opt_known[i]
                else:
                    tic = time.perf_counter()
                    picks = fn(i, sn)
                    ms = 1000 * (time.perf_counter() - tic)
                note = ""
                if len(set(picks)) != sn.n or not set(picks) <= set(sn.inst.loaned):
                    # scored as the simulator plays it: completed with its default rule (was: the
                    # short choice itself, so an agent stuck on an invalid action returned fewer
                    # servers, preempted fewer jobs than the optimum and ranked first)
                    note = f"invalid choice ({len(picks)} picks for n={sn.n}; completed with the default rule)"
                    picks = as_played(sn, picks)
                pre = reclaim_preemptions(sn.inst, picks)
                if name == "optimum":
                    opt_pick[i], opt_pre = picks, pre
                    if prev is not None:
                        continue
                assert opt_pre is not None
                if pre < opt_pre:
                    raise RuntimeError(f"{name} beat the optimum on {key}: the MILP is wrong")
                row = {
                    "suite": suite.name,
                    "instance": key,
                    "source": sn.source,
                    "servers": sn.servers,
                    "n": sn.n,
                    "entrant": name,
                    "kind": kind,
                    "preemptions": pre,
                    "optimal_preemptions": opt_pre,
                    "overlap": overlap(picks, opt_pick[i]),
                    "ms": ms,
                    "note": note,
                }
                app.append(row)
                done[(key, name)] = row
    finally:
        app.close()
    keys = {k for k, _ in instances}
    rows = [r for (k, _), r in done.items() if k in keys and r["entrant"] in entrants]
    agg = aggregate(rows, list(entrants))
    agg["by_size"] = aggregate_by_size(rows, list(entrants))
    agg.update(
        {
            "suite": suite.name,
            "description": suite.description,
            "instances": len(instances),
            "servers_max": max(sn.servers for sn in snaps),
            "notes": notes,
        }
    )
    table = render(agg) + "\n\n" + render_by_size(agg)
    md = out / "leaderboard.md"
    atomic_write_text(
        md,
        f"# Reclaim leaderboard: {suite.name}\n\n{suite.description}\n\n"
        f"{len(instances)} reclaim instances (up to {agg['servers_max']} loaned servers); "
        "gap = total preemptions / optimum's - 1 (paired bootstrap 95% CI over instances).\n\n"
        + render(agg, markdown=True)
        + "\n"
        + render_by_size(agg, markdown=True)
        + "".join(f"\n* note: {n}" for n in notes)
        + "\n"
    )
    js = out / "leaderboard.json"
    # strict JSON (was: a gap of Infinity where the optimum preempts nothing and the entrant
    # does, which strict parsers refuse): a figure that is not finite is null
    atomic_write_text(js, strict_json(agg, indent=1))
    return ReclaimOutputs(table, md, js, csv_path, rows, notes, time.perf_counter() - wall0, agg)


def run_cli(args: Any) -> int:
    """``aryl-gym leaderboard --suite RECLAIM_SUITE`` (the leaderboard command's options)."""
    if args.backend != "local":
        raise ValueError("the reclaim suite runs locally; drop --backend ray")
    suite = load_reclaim_suite(args.suite)
    names = [n for n, _ in args.agent]
    if len(set(names)) != len(names):
        raise ValueError("--agent NAME=...: a name is given twice; names must be unique")
    out = Path(args.out) if args.out else Path("results") / suite.name
    res = run_reclaim_suite(
        suite,
        out,
        extra_agents=dict(args.agent),
        resume=args.resume,
        overwrite=args.overwrite,
        data_root=args.data_root,
        progress=not args.no_progress,
    )
    if getattr(args, "json", False):  # was: the text table on stdout with --json
        print(strict_json({
            "table": res.data,
            "decisions": len(res.rows),
            "instances": len({r["instance"] for r in res.rows}),
            "wall_s": res.wall_s,
            "files": {"csv": str(res.csv), "markdown": str(res.markdown), "json": str(res.json)},
            "notes": list(res.notes),
        }))
        return 0
    print(res.table)
    print()
    print(f"{len(res.rows)} decisions on {len({r['instance'] for r in res.rows})} instances in {res.wall_s:.1f} s")
    print(f"  table        {res.markdown}  (and {res.json.name})")
    print(f"  rows         {res.csv}")
    for n in res.notes:
        print(f"  note: {n}")
    return 0


def _gap_where_defined(pre: np.ndarray, opt: np.ndarray) -> np.ndarray:
    """Per resample (rows of ``(reps, instances)``), total preemptions over the optimum's minus
    one; resamples whose optimum preempts nothing are left out."""
    num, den = pre.sum(axis=1), opt.sum(axis=1)
    ok = den > 0
    return num[ok] / den[ok] - 1


def aggregate(rows: Sequence[Mapping[str, Any]], entrants: Sequence[str], boot: int = 1000) -> dict[str, Any]:
    """Per entrant: gap to the optimum (paired bootstrap CI), extra preemptions per instance
    (t interval), share optimal, overlap, ms per decision; sorted by gap."""
    by: dict[str, list[Mapping[str, Any]]] = {e: [] for e in entrants}
    for r in rows:
        by.setdefault(str(r["entrant"]), []).append(r)
    rng = np.random.default_rng(0)
    table = []
    for e, rs in by.items():
        if not rs:
            continue
        rs = sorted(rs, key=lambda r: str(r["instance"]))
        pre = np.array([float(r["preemptions"]) for r in rs])
        opt = np.array([float(r["optimal_preemptions"]) for r in rs])
        d = pre - opt
        N = len(rs)
        gap = pre.sum() / opt.sum() - 1 if opt.sum() > 0 else (0.0 if pre.sum() == 0 else math.inf)
        # one instance has no spread: no interval (was: a zero-width one, which looked certain)
        lo: float | None = gap if N > 1 else None
        hi: float | None = lo
        if N > 1 and opt.sum() > 0:
            g = bootstrap_replicates(_gap_where_defined, pre, opt, reps=boot, rng=rng)
            if len(g):
                lo, hi = percentile_interval(g)
        half = t_half_width(d) if N > 1 else None
        table.append(
            {
                "entrant": e,
                "kind": str(rs[0]["kind"]),
                "instances": N,
                "preemptions": int(pre.sum()),
                "optimal_preemptions": int(opt.sum()),
                "gap": float(gap),
                "gap_ci": [None if lo is None else float(lo), None if hi is None else float(hi)],
                "extra_per_instance": float(d.mean()),
                "extra_ci_half": half,
                "optimal_share": float(np.mean(d == 0)),
                "overlap": float(np.mean([float(r["overlap"]) for r in rs])),
                "ms_mean": float(np.mean([float(r["ms"]) for r in rs])),
                "invalid": sum(1 for r in rs if r.get("note")),
            }
        )
    table.sort(key=lambda t: (t["gap"], t["ms_mean"], t["entrant"]))
    for k, t in enumerate(table):
        t["rank"] = k + 1
    return {"entrants": table}


#: loaned-server counts where the size breakdown splits (paper section 7.3: below 60 and from 60)
SIZE_EDGES: tuple[int, ...] = (60,)


def size_bins(edges: Sequence[int] = SIZE_EDGES) -> list[tuple[str, int, float]]:
    """``(label, lowest, highest + 1)`` of the size bins: ``<60`` and ``>=60`` by default."""
    bounds = [0, *edges, math.inf]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        label = f"<{hi}" if lo == 0 else (f">={lo}" if hi == math.inf else f"{lo}-{int(hi) - 1}")
        out.append((label, int(lo), hi))
    return out


def aggregate_by_size(rows: Sequence[Mapping[str, Any]], entrants: Sequence[str],
                      edges: Sequence[int] = SIZE_EDGES, boot: int = 1000) -> dict[str, Any]:
    """:func:`aggregate` within each size bin (loaned servers of the instance): label ->
    ``{"instances": N, "entrants": [...]}``."""
    out: dict[str, Any] = {}
    for label, lo, hi in size_bins(edges):
        sub = [r for r in rows if lo <= int(r["servers"]) < hi]
        out[label] = {
            "instances": len({str(r["instance"]) for r in sub}),
            "entrants": aggregate(sub, entrants, boot)["entrants"],
        }
    return out


def render_by_size(agg: Mapping[str, Any], markdown: bool = False) -> str:
    """The gap of each entrant within each size bin (``agg["by_size"]``)."""
    head = ["loaned servers", "instances", "entrant", "preemptions", "optimum's", "gap vs optimum [95% CI]",
            "optimal on", "ms / decision"]
    rows = []
    for label, b in agg.get("by_size", {}).items():
        for t in b["entrants"]:
            if t["entrant"] == "optimum":
                continue
            gap = "-" if t["optimal_preemptions"] == 0 and t["preemptions"] == 0 else _gap_cell(t)
            rows.append([label, b["instances"], t["entrant"] + ("" if t["kind"] == "policy" else " (agent)"),
                         f"{t['preemptions']}", f"{t['optimal_preemptions']}", gap,
                         f"{100 * t['optimal_share']:.1f}%", f"{t['ms_mean']:.2f}"])
    if not markdown:
        return "by size:\n" + text_table(rows, head)
    lines = ["### By size", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _gap_cell(t: Mapping[str, Any]) -> str:
    """``+1.6% [+1.0, +2.2]``; ``[n/a: one instance]`` without an interval."""
    lo, hi = t["gap_ci"]
    ci = "n/a: one instance" if lo is None or hi is None else f"{100 * lo:+.1f}, {100 * hi:+.1f}"
    return f"{100 * t['gap']:+.1f}% [{ci}]"


def render(agg: Mapping[str, Any], markdown: bool = False) -> str:
    head = ["rank", "entrant", "preemptions", "gap vs optimum [95% CI]", "extra / instance",
            "optimal on", "overlap", "ms / decision"]
    rows = []
    for t in agg["entrants"]:
        half = t["extra_ci_half"]
        rows.append(
            [
                t["rank"],
                t["entrant"] + ("" if t["kind"] == "policy" else " (agent)"),
                f"{t['preemptions']}",
                _gap_cell(t),
                f"{t['extra_per_instance']:.3f}" + (" (n/a: one instance)" if half is None else f" ± {half:.3f}"),
                f"{100 * t['optimal_share']:.1f}%",
                f"{100 * t['overlap']:.1f}%",
                f"{t['ms_mean']:.2f}",
            ]
        )
    if not markdown:
        return text_table(rows, head)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


__all__ = [
    "SIZE_EDGES",
    "ReclaimSuite",
    "aggregate",
    "aggregate_by_size",
    "build_instances",
    "is_reclaim_suite",
    "load_reclaim_suite",
    "random_reclaim",
    "reclaim_suite_from_dict",
    "render_by_size",
    "run_reclaim_suite",
]
