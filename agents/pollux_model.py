"""Pollux's goodput model (Qiao et al., OSDI '21, section 3) and batch-size tuning tables.

Goodput = throughput x statistical efficiency (Pollux section 3.1, Eq. 2-3). Statistical
efficiency at global batch ``B`` uses the gradient noise scale (PGNS) as Pollux's
``adaptdl/goodput.py`` does: with ``scale = B / B0`` (``B0`` the initial batch size),
``gain = (var + sqr) / (var / scale + sqr)`` and ``efficiency = gain / scale``, which equals
``(PGNS + B0) / (PGNS + B)`` with ``PGNS = B0 * var / sqr``. Batch-size tuning picks, for a given
number of replicas, the batch size that maximises goodput (Pollux's ``GoodputFunction.optimize``:
50 batch sizes in geometric space between ``max(B0, min_local x replicas)`` and the largest
allowed batch, gradient accumulation when the local batch exceeds the largest atomic batch).

How goodput meets the simulator (our adaptation, documented in SPEC terms): a job's work is
defined at its *reference configuration*, the one it runs in under every untuned policy, where the
simulator's rate is ``w x speed`` (linear scaling, SPEC 1.3). Tuning changes the job from inside,
so it enters as a **rate multiplier** ``m[w] = goodput(w, tuned batch) / goodput(w, reference
batch) >= 1`` that the policy hands to the simulator in ``Decision.speedup`` (one table per job,
indexed by worker count). The reference batch is always among the candidates, so tuning never
slows a job.

Two sources of the model:

* **Pollux workloads** (``JobSpec.app`` set): the measured per-application profiles in
  ``traces/pollux-philly/traces/<app>/`` (read at run time through
  :func:`aryl_gym.workload.paths.resolve_data_path`), see :class:`AppProfile`. The reference
  batch is the job's ``batch_size`` from the workload file.
* **Synthetic elastic jobs**: :class:`FamilyModel`, a per-family model [ours] with the same structure: a
  worker's step time ``t(u, w) = fixed + (1 - fixed) u + sync(w)`` for local batch ``u`` (in
  units of the reference local batch), ``sync(w) = sync_frac (1 + retro (w - 2)+)`` for ``w > 1``
  (all-reduce; Pollux's ``alpha_r + beta_r (r - 2)`` network term), and a constant PGNS of
  ``pgns`` reference local batches. The reference configuration keeps the local batch fixed
  (``u = 1``, global batch ``w``; paper section 2: Aryl's elastic jobs scale "without updating
  the local batch size"). Synthetic *inelastic* jobs allow no tuning (table of ones).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aryl_gym.config import ConfigError
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.workload.paths import resolve_data_path
from aryl_gym.workload.traces_pollux import load_pollux_profiles

# --------------------------------------------------------------------------------------------
# Synthetic jobs: per-family constants [ours]
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyModel:
    """Per-family goodput constants for synthetic jobs [ours].

    Attributes:
        pgns: gradient noise scale in reference local batches (bigger = large batches stay
            efficient longer). Pollux Fig. 2 shows PGNS from tens to thousands of samples.
        sync_frac: all-reduce time per step relative to the reference step's compute time.
        fixed_frac: share of the reference step's compute that does not grow with the batch.
        retro: per-extra-worker growth of the all-reduce time beyond two workers.
        u_min, u_max: local batch range in reference local batches (memory bounds the top).
    """

    pgns: float = 4.0
    sync_frac: float = 0.15
    fixed_frac: float = 0.10
    retro: float = 0.02
    u_min: float = 0.25
    u_max: float = 4.0

    def step_time(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        sync = np.where(w > 1, self.sync_frac * (1.0 + self.retro * np.maximum(w - 2, 0)), 0.0)
        return self.fixed_frac + (1.0 - self.fixed_frac) * u + sync

    def table(self, w_max: int, w_min: int = 1) -> np.ndarray:
        """``m[w]`` for ``w = 0..w_max``: tuned over reference goodput (``m[0] = 1``)."""
        w = np.arange(1, w_max + 1, dtype=np.float64)[:, None]  # (W, 1)
        u = np.unique(np.concatenate([np.geomspace(self.u_min, self.u_max, 50), [1.0]]))[None, :]
        # Global batch not below the job's batch at its base demand (w_min reference batches).
        ok = (w * u >= w_min - 1e-9) | (u == 1.0)
        thr = w * u / self.step_time(u, w)  # samples per unit time
        thr_ref = w / self.step_time(np.ones_like(w), w)
        eff = (self.pgns + w) / (self.pgns + w * u)  # efficiency(w u) / efficiency(w)
        m = np.where(ok, thr * eff / thr_ref, 0.0).max(axis=1)
        return np.concatenate([[1.0], np.maximum(m, 1.0)])


#: [ours] Constants for the paper's elastic families and a default for the others. VGG16's
#: large dense layers make all-reduce heavy; BERT tolerates large batches (LAMB-style).
FAMILY_MODELS: dict[str, FamilyModel] = {
    "resnet50": FamilyModel(pgns=8.0, sync_frac=0.10),
    "vgg16": FamilyModel(pgns=4.0, sync_frac=0.35),
    "bert": FamilyModel(pgns=16.0, sync_frac=0.20, fixed_frac=0.05),
    "gnmt16": FamilyModel(pgns=8.0, sync_frac=0.25),
}
DEFAULT_FAMILY_MODEL = FamilyModel()


def family_model(family: str) -> FamilyModel:
    return FAMILY_MODELS.get(family, DEFAULT_FAMILY_MODEL)


# --------------------------------------------------------------------------------------------
# Pollux workloads: measured application profiles
# --------------------------------------------------------------------------------------------

#: Pollux's per-application settings (upstream ``simulator/applications.py``): max epochs, and
#: yolov3's largest atomic local batch.
APP_SETTINGS: dict[str, dict[str, int]] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}

#: GPUs per node on the Pollux testbed (g4dn.12xlarge: 4 T4), used for packed placements.
PROFILE_NODE_GPUS = 4


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def packed_placement(r: int, node_gpus: int = PROFILE_NODE_GPUS) -> str:
    """Placement string of ``r`` replicas packed on nodes (Pollux: smallest rotation)."""
    parts: tuple[int, ...] = ()
    while sum(parts) < r:
        parts = (*parts, min(r - sum(parts), node_gpus))
    best = min(parts[i:] + parts[:i] for i in range(len(parts)))
    return "".join(map(str, best))


class AppProfile:
    """One application's measured throughput and gradient statistics (Pollux profiles).

    Throughput: ``step_time``/``sync_time`` for the packed placement of ``r`` replicas, linear
    in the local batch between measured points (clamped at the ends); replica counts without
    a measured packed placement are interpolated linearly in ``r`` between the nearest measured
    ones (Pollux's simulator interpolates in (nodes, replicas, local batch) with
    ``LinearNDInterpolator``; without scipy we use this 2-step linear rule [ours]).
    Efficiency: the PGNS from ``grad_sqr``/``grad_var`` averaged over the first ``max_epochs``
    epochs of the initial batch size's validation file (Pollux tracks the current epoch; the
    simulator has no epochs [ours]).
    """

    def __init__(self, name: str, folder: Path):
        self.name = name
        self.folder = folder
        for need in ("placements.csv", "scalability.csv"):
            if not (folder / need).exists():
                raise ConfigError(
                    f"{folder / need}: missing; the Pollux profile of application {name!r} needs "
                    "placements.csv, scalability.csv and validation-<B>.csv"
                )
        vals: dict[int, list[dict[str, str]]] = {}
        for p in sorted(folder.glob("validation-*.csv")):
            try:
                b = int(p.stem.split("-")[-1])
            except ValueError:
                raise ConfigError(f"{p}: expected a name validation-<batch size>.csv") from None
            vals[b] = _read_csv(p)
        if not vals:
            raise ConfigError(f"{folder}: no validation-<B>.csv files for application {name!r}")
        settings = APP_SETTINGS.get(name, {})
        self.init_batch_size = min(vals)
        self.max_batch_size = max(vals)
        place = _read_csv(folder / "placements.csv")
        scal = _read_csv(folder / "scalability.csv")
        try:
            lbs = [int(float(r["local_bsz"])) for r in place]
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{folder / 'placements.csv'}: bad local_bsz column ({exc})") from None
        self.min_local_bsz = min(lbs)
        self.max_local_bsz = settings.get("max_local_bsz", max(lbs))
        self.max_epochs = settings.get("max_epochs", min(len(v) for v in vals.values()))
        init = vals[self.init_batch_size][: self.max_epochs]
        self.grad_sqr = float(np.mean([float(r["grad_sqr"]) for r in init]))
        self.grad_var = float(np.mean([float(r["grad_var"]) for r in init]))
        # Packed-placement tables: r -> (local_bsz, step_time, sync_time), sorted by local_bsz.
        rows: dict[int, list[tuple[float, float, float]]] = {}
        for r in place:
            pl = r["placement"].strip()
            n_rep = sum(int(c) for c in pl)
            if pl == packed_placement(n_rep):
                rows.setdefault(n_rep, []).append(
                    (float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
                )
        for r in scal:
            n_nodes, n_rep = int(r["num_nodes"]), int(r["num_replicas"])
            if n_rep not in rows and n_nodes == math.ceil(n_rep / PROFILE_NODE_GPUS):
                rows.setdefault(n_rep, [])
            if n_nodes == math.ceil(n_rep / PROFILE_NODE_GPUS) and n_rep > 16:
                rows[n_rep].append(
                    (float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
                )
        self._tab: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for n_rep, lst in rows.items():
            if lst:
                a = np.array(sorted(lst))
                self._tab[n_rep] = (a[:, 0], a[:, 1], a[:, 2])
        self._reps = np.array(sorted(self._tab))
        if len(self._reps) == 0:
            raise ConfigError(f"{folder}: no packed placement rows in placements.csv")

    # -- throughput --------------------------------------------------------------------------
    def _at(self, r: int, bsz: float) -> tuple[float, float]:
        b, st, sy = self._tab[r]
        return float(np.interp(bsz, b, st)), float(np.interp(bsz, b, sy))

    def step_sync(self, r: int, local_bsz: float) -> tuple[float, float]:
        """(step time, sync time) in seconds for ``r`` packed replicas at ``local_bsz``."""
        if r in self._tab:
            return self._at(r, local_bsz)
        reps = self._reps
        if r < reps[0]:
            return self._at(int(reps[0]), local_bsz)
        if r > reps[-1]:
            return self._at(int(reps[-1]), local_bsz)
        hi = int(reps[np.searchsorted(reps, r)])
        lo = int(reps[np.searchsorted(reps, r) - 1])
        a, b = self._at(lo, local_bsz), self._at(hi, local_bsz)
        f = (r - lo) / (hi - lo)
        return a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1])

    def throughput(self, r: int, atomic_bsz: float, accum_steps: int) -> float:
        """Samples per second (Pollux simulator: accumulation steps skip the all-reduce)."""
        step, sync = self.step_sync(r, atomic_bsz)
        total = step + (step - sync) * accum_steps
        return r * atomic_bsz * (accum_steps + 1) / total

    def efficiency(self, batch_size: float) -> float:
        """Statistical efficiency relative to the initial batch size (Pollux Eq. 3)."""
        scale = batch_size / self.init_batch_size
        denom = self.grad_var / scale + self.grad_sqr
        gain = (self.grad_var + self.grad_sqr) / denom if denom > 0 else 1.0
        return gain / scale

    def config_for(self, r: int, batch_size: float) -> tuple[int, int]:
        """(atomic batch, accumulation steps) for a global batch on ``r`` replicas (Pollux)."""
        eps = 1e-8
        local = math.ceil(batch_size / r - eps)
        accum = max(math.ceil(local / self.max_local_bsz - eps) - 1, 0)
        if r == 1 and batch_size > self.init_batch_size + eps:
            accum = max(accum, 1)
        atomic = math.ceil(local / (accum + 1) - eps)
        return atomic, accum

    def goodput(self, r: int, batch_size: float) -> float:
        """Goodput (scale-invariant samples per second) at a fixed global batch size."""
        atomic, accum = self.config_for(r, batch_size)
        return self.throughput(r, atomic, accum) * self.efficiency(r * atomic * (accum + 1))

    def best_goodput(self, r: int, max_batch_size: float | None = None) -> tuple[float, float]:
        """(goodput, batch size) tuned over 50 geometric batch sizes (Pollux ``optimize``)."""
        top = float(max_batch_size or self.max_batch_size)
        lo = max(self.init_batch_size, self.min_local_bsz * r)
        if lo > top:
            return 0.0, float(lo)
        best = (0.0, float(lo))
        for b in np.geomspace(lo, top, 50):
            atomic, accum = self.config_for(r, float(b))
            if not self.min_local_bsz <= atomic <= self.max_local_bsz:
                continue
            gp = self.throughput(r, atomic, accum) * self.efficiency(r * atomic * (accum + 1))
            if gp > best[0]:
                best = (gp, float(b))
        return best

    def table(self, w_max: int, ref_batch: float | None) -> np.ndarray:
        """``m[w]`` for ``w = 0..w_max``: tuned goodput over goodput at the reference batch."""
        ref = float(ref_batch or self.init_batch_size)
        out = np.ones(w_max + 1)
        for w in range(1, w_max + 1):
            g_ref = self.goodput(w, ref)
            g_best, _ = self.best_goodput(w)
            out[w] = max(g_best / g_ref, 1.0) if g_ref > 0 else 1.0
        return out


_PROFILE_CACHE: dict[tuple[str, str | None], AppProfile] = {}


def load_profile(app: str, data_root: str | None = None) -> AppProfile:
    """The profile of application ``app`` from ``traces/pollux-philly/traces/<app>`` (cached)."""

    key = (app, data_root)
    if key not in _PROFILE_CACHE:
        rel = f"traces/pollux-philly/traces/{app}"
        try:
            folder = resolve_data_path(rel, data_root)
        except ConfigError as exc:
            raise ConfigError(
                f"Pollux profile for application {app!r} not found ({exc}). The Pollux "
                "workloads need ../shared/traces/pollux-philly/traces/<app>/; set ARYL_GYM_DATA "
                "or --data-root to the folder that holds traces/"
            ) from None
        _PROFILE_CACHE[key] = AppProfile(app, Path(folder))
    return _PROFILE_CACHE[key]


def scaling_of(spec: JobSpec, w_max: int | None = None) -> np.ndarray:
    """The job's own scaling curve ``scaling[0..w_max]`` (``JobSpec.scaling``; ones if linear)."""
    n = int(spec.w_max if w_max is None else w_max) + 1
    if spec.scaling is None:
        return np.ones(n)
    sc = np.asarray(spec.scaling, dtype=np.float64)
    return sc[np.minimum(np.arange(n), len(sc) - 1)]


