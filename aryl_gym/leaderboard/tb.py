"""TensorBoard logs of a leaderboard: one run per entrant, the same tags for all (SPEC 7).

``tensorboard --logdir OUT/tensorboard`` then shows heuristics and learned agents side by side:

* run ``OUT/tensorboard/ENTRANT``;
* ``SCENARIO/seedN/<series>`` over simulated time (step = simulated minutes), from the
  simulator's per-round timeline (``Simulator.acc.timeline``): ``combined_usage`` (fraction of
  all GPUs busy: training pool + loaned + inference's own share), ``train_busy_gpus``,
  ``loan_busy_gpus``, ``loaned_servers``, ``queue_len``, ``running_jobs``,
  ``inference_util``;
* ``SCENARIO/final/<metric>`` with step = seed: every numeric metric of SPEC 5.

The event files are written in TensorBoard's record format with its own protos and
``RecordWriter`` (what ``torch.utils.tensorboard`` uses underneath), so no torch import is needed; TensorBoard is in the
``train`` extra. The logs are rebuilt from the saved series on every run (so resumed episodes
are included and nothing is duplicated).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aryl_gym.config import load_scenario
from aryl_gym.leaderboard.runner import METRIC_TYPES, TIMELINE_COLUMNS, Key, slug
from aryl_gym.leaderboard.suites import Suite

#: series tags written per seed, in order
TIMELINE_TAGS = (
    "combined_usage",
    "train_busy_gpus",
    "loan_busy_gpus",
    "loaned_servers",
    "queue_len",
    "running_jobs",
    "inference_util",
)
TB_DIR = "tensorboard"


def tensorboard_available() -> bool:
    try:
        from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: F401
    except ImportError:
        return False
    return True


class _Writer:
    """A minimal synchronous scalar writer: TensorBoard's record format and protos, no thread.

    (TensorBoard's ``EventFileWriter`` hands every event to a background thread through a
    queue; for the tens of thousands of small events of a leaderboard that hand-off costs more
    than the writing.)
    """

    def __init__(self, logdir: Path):
        import socket

        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._Event = Event
        self._Summary = Summary
        logdir.mkdir(parents=True, exist_ok=True)
        self._t = time.time()
        name = f"events.out.tfevents.{int(self._t):010d}.{socket.gethostname()}.{os.getpid()}.0"
        self._fh = open(logdir / name, "wb")  # noqa: SIM115 - closed in close()
        self._w = RecordWriter(self._fh)
        self._w.write(Event(wall_time=self._t, file_version="brain.Event:2").SerializeToString())

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        summ = self._Summary(
            value=[self._Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]
        )
        ev = self._Event(wall_time=self._t, step=int(step), summary=summ)
        self._w.write(ev.SerializeToString())

    def close(self) -> None:
        self._fh.flush()
        self._fh.close()


#: at most this many timeline points per episode go to TensorBoard (evenly spaced rows, first
#: and last kept). TensorBoard itself keeps 1,000 points per tag by default, and its pure-Python
#: CRC makes writing cost about a microsecond per byte, so production-length episodes are thinned.
MAX_POINTS = 5000


def timeline_scalars(
    series: Mapping[str, Any], total_gpus: int, inf_gpus: int, max_points: int = MAX_POINTS
) -> list[tuple[int, dict[str, float]]]:
    """(step in simulated minutes, {tag: value}) per timeline row; one row per minute (last wins)."""
    cols = list(series.get("timeline_columns") or TIMELINE_COLUMNS)
    idx = {c: cols.index(c) for c in TIMELINE_COLUMNS}
    by_step: dict[int, dict[str, float]] = {}
    rows = series.get("timeline") or []
    if len(rows) > max_points:
        keep = sorted({round(i * (len(rows) - 1) / (max_points - 1)) for i in range(max_points)})
        rows = [rows[i] for i in keep]
    for r in rows:
        tb, lb, inf_u = r[idx["train_busy_gpus"]], r[idx["loan_busy_gpus"]], r[idx["inference_util"]]
        by_step[int(r[idx["t"]] // 60.0)] = {
            "combined_usage": (tb + lb + inf_u * inf_gpus) / total_gpus if total_gpus else 0.0,
            "train_busy_gpus": tb,
            "loan_busy_gpus": lb,
            "loaned_servers": r[idx["loaned_servers"]],
            "queue_len": r[idx["queue_len"]],
            "running_jobs": r[idx["running"]],
            "inference_util": inf_u,
        }
    return sorted(by_step.items())


def write_tensorboard(
    out_dir: str | Path,
    suite: Suite,
    rows: Sequence[Mapping[str, Any]],
    series: Mapping[Key, Mapping[str, Any]],
) -> Path:
    """(Re)write ``OUT/tensorboard/ENTRANT`` event files for every finished row; return the dir."""
    if not tensorboard_available():
        raise ImportError(
            "TensorBoard logs need the tensorboard package: pip install 'aryl-gym[train]' "
            "(or pip install tensorboard), or pass --no-tensorboard"
        )
    root = Path(out_dir) / TB_DIR
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*/events.out.tfevents.*"):
        old.unlink()
    sizes = {}
    for scen in suite.scenarios:
        c = load_scenario(scen).cluster
        sizes[scen] = (c.train_gpus + c.inf_gpus, c.inf_gpus)
    for e in suite.entrants:
        mine = [r for r in rows if r["policy"] == e.name and r["scenario"] in sizes]
        if not mine:
            continue
        w = _Writer(root / slug(e.name))
        try:
            for r in sorted(mine, key=lambda r: (suite.scenarios.index(r["scenario"]), r["seed"])):
                scen, seed = str(r["scenario"]), int(r["seed"])
                prefix = f"{slug(scen)}/seed{seed}/"
                s = series.get((suite.name, scen, seed, e.name))
                if s:
                    total, inf = sizes[scen]
                    for step, vals in timeline_scalars(s, total, inf):
                        w.scalars(step, {prefix + k: v for k, v in vals.items()})
                final = {}
                for k, t in METRIC_TYPES.items():
                    v = r.get(k)
                    if t is bool or v is None:
                        continue
                    final[f"{slug(scen)}/final/{k}"] = float(v)
                w.scalars(seed, final)
        finally:
            w.close()
    return root
