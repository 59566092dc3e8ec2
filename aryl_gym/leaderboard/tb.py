"""TensorBoard logs of a leaderboard: one run per entrant, the same tags for all (SPEC 7).

``tensorboard --logdir OUT/tensorboard`` then shows heuristics and learned agents side by side:

* run ``OUT/tensorboard/ENTRANT``;
* ``SCENARIO/seedN/<series>`` over simulated time (step = simulated minutes), from the
  simulator's per-round timeline (``Simulator.acc.timeline``), every minute of the episode (no
  thinning): ``combined_usage`` (fraction of all GPUs busy: training pool + loaned + inference's
  own share), ``train_busy_gpus``, ``loan_busy_gpus``, ``loaned_servers``, ``queue_len``,
  ``running_jobs``, ``inference_util``;
* ``SCENARIO/final/<metric>`` with step = seed: every numeric metric of SPEC 5.

The event files are written by :class:`ScalarWriter`: tensorboardX's synchronous
``EventsWriter`` (its ``RecordWriter`` frames each record with a CRC-32C from the native
``crc32c`` package) and tensorboardX's protos; a 15-day production episode (about 150,000
scalars) is written in well under a second. Neither imports torch. The logs are rebuilt from the
saved series on every run (so resumed episodes are included and nothing is duplicated).
TensorBoard's viewer shows 1,000 sampled points per tag by default; ``tensorboard --logdir DIR
--samples_per_plugin scalars=0`` shows all of them.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aryl_gym.config import load_scenario
from aryl_gym.leaderboard.results import METRIC_TYPES, TIMELINE_COLUMNS, Key
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.provenance import slug

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
_INSTALL = "pip install 'aryl-gym[train]' (or pip install tensorboardX crc32c)"


def _tbx() -> Any:
    """``tensorboardX.event_file_writer`` (and its protos), imported without torch.

    ``import tensorboardX`` imports torch when it is installed, only to accept torch tensors in
    ``SummaryWriter``; the event-file writer and the protos do not need it. Unless torch is
    already loaded, ``torch`` is masked in ``sys.modules`` while tensorboardX is first imported,
    so the ``import torch`` inside it fails quietly (tensorboardX then treats numpy arrays as its
    tensors), and the mask is removed at once: a later ``import torch`` works as usual."""
    if "tensorboardX.event_file_writer" in sys.modules or "torch" in sys.modules:
        # tensorboardX: imported when writing event files
        import tensorboardX.event_file_writer as efw

        return efw
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        # tensorboardX: imported when writing event files
        import tensorboardX.event_file_writer as efw
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return efw


def tensorboard_available() -> bool:
    try:
        _tbx()
    except ImportError:
        return False
    return True


def native_crc() -> bool:
    """True when tensorboardX checksums with the native ``crc32c`` package (else pure Python,
    about a microsecond per byte)."""
    _tbx()
    # tensorboardX: imported when writing event files
    from tensorboardX import crc32c

    return getattr(crc32c, "_crc32c_native", None) is not None


_counter = itertools.count()


class ScalarWriter:
    """Scalars into one TensorBoard event file in ``logdir``, synchronously.

    ``add_scalars(step, {tag: value})`` writes one event holding several tags (how a timeline row
    is logged); ``add_scalar(tag, value, step)`` one. Writing goes through tensorboardX's
    ``EventsWriter`` (no thread, no queue: for many small events the hand-off of its
    ``SummaryWriter`` to a background process queue costs more than the writing). One ``Event``
    proto per tag set is kept and refilled for each step, which is about five times cheaper than
    building protos anew. Values are stored as float32 (TensorBoard's ``simple_value``).
    """

    def __init__(self, logdir: str | os.PathLike[str], wall_time: float | None = None):
        efw = _tbx()
        # tensorboardX: imported when writing event files
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        self._Event, self._Summary = Event, Summary
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        # the pid and a counter keep two writers of one process or one second apart
        suffix = f".{os.getpid()}.{next(_counter)}"
        self._w = efw.EventsWriter(str(self.logdir / "events"), filename_suffix=suffix)
        self.path = Path(getattr(self._w, "_file_name", self.logdir))
        self._wall = wall_time
        self._templates: dict[tuple[str, ...], tuple[Any, list[Any]]] = {}
        self.events = 0
        self.scalars = 0

    def _template(self, tags: tuple[str, ...]) -> tuple[Any, list[Any]]:
        t = self._templates.get(tags)
        if t is None:
            if len(self._templates) >= 256:
                self._templates.clear()
            ev = self._Event(summary=self._Summary(value=[self._Summary.Value(tag=k) for k in tags]))
            t = self._templates[tags] = (ev, list(ev.summary.value))
        return t

    def add_scalars(self, step: int, values: Mapping[str, float], wall_time: float | None = None) -> None:
        """One event at ``step`` with a scalar per tag."""
        ev, slots = self._template(tuple(values))
        ev.step = int(step)
        ev.wall_time = wall_time if wall_time is not None else (self._wall or time.time())
        for slot, v in zip(slots, values.values()):
            slot.simple_value = float(v)
        self._w.write_event(ev)
        self.events += 1
        self.scalars += len(slots)

    def add_scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        self.add_scalars(step, {tag: value}, wall_time)

    def flush(self) -> None:
        self._w.flush()

    def close(self) -> None:
        self._w.close()

    def __enter__(self) -> ScalarWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def timeline_scalars(
    series: Mapping[str, Any], total_gpus: int, inf_gpus: int
) -> list[tuple[int, dict[str, float]]]:
    """(step in simulated minutes, {tag: value}): every simulated minute that has a timeline row
    (the simulator logs a row per scheduling round; of several rows in one minute the last wins)."""
    cols = list(series.get("timeline_columns") or TIMELINE_COLUMNS)
    idx = {c: cols.index(c) for c in TIMELINE_COLUMNS}
    by_step: dict[int, dict[str, float]] = {}
    rows = series.get("timeline") or []
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


def remove_stale_logs(out_dir: str | Path) -> list[Path]:
    """Remove the event files :func:`write_tensorboard` writes (``OUT/tensorboard/*/events.out.
    tfevents.*``, nothing else) when a run writes none: logs of an earlier run would be read as
    this run's. Return the files removed."""
    root = Path(out_dir) / TB_DIR
    removed: list[Path] = []
    if root.is_dir():
        for old in sorted(root.glob("*/events.out.tfevents.*")):
            try:
                old.unlink()
            except FileNotFoundError:
                continue
            removed.append(old)
    return removed


def distinct_slugs(names: Sequence[str]) -> dict[str, str]:
    """A file-name-safe tag per name (:func:`aryl_gym.provenance.slug`), distinct: a name whose
    slug another name already is or took (``fifo_`` beside ``fifo``) gets ``-2``, ``-3``, ...
    Was: both wrote into one TensorBoard run (or one tag), which showed their values as one
    entrant's; names that are their own slug keep it."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for n in sorted(names, key=lambda n: slug(n) != n):  # stable: own-slug names first
        base = s = slug(n)
        i = 2
        while s in taken:
            s = f"{base}-{i}"
            i += 1
        taken.add(s)
        out[n] = s
    return out


def write_tensorboard(
    out_dir: str | Path,
    suite: Suite,
    rows: Sequence[Mapping[str, Any]],
    series: Mapping[Key, Mapping[str, Any]],
) -> Path:
    """(Re)write ``OUT/tensorboard/ENTRANT`` event files for every finished row; return the dir."""
    if not tensorboard_available():
        raise ImportError(f"TensorBoard logs need tensorboardX: {_INSTALL}, or pass --no-tensorboard")
    root = Path(out_dir) / TB_DIR
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*/events.out.tfevents.*"):
        old.unlink()
    sizes = {}
    for scen in suite.scenarios:
        c = load_scenario(scen).cluster
        sizes[scen] = (c.train_gpus + c.inf_gpus, c.inf_gpus)
    runs = distinct_slugs([e.name for e in suite.entrants])
    tags = distinct_slugs(list(suite.scenarios))
    for e in suite.entrants:
        mine = [r for r in rows if r["policy"] == e.name and r["scenario"] in sizes]
        if not mine:
            continue
        w = ScalarWriter(root / runs[e.name], wall_time=time.time())
        try:
            for r in sorted(mine, key=lambda r: (suite.scenarios.index(r["scenario"]), r["seed"])):
                scen, seed = str(r["scenario"]), int(r["seed"])
                prefix = f"{tags[scen]}/seed{seed}/"
                s = series.get((suite.name, scen, seed, e.name))
                if s:
                    total, inf = sizes[scen]
                    for step, vals in timeline_scalars(s, total, inf):
                        w.add_scalars(step, {prefix + k: v for k, v in vals.items()})
                final = {}
                for k, t in METRIC_TYPES.items():
                    v = r.get(k)
                    if t is bool or v is None:
                        continue
                    try:
                        x = float(v)
                    except (TypeError, ValueError):
                        continue
                    # a NaN or infinite figure is no value, as in the report's tables (was:
                    # logged as NaN or inf, which TensorBoard plotted; the RLlib writer drops them)
                    if math.isfinite(x):
                        final[f"{tags[scen]}/final/{k}"] = x
                if final:  # was: an empty event when no figure had a value
                    w.add_scalars(seed, final)
        finally:
            w.close()
    return root


def bench_writer(n_scalars: int = 100_000, reference: bool = True) -> list[dict[str, Any]]:
    """Write ``n_scalars`` scalars in two layouts and time them (``aryl-gym bench``).

    Layouts: timeline rows (events of the 7 :data:`TIMELINE_TAGS`, as the leaderboard writes
    them) and one scalar per event (``add_scalar``). With ``reference`` also TensorBoard's own
    ``RecordWriter`` (pure-Python CRC) on the timeline layout, for comparison. Target: 100,000
    scalars in <= 2 s. CPU seconds are this process's, which a busy machine does not inflate."""

    rows: list[dict[str, Any]] = []
    tags = [f"scenario/seed0/{k}" for k in TIMELINE_TAGS]
    n_rows = n_scalars // len(tags)

    def timed(label: str, fn: Any) -> None:
        with tempfile.TemporaryDirectory() as d:
            tic, cpu = time.perf_counter(), time.process_time()
            events, scalars = fn(Path(d))
            wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
            size = sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())
        rows.append({
            "writer": label,
            "scalars": scalars,
            "events": events,
            "wall s": wall,
            "cpu s": cpu,
            "scalars / cpu s": scalars / cpu if cpu > 0 else float("inf"),
            "MB": size / 1e6,
        })

    def timeline(d: Path) -> tuple[int, int]:
        with ScalarWriter(d, wall_time=0.0) as w:
            for i in range(n_rows):
                w.add_scalars(i, dict(zip(tags, (i * 0.5, i, i, i % 7, i % 11, i % 13, 0.5))))
        return w.events, w.scalars

    def single(d: Path) -> tuple[int, int]:
        with ScalarWriter(d, wall_time=0.0) as w:
            for i in range(n_scalars):
                w.add_scalar("scenario/final/x", i * 0.5, i)
        return w.events, w.scalars

    crc = "native crc32c" if native_crc() else "pure-Python CRC (pip install crc32c)"
    timed(f"ScalarWriter (tensorboardX, {crc}): 7-tag timeline rows", timeline)
    timed(f"ScalarWriter (tensorboardX, {crc}): one scalar per event", single)
    if reference:
        try:
            # an optional dependency: its absence is handled here
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary
            from tensorboard.summary.writer.record_writer import RecordWriter
        except ImportError:
            return rows

        def tb_reference(d: Path) -> tuple[int, int]:
            with open(d / "events.out.tfevents.0.ref", "wb") as fh:
                rw = RecordWriter(fh)
                for i in range(n_rows):
                    vals = (i * 0.5, i, i, i % 7, i % 11, i % 13, 0.5)
                    summ = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in zip(tags, vals)])
                    rw.write(Event(wall_time=0.0, step=i, summary=summ).SerializeToString())
            return n_rows, n_rows * len(tags)

        timed("tensorboard RecordWriter (pure-Python CRC): 7-tag timeline rows", tb_reference)
    return rows