def tuning_table(spec: JobSpec, data_root: str | None = None) -> np.ndarray:
    """Rate-multiplier table ``m[0..w_max]`` for ``spec`` (see the module docstring).

    Pollux-workload jobs whose trace gave a scaling curve (``JobSpec.scaling``, filled by the
    trace loader from the profiles at the job's fixed batch) use the per-epoch tuned run time of
    :meth:`aryl_gym.workload.traces_pollux.PolluxApplication.tuning_table`, *relative to that
    curve*: the simulator multiplies both, so a tuned job runs Pollux's tuned time exactly.
    Inelastic Pollux jobs (ncf) keep their batch as in Pollux's simulator (table of ones).
    """
    if spec.app and spec.scaling is not None:
        if not spec.elastic:
            return np.ones(spec.w_max + 1)

        folder = spec.extra.get("profiles_dir")
        if folder is None:
            folder = str(resolve_data_path("traces/pollux-philly/traces", data_root))
        app = load_pollux_profiles(folder)[spec.app]
        return app.tuning_table(
            spec.w_max, int(spec.batch_size or app.init_batch_size),
            int(spec.extra.get("profile_gpus_per_node", 4)),
        )
    if spec.app:
        return load_profile(spec.app, data_root).table(spec.w_max, spec.batch_size)
    if not spec.elastic:
        # Synthetic inelastic jobs do not allow hyperparameter changes (the Aryl paper's
        # inelastic jobs need their configuration as submitted): no tuning.
        return np.ones(spec.w_max + 1)
    return family_model(spec.family).table(spec.w_max, spec.w_min)
