"""Observation v1 of the allocation env (``observation="v1"``): what good decisions need.

Two keys are added to the v0 observation (:mod:`aryl_gym.envs.observation`), float32 in
``[0, 1]``; times are in hours squashed with ``x / (1 + x)``:

``jobs_v1`` (K, :data:`JOB_FEATURES_V1`), one row per window slot (padding rows are 0)
    * ``gain_one_more``: the marginal JCT gain of one more worker, ``T(w) - T(w + 1)`` (the
      knapsack value of Aryl's phase two), where ``T(w)`` is the predicted remaining running
      time at ``w`` workers (``pred_remaining / rate(j, w, pool)``, the job's scaling curve
      included) and ``w`` the current workers (a queued job: its request ``w_req``); 0 for an
      inelastic job or one at ``w_max``;
    * ``pred_time_cur``, ``pred_time_req``, ``pred_time_max``: ``T`` at the current size (a
      queued job: ``w_req``) on its pool, and at ``w_req`` and ``w_max`` on the training pool;
    * ``reclaim_risk``: 1 for a job holding loaned inference servers times the share of the
      loaned servers that the forecast says inference takes back within the next hour.

``cluster_v1`` (:data:`CLUSTER_FEATURES_V1`)
    * ``tod_sin``, ``tod_cos``: time of day (the scenario's ``inference.start_hour`` included);
    * ``u_1h`` ... ``u_8h``: the inference utilization forecast 1, 2, 4 and 8 hours ahead;
    * ``loanable_1h`` ... ``loanable_8h``: the loanable servers that forecast implies
      (``N_inf - ceil(N_inf min(1, u + headroom))``) / ``N_inf``;
    * ``at_risk_1h``, ``at_risk_4h``: loaned servers likely to be reclaimed soon: loaned now
      minus the fewest loanable servers forecast over the next 1 (4) hours, clipped at 0,
      / ``N_inf``.

**The forecast.** ``inference.mode: diurnal``: the generator's known daily shape (its mean
profile, :func:`aryl_gym.sim.loaning.diurnal_utilization` without the day and sample noise),
which is what an operator knows of a daily cycle; the realised series (noise included) is never
read ahead. ``mode: csv`` (a user's series): an online seasonal-naive estimate from the past only:
``u(t + h)`` is the value observed 24 h before ``t + h`` when that lies in the past, else the
current value (persistence). ``mode: constant``: the constant.

Features are computed once per decision point (sub-steps of the ``sequential`` mode reuse them;
the simulator does not move between commits) with a per-episode cache of rates.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from gymnasium import spaces

from aryl_gym.envs.observation import _f32
from aryl_gym.sim.loaning import diurnal_utilization

JOB_FEATURES_V1: tuple[str, ...] = (
    "gain_one_more",
    "pred_time_cur",
    "pred_time_req",
    "pred_time_max",
    "reclaim_risk",
)
HORIZONS_H: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
CLUSTER_FEATURES_V1: tuple[str, ...] = (
    "tod_sin",
    "tod_cos",
    *(f"u_{int(h)}h" for h in HORIZONS_H),
    *(f"loanable_{int(h)}h" for h in HORIZONS_H),
    "at_risk_1h",
    "at_risk_4h",
)
F_JOB_V1 = len(JOB_FEATURES_V1)
_HORIZONS_S = tuple(float(x) for x in np.asarray(HORIZONS_H) * 3600.0)
F_CLUSTER_V1 = len(CLUSTER_FEATURES_V1)
OBSERVATION_VERSIONS = ("v0", "v1")
_RISK_GRID_H = np.arange(0.0, 4.0 + 1e-9, 0.25)  # forecast points for at_risk (every 15 min)
_RISK_GRID_S = tuple(float(x) for x in _RISK_GRID_H * 3600.0)
_RISK_1H = int((_RISK_GRID_H <= 1.0).sum())  # the grid points within the next hour
_ALL_S = _HORIZONS_S + _RISK_GRID_S


def _sq(x: float) -> float:
    return x / (1.0 + x) if x < math.inf else 1.0


def extend_space(space: Any, k: int) -> Any:
    """The v0 ``Dict`` space plus ``jobs_v1`` and ``cluster_v1``."""

    return spaces.Dict(
        {
            **space.spaces,
            "jobs_v1": spaces.Box(0.0, 1.0, (k, F_JOB_V1), np.float32),
            "cluster_v1": spaces.Box(0.0, 1.0, (F_CLUSTER_V1,), np.float32),
        }
    )


class InferenceForecast:
    """Expected inference utilization ahead of ``now`` (see the module docstring)."""

    def __init__(self, scenario_config: Any):
        inf = scenario_config.inference
        self.mode = inf.mode
        self.mean = float(inf.mean)
        self.headroom = float(inf.headroom)
        self.n_inf = int(scenario_config.cluster.inf_servers)
        self.start_hour = float(inf.start_hour)
        self.sample_seconds = float(inf.sample_seconds)
        self.shape: np.ndarray | None = None
        self._cache: dict[tuple[int, ...], tuple[list[float], list[float], float, float]] = {}
        if self.mode == "diurnal":
            quiet = dataclasses.replace(inf, day_noise=0.0, sample_noise=0.0)
            self.shape = diurnal_utilization(quiet, 86400.0, np.random.default_rng(0))[:-1]

    def utilization(self, sim: Any, now: float, ahead_s: np.ndarray) -> np.ndarray:
        """Forecast ``u(now + ahead)`` for each ``ahead`` (seconds) from what is known at ``now``."""
        t = now + np.asarray(ahead_s, dtype=np.float64)
        if self.shape is not None:
            idx = (t // self.sample_seconds).astype(np.int64) % len(self.shape)
            return self.shape[idx]
        if self.mode == "constant":
            return np.full(t.shape, self.mean)
        past = t - 86400.0
        cur = sim.loan.utilization(now)
        return np.array([sim.loan.utilization(p) if 0.0 <= p <= now else cur for p in past])

    def loanable(self, u: np.ndarray) -> np.ndarray:
        need = np.ceil(self.n_inf * np.minimum(1.0, u + self.headroom) - 1e-9)
        return self.n_inf - need

    def utilization_list(self, sim: Any, now: float, ahead_s: tuple[float, ...]) -> list[float]:
        """:meth:`utilization` in plain Python (the same float operations, one point at a time)."""
        shape = self.shape
        if shape is not None:
            ss = self.sample_seconds
            n = len(shape)
            return [float(shape[int((now + a) // ss) % n]) for a in ahead_s]
        return [float(x) for x in self.utilization(sim, now, np.asarray(ahead_s, dtype=np.float64))]

    def summary(self, sim: Any, now: float) -> tuple[list[float], list[float], float, float]:
        """``(u at the horizons, loanable at the horizons, fewest loanable over the next hour,
        over the next 4 h)``. A diurnal forecast depends on ``now`` only through the sample
        indices of the points, so it is kept per index tuple (at most one entry per sample of a
        day)."""
        shape = self.shape
        if shape is not None:
            ss = self.sample_seconds
            n = len(shape)
            key = tuple([int((now + a) // ss) % n for a in _ALL_S])
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            u = [float(shape[i]) for i in key[: len(_HORIZONS_S)]]
            grid_u = [float(shape[i]) for i in key[len(_HORIZONS_S) :]]
        else:
            u = self.utilization_list(sim, now, _HORIZONS_S)
            grid_u = self.utilization_list(sim, now, _RISK_GRID_S)
        grid = self.loanable_list(grid_u)
        out = (u, self.loanable_list(u), min(grid[:_RISK_1H]), min(grid))
        if shape is not None:
            self._cache[key] = out
        return out

    def loanable_list(self, u: list[float]) -> list[float]:
        """:meth:`loanable` in plain Python."""
        n_inf, h = self.n_inf, self.headroom
        return [float(n_inf - math.ceil(n_inf * min(1.0, x + h) - 1e-9)) for x in u]


class ObservationV1:
    """Builds ``jobs_v1`` and ``cluster_v1`` for an :class:`~aryl_gym.envs.allocation.ArylEnv`."""

    def __init__(self, scenario_config: Any, k: int):
        self.k = int(k)
        self.forecast = InferenceForecast(scenario_config)
        self._key: tuple[int, int] | None = None
        self._out: dict[str, np.ndarray] = {}
        self._rates: dict[tuple[int, int, int], float] = {}
        self._episode = 0

    def begin(self, sim: Any) -> None:
        self._rates = {}
        self._qrows: dict[int, tuple[float, tuple[float, ...]]] = {}
        self._rrows: dict[tuple[int, int, int], tuple[float, float, float, float | None]] = {}
        self._key = None
        self._episode += 1
        self._w_req = [int(j.w_req or j.w_min) for j in sim.jobs]

    def _rate(self, sim: Any, j: int, w: int, pool: int) -> float:
        key = (j, w, pool)
        r = self._rates.get(key)
        if r is None:
            r = self._rates[key] = float(sim.rate_for(j, w, pool))
        return r

    def _rate_row(self, sim: Any, j: int, w: int, pool: int, w_req: int, w_max: int,
                  elastic: bool) -> tuple[float, float, float, float | None]:
        """Job ``j``'s rates at ``(w, pool)``, ``(w_req, 0)``, ``(w_max, 0)`` and, when it can
        grow (elastic, ``w < w_max``), ``(w + 1, pool)`` (else None); 0 at no workers."""
        pts = ((w, pool), (w_req, 0), (w_max, 0), (w + 1, pool)) if elastic and w < w_max else (
            (w, pool), (w_req, 0), (w_max, 0))
        out = [self._rate(sim, j, ww, pp) if ww > 0 else 0.0 for ww, pp in pts]
        return (out[0], out[1], out[2], out[3] if len(out) > 3 else None)

    def build(self, env: Any) -> dict[str, np.ndarray]:
        """``jobs_v1`` and ``cluster_v1`` (new arrays) for the env's current decision point."""
        self._update(env)
        return {k: v.copy() for k, v in self._out.items()}

    def write(self, env: Any, out: Any) -> None:
        """:meth:`build` into ``out[key]`` (writable arrays)."""
        self._update(env)
        for k, v in self._out.items():
            out[k][...] = v

    def _update(self, env: Any) -> None:
        key = (self._episode, int(env.decision_point))
        if key == self._key:
            return
        sim = env.sim
        now = float(sim.now)
        fc = self.forecast
        n_inf = max(fc.n_inf, 1)
        # cluster (plain Python floats: the same operations as the array forms, point by point)
        hours = now / 3600.0 + fc.start_hour
        ang = 2.0 * math.pi * (hours % 24.0) / 24.0
        u, loanable, low1, low4 = fc.summary(sim, now)
        loaned = float(sim.n_loaned)
        risk1 = max(loaned - low1, 0.0)
        risk4 = max(loaned - low4, 0.0)
        cluster = [(1.0 + math.sin(ang)) / 2.0, (1.0 + math.cos(ang)) / 2.0]
        cluster += [min(max(x, 0.0), 1.0) for x in u]
        cluster += [min(max(x / n_inf, 0.0), 1.0) for x in loanable]
        cluster += [min(risk1 / n_inf, 1.0), min(risk4 / n_inf, 1.0)]
        # jobs
        share_at_risk = min(risk1 / loaned, 1.0) if loaned > 0 else 0.0
        w_req_l = self._w_req
        wl, _, wkl, pooll = env._wsnap
        prl = sim.pred_remaining[env.window].tolist() if len(wl) else []
        w_max_l, el_l = sim.w_max_list, sim.elastic_list
        rrows = self._rrows
        qrows = self._qrows
        inf = math.inf
        flat: list[float] = []
        for j, wk, p, pr in zip(wl, wkl, pooll, prl):
            running = wk > 0
            if not running:  # a queued job's row changes only with its predicted work
                hit = qrows.get(j)
                if hit is not None and hit[0] == pr:
                    flat += hit[1]
                    continue
                w, pool = w_req_l[j], 0
            else:
                w, pool = wk, (p if p >= 0 else 0)
            # the rates at (w, pool), (w_req, 0), (w_max, 0) and, for a job that can grow,
            # (w + 1, pool): T(w) = pred / rate(w) / 3600 (hours; inf at rate 0)
            rr = rrows.get((j, w, pool))
            if rr is None:
                rr = rrows[(j, w, pool)] = self._rate_row(sim, j, w, pool, w_req_l[j], w_max_l[j], el_l[j])
            r0, r1, r2, r3 = rr
            t_cur = pr / r0 / 3600.0 if r0 > 0 else inf
            t_req = pr / r1 / 3600.0 if r1 > 0 else inf
            t_max = pr / r2 / 3600.0 if r2 > 0 else inf
            if r3 is not None:  # squashed max(T(w) - T(w + 1), 0): inf and NaN (inf - inf) give 1
                d = t_cur - (pr / r3 / 3600.0 if r3 > 0 else inf)
                gain = 0.0 if 0.0 > d else (d / (1.0 + d) if d < inf else 1.0)
            else:
                gain = 0.0
            row = (
                gain,
                t_cur / (1.0 + t_cur) if t_cur < inf else 1.0,
                t_req / (1.0 + t_req) if t_req < inf else 1.0,
                t_max / (1.0 + t_max) if t_max < inf else 1.0,
                share_at_risk if running and pool == 1 else 0.0,
            )
            if not running:
                qrows[j] = (pr, row)
            flat += row
        self._out = {"jobs_v1": _f32(flat, self.k * F_JOB_V1).reshape(self.k, F_JOB_V1),
                     "cluster_v1": _f32(cluster, F_CLUSTER_V1)}
        self._key = key
