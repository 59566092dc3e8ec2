"""Validation by replay (CompilerGym's leaderboard rule): ``--validate results.csv``.

A row records its scenario, seed, entrant (policy name, or agent source), env id and kwargs and
the hash of the resolved configuration. Validation draws a seeded sample of rows, checks the
configuration hash against today's scenario files, replays each episode with
:func:`~aryl_gym.episodes.run_episode` and compares every metric except the
wall-clock ones (:data:`~aryl_gym.leaderboard.runner.WALL_METRICS`): integers and booleans
exactly, floats to a relative tolerance of ``rtol`` (1e-9 by default; the simulator is
deterministic, so a replay matches bit for bit unless the code or the row changed).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.episodes import EpisodeTask, run_episode
from aryl_gym.leaderboard.results import METRIC_TYPES, WALL_METRICS, make_row, scan_rows
from aryl_gym.provenance import config_hash, git_commit


@dataclass
class RowCheck:
    """The verdict on one replayed row."""

    key: tuple[str, str, int, str]
    status: str  # "ok" | "mismatch" | "config-changed" | "skipped" | "failed"
    diffs: list[tuple[str, Any, Any]] = field(default_factory=list)  # (metric, recorded, replayed)
    message: str = ""


#: with no explicit sample, suites up to this many rows are replayed whole
FULL_REPLAY_ROWS = 100


@dataclass
class ValidationReport:
    path: Path
    rows_total: int
    checks: list[RowCheck]
    file_problems: list[str] = field(default_factory=list)  # damaged/duplicated/edited lines

    @property
    def ok(self) -> bool:
        return not self.file_problems and all(c.status in ("ok", "skipped") for c in self.checks)

    def render(self) -> str:
        lines = [f"validated {len(self.checks)} of {self.rows_total} rows of {self.path}"]
        for prob in self.file_problems:
            lines.append(f"  FILE            {prob}")
        for c in self.checks:
            _suite, scen, seed, pol = c.key
            head = f"  {c.status.upper():15s} {pol} on {scen} seed {seed}"
            if c.message:
                head += f": {c.message}"
            lines.append(head)
            for k, a, b in c.diffs[:8]:
                lines.append(f"      {k}: recorded {a!r}, replayed {b!r}")
            if len(c.diffs) > 8:
                lines.append(f"      ... and {len(c.diffs) - 8} more")
        bad = sum(c.status not in ("ok", "skipped") for c in self.checks)
        if self.ok:
            lines.append("all replayed rows match" if len(self.checks) == self.rows_total
                         else "all sampled rows match")
        else:
            lines.append(f"{bad} row(s) do NOT match" + (
                f"; the file has {len(self.file_problems)} kind(s) of damaged rows" if self.file_problems else ""))
        return "\n".join(lines)


def same(a: Any, b: Any, t: type, rtol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if t is float:
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)
    return a == b


def _requested_kwargs(row: Mapping[str, Any], used: dict[str, Any], cfg: Any, agent: str) -> dict[str, Any]:
    """The env kwargs the suite asked for when ``row`` was made.

    A row records the kwargs of the env the agent actually used: the suite's kwargs on top of the
    model's own (``action_mode``, ``reward_scale`` ...). The config hash covers only what the suite
    asked for, a subset of those; the subset whose hash is the recorded one is it. (With no match,
    the full set is returned and the hash check reports the change.)
    """

    env_id = str(row["env_id"])
    recorded = str(row.get("config_hash") or "")
    keys = sorted(used)
    if len(keys) <= 12:
        for r in range(len(keys) + 1):
            for sub in itertools.combinations(keys, r):
                kw = {k: used[k] for k in sub}
                if config_hash(cfg, agent, env_id, kw) == recorded:
                    return kw
    return used


def task_from_row(row: Mapping[str, Any], data_root: str | None = None) -> EpisodeTask:
    """The :class:`EpisodeTask` that produced ``row`` (config hash recomputed from today's files)."""
    kind = str(row["kind"])
    if kind not in ("policy", "agent"):
        raise ValueError(f"row kind must be policy or agent, got {kind!r}")
    try:
        env_kwargs = json.loads(row["env_kwargs"]) if row.get("env_kwargs") else {}
    except ValueError:
        raise ValueError(f"env_kwargs is not JSON: {str(row['env_kwargs'])[:60]!r}") from None
    if not isinstance(env_kwargs, dict):
        raise ValueError(f"env_kwargs must be a JSON object, got {str(row['env_kwargs'])[:60]!r}")
    agent = str(row.get("source") or "") if kind == "agent" else None
    cfg = load_scenario(str(row["scenario"]))
    if agent is not None:
        env_kwargs = _requested_kwargs(row, env_kwargs, cfg, agent)
    return EpisodeTask(
        str(row["scenario"]), str(row["policy"]), int(row["seed"]), agent=agent,
        env_id=str(row["env_id"]), env_kwargs=env_kwargs,
        data_root=data_root, config_hash=config_hash(cfg, agent, str(row["env_id"]), env_kwargs),
        suite=str(row["suite"]), commit=git_commit(),
    )


def validate_csv(
    path: str | Path,
    sample: int | None = None,
    seed: int = 0,
    rtol: float = 1e-9,
    data_root: str | None = None,
    progress: Callable[[RowCheck], None] | None = None,
) -> ValidationReport:
    """Replay rows of a results CSV and compare.

    ``sample=None`` (default) replays every row of a file of up to :data:`FULL_REPLAY_ROWS` rows,
    and a sample of that many rows of a larger one; ``sample=0`` replays all rows; ``sample=n``
    draws ``n`` rows with ``random.Random(seed)``. Damaged, duplicated, conflicting and edited
    lines (:func:`~aryl_gym.leaderboard.runner.scan_rows`) fail the validation too.
    """
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 0):
        raise ValueError(f"--validate-sample must be an integer >= 0 (0 = every row), got {sample!r}")
    p = Path(path)
    if p.is_dir() and (p / "results.csv").is_file():
        p = p / "results.csv"
    if not p.exists():
        raise ConfigError(f"{p}: file not found (give the results.csv of a leaderboard run)")
    scan = scan_rows(p)
    rows = scan.rows
    bad = scan.problems
    if not rows:
        raise ConfigError(f"{p}: no complete rows to validate" + (f" ({bad} malformed)" if bad else ""))
    if sample is None:
        sample = 0 if len(rows) <= FULL_REPLAY_ROWS else FULL_REPLAY_ROWS
    picked = list(range(len(rows)))
    if 0 < sample < len(rows):
        picked = sorted(random.Random(seed).sample(picked, sample))
    checks: list[RowCheck] = []
    for i in picked:
        if checks and progress is not None:
            progress(checks[-1])
        row = rows[i]
        key = (str(row["suite"]), str(row["scenario"]), int(row["seed"]), str(row["policy"]))
        try:
            task = task_from_row(row, data_root)
        except (ConfigError, ValueError) as exc:
            checks.append(RowCheck(key, "failed", message=f"cannot rebuild the episode: {exc}"))
            continue
        if task.config_hash != row["config_hash"]:
            checks.append(
                RowCheck(
                    key,
                    "config-changed",
                    message=f"config hash {row['config_hash']} recorded, {task.config_hash} now "
                    "(the scenario or env settings changed since the row was made)",
                )
            )
            continue
        out = run_episode(task)
        if out.status != "ok" or out.result is None:
            checks.append(RowCheck(key, out.status, message=out.message.splitlines()[0] if out.message else ""))
            continue
        new = make_row(out)
        diffs = [
            (k, row[k], new[k])
            for k, t in METRIC_TYPES.items()
            if k not in WALL_METRICS and not same(row[k], new[k], t, rtol)
        ]
        msg = ""
        if diffs and row["commit"] != task.commit:
            msg = f"row made at commit {str(row['commit'])[:12]}, replayed at {task.commit[:12]}"
        checks.append(RowCheck(key, "mismatch" if diffs else "ok", diffs, msg))
    if checks and progress is not None:
        progress(checks[-1])
    return ValidationReport(p, len(rows), checks, scan.describe())
