"""Provenance of an episode (a leaderboard row, a cached episode of ``aryl-gym reproduce``): the
commit, the hash of the resolved scenario (and agent set-up), the env version, and
file-name-safe slugs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aryl_gym.agents.learned import find_zoo_experiment, resolve_agent_path, resolve_zoo_folder
from aryl_gym.config import ScenarioConfig

_IMPORT_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def source_kind(source: str) -> str:
    """``"path"`` (an SB3 model file), ``"import"`` (``module:factory``) or ``"name"`` (shipped)."""
    if os.path.exists(source):
        return "path"
    if _IMPORT_RE.match(source):
        return "import"
    if source.endswith(".zip") or os.sep in source or source.startswith("."):
        return "path"
    return "name"


_COMMIT: str | None = None


def git_commit(repo: Path | None = None, dirty: bool = False) -> str:
    """``git rev-parse HEAD`` of the checkout holding this package (or of ``repo``), or
    ``'unknown'``. With ``dirty``, ``-dirty`` is appended when tracked files have changes (a
    training run records that; leaderboard rows and reports record the commit alone, cached)."""
    global _COMMIT
    root = repo or Path(__file__).resolve().parents[1]
    if repo is None and not dirty and _COMMIT is not None:
        return _COMMIT
    commit = "unknown"
    if repo is None and not (root / ".git").exists():  # an installed package: no checkout of ours
        return commit
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=False)
        if out.returncode == 0 and out.stdout.strip():
            commit = out.stdout.strip()
            if dirty:
                st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=10, check=False)
                commit += "-dirty" if st.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        pass
    if repo is None and not dirty:
        _COMMIT = commit
    return commit


def scenario_fingerprint(cfg: ScenarioConfig) -> dict[str, Any]:
    """Everything of a resolved scenario that changes an episode (not its description)."""
    d = cfg.to_dict()
    d.pop("description", None)
    d["gpu_types"] = {
        k: {"memory_gb": g.memory_gb, "default_speed": g.default_speed, "speed": dict(g.speed)}
        for k, g in sorted(cfg.gpu_types.items())
    }
    return d


_FILE_SHA: dict[tuple[str, int, int], str] = {}


def _file_sha(path: Path) -> str:
    """SHA-256 of a file's bytes (cached by path, mtime and size)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _FILE_SHA:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _FILE_SHA[key] = h.hexdigest()
    return _FILE_SHA[key]


def agent_files_digest(source: str) -> dict[str, str]:
    """SHA-256 of the files a saved agent is loaded from (model, config, normalisation), by
    role; empty for a ``module:factory`` agent or a source that does not resolve (loading it
    fails later with its own error). A row made with other weights under the same name is then
    another configuration, never reused as this one."""
    if source_kind(source) == "import":
        return {}
    try:
        zoo = find_zoo_experiment(source) if Path(source).is_dir() else None
        if zoo is not None:  # an rl-baselines3-zoo folder: its model and normalisation
            model, _, vn = resolve_zoo_folder(zoo)
            files: tuple[Path | None, ...] = (model, None, vn)
        else:
            files = resolve_agent_path(source)
    except Exception:  # unknown name, missing file: reported when the agent is loaded
        return {}
    return {role: _file_sha(p) for role, p in zip(("model", "config", "vecnormalize"), files)
            if p is not None and p.is_file()}


def config_hash(
    cfg: ScenarioConfig,
    agent: str | None = None,
    env_id: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """16 hex digits of SHA-256 over the resolved scenario (and, for a learned ``agent`` given by
    its source, the env set-up -- ``env_id`` ``None``: the agent's own env -- and the bytes of the
    agent's model, config and normalisation files)."""
    # A set in the scenario (trace_options={"vc": {"6214e9", "103959"}}, YAML !!set) was written
    # by json's default=str in string-hash order, which PYTHONHASHSEED randomises per process: the
    # scenario got another hash in every process, so its cached episodes were never found again.
    # The env kwargs keep default=str: a leaderboard row stores them as that very text
    # (leaderboard/results.py) and its check rehashes the text, so sorting them here alone would
    # fail rows that hold a set; both sides have to change together.
    payload: dict[str, Any] = {"scenario": _sets_sorted(scenario_fingerprint(cfg))}
    if agent is not None:
        payload.update(env_id=env_id, env_kwargs=dict(env_kwargs or {}), source=agent,
                       files=agent_files_digest(agent))
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _sets_sorted(o: Any) -> Any:
    """``o`` with every set inside it (dict values, list and tuple items) replaced by
    :func:`_stable_str` of it: the text ``json.dumps(default=str)`` writes, in sorted order."""
    if isinstance(o, dict):
        return {k: _sets_sorted(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_sets_sorted(v) for v in o]
    if isinstance(o, (set, frozenset)):
        return _stable_str(o)
    return o


def _stable_str(o: Any) -> str:
    """``str(o)`` with a set's elements in sorted order (``str`` of a set follows string hashing,
    randomised per process). Elements that compare (numbers, strings) sort by value, others by
    their text, so the text is ``str(o)`` whenever the set's own order is already sorted (any set
    of one element; a set of small non-negative ints, which iterates by value): the hashes that
    were reproducible stay as they were."""
    if isinstance(o, (set, frozenset)):
        def text(x: Any) -> str:
            return _stable_str(x) if isinstance(x, frozenset) else repr(x)

        try:  # a total order on the values (not for sets inside: subsets are a partial order)
            if any(isinstance(x, (set, frozenset)) for x in o):
                raise TypeError
            elems = sorted(o)
        except TypeError:
            elems = sorted(o, key=text)
        items = ", ".join(text(x) for x in elems)
        if isinstance(o, frozenset):
            return f"frozenset({{{items}}})" if items else "frozenset()"
        return f"{{{items}}}" if items else "set()"
    return str(o)


def env_version(env_id: str) -> str:
    m = re.search(r"-(v\d+)$", env_id)
    return m.group(1) if m else ""


def slug(text: str) -> str:
    """A file-name-safe form of a scenario name or path."""
    s = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_.")
    return s or "x"
