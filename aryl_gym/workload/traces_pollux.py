"""Pollux per-application profiles and the run time of a job at a fixed configuration.

Pollux (Qiao et al., OSDI '21) ships, for each of its six applications, measured throughput
(``placements.csv``, ``scalability.csv``: seconds per step at a placement and per-GPU batch) and
statistical-efficiency profiles (``validation-<B>.csv``: per-epoch progress, gradient norm and
noise at global batch ``B``). In Pollux's simulator a job runs until its model has made
``progress(max_epochs)`` scale-invariant iterations; each step of global batch ``M`` adds the
*gain* ``(var + sqr) / (var / (M / M0) + sqr)`` of progress (``M0`` = the smallest validated batch),
and takes ``step_time + accum_steps * (step_time - sync_time)`` seconds.

:meth:`PolluxApplication.run_time` integrates that, epoch by epoch, for a job that keeps a
fixed number of replicas and global batch size (Pollux's "TunedJobs" baseline configuration,
which is what the workload files list). This follows upstream ``simulator/applications.py`` and
``simulator/simulator.py`` (``Job.update_local_bsz``, ``Job.step``) of petuum/adaptdl
``osdi21-artifact``, re-implemented here with numpy only:

* the placement packs replicas onto nodes of ``gpus_per_node`` (4: g4dn.12xlarge) GPUs;
* per-GPU batch ``ceil(M / r)``, split into ``accum_steps + 1`` micro-batches when it exceeds
  the app's largest local batch; one replica with ``M`` above the base batch always accumulates
  once (as upstream);
* step time: linear interpolation over ``local_bsz`` in ``placements.csv`` when the (rotation-
  normalised) placement was measured, else over ``local_bsz`` among the rows with the same
  ``(num_nodes, num_replicas)`` in ``scalability.csv`` (upstream uses a 3-D linear interpolator;
  on those measured groups it agrees to interpolation error). Other shapes are an error;
* gradient statistics are interpolated linearly between the validated batch sizes (upstream);
* upstream rounds each epoch's time to whole seconds; we do not (difference < 1 s per epoch).

Max epochs are upstream's constants: bert 2, cifar10 100, deepspeech2 80, imagenet 90, ncf 10,
yolov3 50 (yolov3's largest local batch is capped at 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from aryl_gym.config import ConfigError

#: Upstream ``applications.py`` constants: max epochs (and yolov3's max local batch).
POLLUX_MAX_EPOCHS: dict[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "deepspeech2": 80,
    "imagenet": 90,
    "ncf": 10,
    "yolov3": 50,
}
POLLUX_MAX_LOCAL_BSZ: dict[str, int] = {"yolov3": 8}


def _read_numeric_csv(path: Path) -> dict[str, np.ndarray]:
    """A profile CSV as float64 columns by header name, read by pyarrow's CSV reader as the
    trace loaders are (:func:`aryl_gym.workload.traces_formats.read_csv_table`: blank rows
    ignored, cells trimmed). The first bad row, in file order, is a ConfigError naming
    ``file:line``: a wrong number of fields, or a cell that is not a number (a number is what
    Python's ``float`` reads, as before, except for ``_`` digit separators)."""
    if not path.exists():
        raise ConfigError(f"{path}: Pollux profile file not found")
    # pyarrow (about 0.3 s to import): only when a profile is read
    import pyarrow as pa
    import pyarrow.compute as pc

    from aryl_gym.workload.traces_formats import LoadReport, read_csv_table

    with open(path, "rb") as fh:
        if not fh.readline().strip():
            raise ConfigError(f"{path}: empty profile file")
    table = read_csv_table(path, [], ",", LoadReport(str(path), "pollux-profile"))
    header = table.header
    dup = next((h for h in header if header.count(h) > 1), None)
    if dup is not None:
        raise ConfigError(f"{path}:1: column '{dup}' appears twice in the header")
    # the first problem in file order: (line, column index, message)
    first: tuple[int, int, str] | None = None
    if table.bad_width:
        line, nfields = min(table.bad_width)
        first = (line, -1, f"{path}:{line}: {nfields} fields, header has {len(header)}")
    out: dict[str, np.ndarray] = {}
    for i, h in enumerate(header):
        col = table.cols[h]
        try:
            out[h] = np.asarray(pc.cast(col, pa.float64()), dtype=np.float64)
            continue
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        for k, v in enumerate(col.to_pylist()):  # the error path: find the first bad cell
            try:
                pa.scalar(v, pa.string()).cast(pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                line = int(table.lines[k])
                if first is None or (line, i) < first[:2]:
                    first = (line, i, f"{path}:{line}: column '{h}': not a number: {v!r}")
                break
    if first is not None:
        raise ConfigError(first[2])
    return out


def _norm_placement(placement: tuple[int, ...]) -> tuple[int, ...]:
    """Drop empty nodes and take the lexicographically smallest rotation (upstream rule)."""
    p = tuple(x for x in placement if x)
    return min(p[i:] + p[:i] for i in range(len(p)))


def packed_placement(num_replicas: int, gpus_per_node: int = 4) -> tuple[int, ...]:
    """Replicas packed onto as few nodes as possible: 6 on 4-GPU nodes -> (4, 2)."""
    out: list[int] = []
    while sum(out) < num_replicas:
        out.append(min(num_replicas - sum(out), gpus_per_node))
    return tuple(out)


@dataclass(frozen=True)
class JobConfig:
    """How a job with a fixed (replicas, batch) runs: placement, micro-batch, accumulation."""

    placement: tuple[int, ...]
    atomic_bsz: int  # per-GPU micro-batch (samples)
    accum_steps: int  # extra accumulation micro-steps per optimizer step
    batch_size: int  # effective global batch (samples)


class PolluxApplication:
    """One application's profiles (a folder ``traces/<app>/``)."""

    def __init__(self, folder: str | Path, max_epochs: int | None = None):
        self.folder = Path(folder)
        self.name = self.folder.name
        if not self.folder.is_dir():
            raise ConfigError(
                f"{self.folder}: Pollux profile folder not found; expected "
                "<profiles>/<app>/{placements,scalability,validation-*}.csv"
            )
        self.validation: dict[int, dict[str, np.ndarray]] = {}
        for p in sorted(self.folder.glob("validation-*.csv")):
            try:
                bsz = int(p.stem.split("-")[-1])
            except ValueError:
                raise ConfigError(f"{p}: file name must be validation-<batch size>.csv") from None
            self.validation[bsz] = _read_numeric_csv(p)
        if not self.validation:
            raise ConfigError(f"{self.folder}: no validation-<B>.csv files")
        self.validation = dict(sorted(self.validation.items()))
        pl = _read_numeric_csv(self.folder / "placements.csv")
        self.pl_id = pl["placement"].astype(np.int64)
        self.pl_lbsz = pl["local_bsz"]
        self.pl_step = pl["step_time"]
        self.pl_sync = pl["sync_time"]
        sc = _read_numeric_csv(self.folder / "scalability.csv")
        self.sc_nodes = sc["num_nodes"].astype(np.int64)
        self.sc_reps = sc["num_replicas"].astype(np.int64)
        self.sc_lbsz = sc["local_bsz"]
        self.sc_step = sc["step_time"]
        self.sc_sync = sc["sync_time"]
        self.init_batch_size = min(self.validation)
        self.max_batch_size = max(self.validation)
        self.min_local_bsz = int(self.pl_lbsz.min())
        self.max_local_bsz = int(POLLUX_MAX_LOCAL_BSZ.get(self.name, self.pl_lbsz.max()))
        n_ep = min(len(v["progress"]) for v in self.validation.values())
        self.max_epochs = int(max_epochs or POLLUX_MAX_EPOCHS.get(self.name, n_ep))
        if self.max_epochs > n_ep:
            raise ConfigError(
                f"{self.folder}: max_epochs {self.max_epochs} but validation files have {n_ep} rows"
            )

    # -- upstream rules -------------------------------------------------------------------------
    def progress(self, epoch: int) -> float:
        """Scale-invariant iterations needed to finish ``epoch`` epochs (min over batch sizes)."""
        if epoch == 0:
            return 0.0
        return float(min(v["progress"][epoch - 1] for v in self.validation.values()))

    def _bracket(self, batch_size: float) -> tuple[int, int]:
        keys = list(self.validation)
        lo = [b for b in keys if b <= batch_size]
        hi = [b for b in keys if b >= batch_size]
        if not lo or not hi:
            raise ConfigError(
                f"{self.name}: global batch {batch_size} outside the validated range "
                f"[{keys[0]}, {keys[-1]}]; pick a batch size in that range"
            )
        return lo[-1], hi[0]

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) in ``epoch``, linear between validated batch sizes."""
        lo, hi = self._bracket(batch_size)
        a, b = self.validation[lo], self.validation[hi]
        if lo == hi:
            return float(a["grad_sqr"][epoch]), float(a["grad_var"][epoch])
        x = (batch_size - lo) / (hi - lo)
        sqr = (1 - x) * a["grad_sqr"][epoch] + x * b["grad_sqr"][epoch]
        var = (1 - x) * a["grad_var"][epoch] + x * b["grad_var"][epoch]
        return float(sqr), float(var)

    def throughput(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step_time, sync_time) in seconds for one step at ``placement`` and per-GPU batch."""
        p = _norm_placement(placement)
        pid = int("".join(map(str, p)))
        m = self.pl_id == pid
        if m.any():
            xs, st, sy = self.pl_lbsz[m], self.pl_step[m], self.pl_sync[m]
        else:
            nodes, reps = min(len(p), 16), sum(p)
            m = (self.sc_nodes == nodes) & (self.sc_reps == reps)
            if not m.any():
                raise ConfigError(
                    f"{self.name}: no throughput profile for {reps} replicas on {len(p)} nodes "
                    f"(placement {pid}); use a replica count the profiles cover "
                    "(1-16 on up to 4 nodes, or a (nodes, replicas) pair in scalability.csv)"
                )
            xs, st, sy = self.sc_lbsz[m], self.sc_step[m], self.sc_sync[m]
        order = np.argsort(xs, kind="stable")
        xs, st, sy = xs[order], st[order], sy[order]
        if not xs[0] - 1e-9 <= local_bsz <= xs[-1] + 1e-9:
            raise ConfigError(
                f"{self.name}: per-GPU batch {local_bsz} outside the profiled range "
                f"[{xs[0]:g}, {xs[-1]:g}] for placement {pid}; change num_replicas or batch_size"
            )
        return float(np.interp(local_bsz, xs, st)), float(np.interp(local_bsz, xs, sy))

    def config(self, num_replicas: int, batch_size: int, gpus_per_node: int = 4) -> JobConfig:
        """Upstream ``Job.update_local_bsz`` for a fixed target batch size."""
        r = int(num_replicas)
        local = math.ceil(batch_size / r - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if r == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (r * (accum + 1))))
        return JobConfig(
            packed_placement(r, gpus_per_node), atomic, accum, r * atomic * (accum + 1)
        )

    def run_time(self, num_replicas: int, batch_size: int, gpus_per_node: int = 4) -> float:
        """Seconds to train to ``max_epochs`` at a fixed configuration (no restart delays)."""
        return float(self.epoch_times(num_replicas, batch_size, gpus_per_node).sum())

    # -- vectorised per-epoch times (memoised: a workload repeats few configurations) ----------
    def _need(self) -> np.ndarray:
        """Scale-invariant iterations of each epoch, ``progress(e + 1) - progress(e)``: (E,)."""
        if not hasattr(self, "_need_arr"):
            prog = np.array([self.progress(e) for e in range(self.max_epochs + 1)])
            self._need_arr = np.diff(prog)
        return self._need_arr

    def _grad_arrays(self, batch_size: float) -> tuple[np.ndarray, np.ndarray]:
        """(grad_sqr, grad_var) over the first ``max_epochs`` epochs at ``batch_size``: (E,) each."""
        lo, hi = self._bracket(batch_size)
        E = self.max_epochs
        a, b = self.validation[lo], self.validation[hi]
        if lo == hi:
            return a["grad_sqr"][:E], a["grad_var"][:E]
        x = (batch_size - lo) / (hi - lo)
        sqr = (1 - x) * a["grad_sqr"][:E] + x * b["grad_sqr"][:E]
        var = (1 - x) * a["grad_var"][:E] + x * b["grad_var"][:E]
        return sqr, var

    def _epoch_times_cfg(self, placement: tuple[int, ...], atomic: int, accum: int,
                         batch: float) -> np.ndarray:
        step, sync = self.throughput(placement, atomic)
        total_step = step + (step - sync) * accum  # seconds per optimizer step
        scale = batch / self.init_batch_size
        sqr, var = self._grad_arrays(batch)
        gain = (var + sqr) / (var / scale + sqr)  # progress per step, by epoch
        return self._need() * total_step / gain

    def epoch_times(self, num_replicas: int, batch_size: int, gpus_per_node: int = 4) -> np.ndarray:
        """Seconds spent in each of the ``max_epochs`` epochs at a fixed configuration: (E,)."""
        memo = self.__dict__.setdefault("_et_memo", {})
        key = (int(num_replicas), int(batch_size), int(gpus_per_node))
        hit = memo.get(key)
        if hit is None:
            # was: a huge count (num_replicas 100000000) built its placement in quadratic time
            # (a hang), or a message holding a placement of hundreds of digits
            most = self.most_profiled_replicas
            if int(num_replicas) > most:
                raise ConfigError(
                    f"{self.name}: no throughput profile for {int(num_replicas)} replicas; the "
                    f"profiles cover 1-{most} replicas; use a replica count in that range"
                )
            c = self.config(num_replicas, batch_size, gpus_per_node)
            if c.atomic_bsz < 1:
                raise ConfigError(
                    f"{self.name}: batch {batch_size} on {num_replicas} replicas leaves no "
                    "samples per GPU; lower num_replicas or raise batch_size"
                )
            hit = self._epoch_times_cfg(c.placement, c.atomic_bsz, c.accum_steps, c.batch_size)
            memo[key] = hit
        return hit

    def tuned_epoch_times(self, num_replicas: int, gpus_per_node: int = 4,
                          candidates: int = 50) -> np.ndarray | None:
        """Per-epoch seconds when the batch size is re-tuned every epoch (Pollux), or None.

        Candidates as upstream ``GoodputFunction.optimize``: ``candidates`` global batches in
        geometric space from ``max(init batch, min local batch x r)`` to the largest validated
        batch, split into ``accum_steps + 1`` micro-batches above the largest local batch (one
        replica above the initial batch always accumulates once), micro-batches outside
        ``[min_local_bsz, max_local_bsz]`` invalid; then the simulator's cap ``atomic <=
        max_batch / (r (accum + 1))``. Each epoch takes the candidate with the best goodput,
        which is the one with the fewest seconds for that epoch (goodput = progress per second
        x init batch). Pollux picks with a *fitted* throughput model; we use the measured one
        (an oracle of its choice) [ours]. ``None`` when no batch is valid for ``r`` replicas.
        """
        memo = self.__dict__.setdefault("_tuned_memo", {})
        key = (int(num_replicas), int(gpus_per_node), int(candidates))
        if key in memo:
            return memo[key]
        r = int(num_replicas)
        eps = 1e-8
        lo = max(self.init_batch_size, self.min_local_bsz * r)
        best: np.ndarray | None = None
        if lo <= self.max_batch_size:
            place = packed_placement(r, gpus_per_node)
            seen: set[tuple[int, int]] = set()
            for b in np.geomspace(lo, self.max_batch_size, candidates):
                local = b / r
                accum = math.ceil(local / self.max_local_bsz - eps) - 1
                if r == 1 and local > self.init_batch_size + eps:
                    accum = max(accum, 1)
                atomic = math.ceil(local / (accum + 1) - eps)
                if not self.min_local_bsz <= atomic <= self.max_local_bsz:
                    continue
                atomic = min(atomic, int(self.max_batch_size / (r * (accum + 1))))
                if atomic < 1 or (atomic, accum) in seen:
                    continue
                seen.add((atomic, accum))
                try:
                    t = self._epoch_times_cfg(place, atomic, accum, r * atomic * (accum + 1))
                except ConfigError:
                    continue
                best = t if best is None else np.minimum(best, t)
        memo[key] = best
        return best

    def scaling_curve(self, num_replicas: int, batch_size: int,
                      gpus_per_node: int = 4) -> tuple[float, ...]:
        """``JobSpec.scaling`` for a job that keeps its global batch: index ``w = 0..r``.

        ``scaling[w] = T(r) r / (T(w) w)`` with ``T`` the run time at ``w`` replicas and the
        fixed ``batch_size`` (:meth:`run_time`), so ``scaling[r] = 1`` and the rate
        ``w x speed x scaling[w]`` makes the job run exactly ``T(w)``. A count the profiles
        cannot run at that batch keeps linear scaling (1.0). Index 0 is 1.0 (unused).
        """
        r = int(num_replicas)
        t_r = self.run_time(r, batch_size, gpus_per_node)
        out = [1.0]
        for w in range(1, r + 1):
            try:
                t_w = self.run_time(w, batch_size, gpus_per_node)
            except ConfigError:
                out.append(1.0)
                continue
            out.append(t_r * r / (t_w * w))
        return tuple(out)

    def tuning_table(self, w_max: int, batch_size: int, gpus_per_node: int = 4) -> np.ndarray:
        """``m[w]``, ``w = 0..w_max``: run time at the fixed batch over run time when tuned.

        Relative to the job's own scaling curve (:meth:`scaling_curve`), so the simulator's rate
        ``w x speed x scaling[w] x m[w]`` is the tuned job's: it runs ``sum_e min_B t_e(w, B)``
        seconds at a constant ``w`` (:meth:`tuned_epoch_times`). ``m >= 1`` (the fixed batch is
        among Pollux's choices in effect: we never let tuning slow a job).
        """
        out = np.ones(int(w_max) + 1)
        for w in range(1, int(w_max) + 1):
            tuned = self.tuned_epoch_times(w, gpus_per_node)
            if tuned is None:
                continue
            try:
                fixed = self.epoch_times(w, batch_size, gpus_per_node)
            except ConfigError:
                continue
            out[w] = max(float(fixed.sum()) / float(np.minimum(tuned, fixed).sum()), 1.0)
        return out

    @property
    def most_profiled_replicas(self) -> int:
        """The largest replica count any profile row (placements.csv or scalability.csv) covers."""
        pl = max((sum(map(int, str(int(i)))) for i in self.pl_id), default=0)
        return int(max(pl, int(self.sc_reps.max(initial=0))))

    @property
    def max_replicas(self) -> int:
        """Upstream's cap: max batch / min local batch (and 64); ncf never scales (1)."""
        if self.name == "ncf":
            return 1
        return int(min(64, self.max_batch_size // self.min_local_bsz))


@lru_cache(maxsize=16)
def _load_apps_cached(root: str) -> dict[str, PolluxApplication]:
    base = Path(root)
    apps = {}
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        if (d / "placements.csv").exists():
            apps[d.name] = PolluxApplication(d)
    if not apps:
        raise ConfigError(
            f"{base}: no Pollux application profiles (folders with placements.csv); pass "
            "trace option profiles=<folder holding bert/, cifar10/, ...>"
        )
    return apps


def load_pollux_profiles(root: str | Path) -> dict[str, PolluxApplication]:
    """All application profiles under ``root`` (``root/<app>/placements.csv``), cached."""
    return _load_apps_cached(str(Path(root).resolve()))
