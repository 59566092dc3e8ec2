"""Reclaim instances taken from real episodes, and synthetic ones, saved as ``.npz``.

A :class:`Snapshot` is the cluster state at one reclaim event -- the loaned servers, the workers
of every job on them, each job's size, ``w_min``, elasticity, GPUs per worker and predicted
remaining time -- plus ``n``, the number of servers inference takes back at that event. It is
exactly what a reclaim rule sees (:class:`~aryl_gym.agents.reclaim.ReclaimInstance`), so every
rule (Aryl's heuristic, the default, the exact optimum, a learned policy) can be replayed on it
offline.

* :func:`record_snapshots` runs episodes of a scenario under a loaning policy (Aryl by default)
  and snapshots the state *before* each reclaim, then lets the policy reclaim as usual (the
  episode is unchanged: the recorder only reads).
* :func:`synthetic_snapshots` draws random states
  (:func:`~aryl_gym.agents.reclaim.random_instance`) of a given range of loaned-server counts.
* :func:`save_snapshots` / :func:`load_snapshots` write and read a flat ``.npz`` (no pickle).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.agents.reclaim import ReclaimInstance, instance_from_view, random_instance
from aryl_gym.fileio import atomic_write_bytes
from aryl_gym.scenario import make_episode

FORMAT_VERSION = 1


@dataclass
class Snapshot:
    """One reclaim event: the instance, how many servers go back, and where it came from.

    Attributes:
        inst: the state a reclaim rule sees (``ReclaimInstance``).
        n: servers to return.
        source: ``"SCENARIO/seedN"`` for a recorded event, ``"synthetic/seedN"`` otherwise.
        time: simulated time of the event (s); 0 for synthetic ones.
        cap: GPUs per loaned server (same order as ``sorted(inst.loaned)``).
    """

    inst: Any  # aryl_gym.agents.reclaim.ReclaimInstance (agents import lazily)
    n: int
    source: str = ""
    time: float = 0.0
    cap: tuple[int, ...] = ()

    @property
    def servers(self) -> int:
        return len(self.inst.loaned)


class _Recorder:
    """Wraps a policy: snapshots the view before each reclaim, then delegates to the policy."""

    def __init__(self, policy: Any, source: str, out: list[Snapshot]):
        self._inner = policy
        self._source = source
        self._out = out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def reclaim(self, view: Any, n: int) -> Sequence[int] | None:
        inst = instance_from_view(view)
        cap = tuple(int(view.srv_cap[s]) for s in sorted(inst.loaned))
        self._out.append(Snapshot(inst, int(n), self._source, float(view.now), cap))
        rule = getattr(self._inner, "reclaim", None)
        return rule(view, n) if rule is not None else None


def record_snapshots(
    scenario: str,
    seeds: Iterable[int],
    policy: str = "aryl",
    data_root: str | None = None,
) -> list[Snapshot]:
    """Run one episode per seed of ``scenario`` under ``policy`` and snapshot every reclaim."""

    out: list[Snapshot] = []
    name = Path(scenario).stem if str(scenario).endswith((".yaml", ".yml")) else str(scenario)
    for seed in seeds:
        pol = make_policy(policy)
        if not pol.uses_loaning:
            raise ValueError(f"policy {policy!r} does not use loaning, so nothing is ever reclaimed")
        sim = make_episode(scenario, int(seed), data_root=data_root).simulator()
        sim.run(_Recorder(pol, f"{name}/seed{seed}", out))  # type: ignore[arg-type]
    return out


def synthetic_snapshots(
    count: int,
    min_servers: int,
    max_servers: int,
    seed: int = 0,
    elastic_p: float = 0.5,
) -> list[Snapshot]:
    """``count`` random states of ``min_servers``..``max_servers`` loaned servers (uniform), each
    with a uniform ``n`` in ``1..L-1``."""

    if count < 0:
        raise ValueError(f"synthetic instance count must be >= 0, got {count}")
    if not 2 <= min_servers <= max_servers:
        # was: "got -4-200", naming neither option
        raise ValueError(f"min_servers, max_servers (--min-servers, --max-servers): need 2 <= min <= max, got min {min_servers}, "
                         f"max {max_servers}")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        L = int(rng.integers(min_servers, max_servers + 1))
        inst = random_instance(rng, L, elastic_p=elastic_p)
        n = int(rng.integers(1, L))
        out.append(Snapshot(inst, n, f"synthetic/seed{seed}", 0.0, (8,) * L))
    return out


# ------------------------------------------------------------------------------------------------
# .npz
# ------------------------------------------------------------------------------------------------
def save_snapshots(path: str | os.PathLike[str], snaps: Sequence[Snapshot]) -> Path:
    """Write ``snaps`` to ``path`` (``.npz``, flat arrays with offsets; loads without pickle)."""
    srv_off, job_off, ent_off = [0], [0], [0]
    srv_id: list[int] = []
    srv_cap: list[int] = []
    ent: list[tuple[int, int, int, int]] = []  # (server, job, workers, flexible)
    jobs: list[tuple[int, int, int, int, int, float]] = []
    for sn in snaps:
        inst = sn.inst
        servers = sorted(inst.loaned)
        caps = list(sn.cap) if len(sn.cap) == len(servers) else [8] * len(servers)
        srv_id.extend(servers)
        srv_cap.extend(caps)
        for s in servers:
            fl = inst.srv_flex.get(s, {})
            for j, k in sorted(inst.srv_jobs.get(s, {}).items()):
                ent.append((s, j, k, fl.get(j, 0)))
        for j in inst.jobs():
            jobs.append(
                (
                    j,
                    inst.workers[j],
                    inst.w_min[j],
                    int(inst.elastic.get(j, False)),
                    inst.g.get(j, 1),
                    inst.time_one.get(j, 0.0),
                )
            )
        srv_off.append(len(srv_id))
        ent_off.append(len(ent))
        job_off.append(len(jobs))
    e = np.array(ent, dtype=np.int64).reshape(-1, 4)
    jb = np.array([r[:5] for r in jobs], dtype=np.int64).reshape(-1, 5)
    path = Path(path)
    if path.parent != Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    # was: written in place (open(path, "wb")): a run killed mid-write, or two runs saving the same
    # file, left a truncated .npz, and --overwrite destroyed the old file first
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        version=np.array(FORMAT_VERSION),
        n=np.array([s.n for s in snaps], dtype=np.int64),
        time=np.array([s.time for s in snaps], dtype=np.float64),
        source=np.array([s.source for s in snaps], dtype=np.str_),
        srv_off=np.array(srv_off, dtype=np.int64),
        srv_id=np.array(srv_id, dtype=np.int64),
        srv_cap=np.array(srv_cap, dtype=np.int64),
        ent_off=np.array(ent_off, dtype=np.int64),
        ent=e,
        job_off=np.array(job_off, dtype=np.int64),
        job=jb,
        job_time_one=np.array([r[5] for r in jobs], dtype=np.float64),
    )
    atomic_write_bytes(path, buf.getvalue())
    return path


def load_snapshots(path: str | os.PathLike[str]) -> list[Snapshot]:
    """Read a file written by :func:`save_snapshots`.

    Raises:
        ValueError: naming the file when it is missing, not a snapshot file, or inconsistent.
    """

    p = Path(path)
    if p.is_dir():  # was: "does not exist" for a folder
        raise ValueError(f"snapshot file {p} is a folder; give a .npz file written by --save-snapshots")
    if not p.is_file():
        raise ValueError(f"snapshot file {p} does not exist; write one with --save-snapshots")
    try:
        z = np.load(p, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same clear message
        # numpy's own words for a file that is no .npz at all advise allow_pickle (was: shown as is)
        why = "not a .npz archive" if "allow_pickle" in str(exc) else str(exc)
        raise ValueError(f"{p}: not a reclaim snapshot file (.npz written by --save-snapshots): {why}") from None
    need = (
        "version n time source srv_off srv_id srv_cap ent_off ent job_off job job_time_one"
    ).split()
    with z:
        missing = [k for k in need if k not in z.files]
        if missing:
            raise ValueError(f"{p}: not a reclaim snapshot file (missing {', '.join(missing)})")
        if int(z["version"]) != FORMAT_VERSION:
            raise ValueError(f"{p}: snapshot format {int(z['version'])}, expected {FORMAT_VERSION}")
        d = {k: z[k] for k in need}
    out: list[Snapshot] = []
    try:
        for i in range(len(d["n"])):
            a, b = int(d["srv_off"][i]), int(d["srv_off"][i + 1])
            servers = [int(s) for s in d["srv_id"][a:b]]
            caps = tuple(int(c) for c in d["srv_cap"][a:b])
            inst = ReclaimInstance(
                loaned=servers,
                srv_jobs={s: {} for s in servers},
                srv_flex={s: {} for s in servers},
            )
            a, b = int(d["ent_off"][i]), int(d["ent_off"][i + 1])
            for s, j, k, f in d["ent"][a:b].tolist():
                inst.srv_jobs[s][j] = k
                if f:
                    inst.srv_flex[s][j] = f
            a, b = int(d["job_off"][i]), int(d["job_off"][i + 1])
            for (j, w, wm, el, g), t1 in zip(d["job"][a:b].tolist(), d["job_time_one"][a:b].tolist()):
                inst.workers[j] = w
                inst.w_min[j] = wm
                inst.elastic[j] = bool(el)
                inst.g[j] = g
                inst.time_one[j] = float(t1)
            inst.validate()
            n = int(d["n"][i])
            if not 0 <= n <= len(servers):
                raise ValueError(f"snapshot {i}: n={n} with {len(servers)} loaned servers")
            out.append(Snapshot(inst, n, str(d["source"][i]), float(d["time"][i]), caps))
    except (IndexError, KeyError, ValueError) as exc:
        raise ValueError(f"{p}: inconsistent snapshot file: {exc}") from None
    return out


__all__ = [
    "Snapshot",
    "load_snapshots",
    "record_snapshots",
    "save_snapshots",
    "synthetic_snapshots",
]
