"""Inference utilization and the loan controller (SPEC 1.2).

The inference cluster's utilization u(t) is a series sampled every ``sample_seconds`` (paper
Figure 1: 5-minute samples). :func:`diurnal_utilization` generates the paper's shape: mean about
0.65, peak-to-trough about 2.2 within a day, a peak of about four hours at night and the trough
before dawn (all paper), plus day-to-day and per-sample noise (ours). :func:`load_utilization_csv`
reads a user's series.

Servers needed by inference = ``ceil(N_inf * min(1, u + headroom))``; loanable = ``N_inf - needed``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from aryl_gym.config import ConfigError, InferenceConfig


def _daily_shape(hours: np.ndarray, cfg: InferenceConfig) -> np.ndarray:
    """Unnormalised daily profile in [0, 1]: a trough before dawn and a ~4 h plateau at night."""
    # Slow component: lowest at the trough hour, highest 12 h later.
    slow = 0.5 - 0.5 * np.cos(2 * np.pi * (hours - cfg.trough_hour) / 24.0)
    # Night peak: a smooth plateau of `peak_hours` centred on `peak_center_hour`.
    d = np.abs(((hours - cfg.peak_center_hour + 12.0) % 24.0) - 12.0)
    half = cfg.peak_hours / 2.0
    peak = np.clip(1.0 - np.maximum(d - half, 0.0) / 2.0, 0.0, 1.0)
    return 0.4 * slow + 0.6 * peak


def diurnal_utilization(
    cfg: InferenceConfig, duration_s: float, rng: np.random.Generator
) -> np.ndarray:
    """Generate u(t) samples every ``cfg.sample_seconds`` covering ``duration_s`` seconds.

    The mean shape is scaled so that its daily mean is ``cfg.mean`` and its max/min ratio is
    ``cfg.peak_to_trough``; each day gets a multiplicative factor ``1 + N(0, day_noise)`` and
    each sample additive ``N(0, sample_noise)`` noise. Values are clipped to [0, 1].
    """
    n = int(math.ceil(max(duration_s, 1.0) / cfg.sample_seconds)) + 1
    t = np.arange(n) * cfg.sample_seconds
    hours = (t / 3600.0 + cfg.start_hour) % 24.0
    # Normalise on a fine grid of one day so every scenario has the same shape.
    grid = _daily_shape(np.linspace(0.0, 24.0, 24 * 12, endpoint=False), cfg)
    smin, smax = float(grid.min()), float(grid.max())
    m_s = float(((grid - smin) / (smax - smin)).mean())
    lo = cfg.mean / (1.0 + (cfg.peak_to_trough - 1.0) * m_s)
    hi = lo * cfg.peak_to_trough
    u = lo + (hi - lo) * (_daily_shape(hours, cfg) - smin) / (smax - smin)
    days = (t / 86400.0).astype(np.int64)
    day_factor = 1.0 + cfg.day_noise * rng.standard_normal(int(days.max()) + 1)
    u = u * day_factor[days] + cfg.sample_noise * rng.standard_normal(n)
    return np.clip(u, 0.0, 1.0)


def load_utilization_csv(path: str | Path, sample_seconds: float = 300.0) -> np.ndarray:
    """Read a ``time,utilization`` CSV (seconds, fraction in [0, 1]) and resample it.

    Returns the series at ``sample_seconds`` spacing from time 0, holding each value until the
    next row (step interpolation). Errors name the file, line and column.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: utilization CSV not found")
    times: list[float] = []
    vals: list[float] = []
    with open(p, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        for col in ("time", "utilization"):
            if col not in fields:
                raise ConfigError(
                    f"{p}: missing column '{col}' (found {fields}); the file needs a header "
                    "'time,utilization' with time in seconds and utilization in [0, 1]"
                )
        for lineno, row in enumerate(reader, start=2):
            try:
                t = float(row["time"])
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{p}:{lineno}: column 'time': not a number: {row['time']!r}"
                ) from None
            try:
                u = float(row["utilization"])
            except (TypeError, ValueError):
                raise ConfigError(
                    f"{p}:{lineno}: column 'utilization': not a number: {row['utilization']!r}"
                ) from None
            if not math.isfinite(t):  # was: a NaN/inf time failed later with no file or line
                raise ConfigError(f"{p}:{lineno}: column 'time': {row['time']!r} is not a finite number of seconds")
            if u != u:
                raise ConfigError(f"{p}:{lineno}: column 'utilization': {row['utilization']!r} is not a number; "
                                  "give a fraction in [0, 1]")
            if not 0.0 <= u <= 1.0:
                raise ConfigError(
                    f"{p}:{lineno}: column 'utilization': {u} is outside [0, 1]; "
                    "give a fraction, not a percentage"
                )
            if times and t <= times[-1]:
                raise ConfigError(f"{p}:{lineno}: column 'time': rows must be sorted and unique")
            times.append(t)
            vals.append(u)
    if not times:
        raise ConfigError(f"{p}: no rows; the utilization series is empty")
    t_arr = np.asarray(times) - times[0]
    n = int(t_arr[-1] // sample_seconds) + 1
    grid = np.arange(n) * sample_seconds
    idx = np.searchsorted(t_arr, grid, side="right") - 1
    return np.asarray(vals)[np.clip(idx, 0, None)]


class LoanController:
    """Turns u(t) into the number of loanable inference servers at each time.

    Beyond the series' end the last day is repeated.
    """

    def __init__(self, util: np.ndarray, n_inf: int, headroom: float, sample_seconds: float):
        try:
            self.util = np.asarray(util, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"utilization must be a 1-D series of fractions in [0, 1], got {type(util).__name__}"
            ) from None
        u = self.util
        if u.ndim != 1 or u.size == 0 or not bool(((u >= 0.0) & (u <= 1.0)).all()):
            bad = "empty" if u.size == 0 else (
                f"{u.ndim}-D" if u.ndim != 1 else "a value outside [0, 1] (or NaN)"
            )
            raise ValueError(
                f"utilization must be a non-empty 1-D series of fractions in [0, 1] (one per "
                f"sample_seconds); got {bad}"
            )
        self.n_inf = int(n_inf)
        self.headroom = float(headroom)
        self.sample_seconds = float(sample_seconds)
        need = np.ceil(self.n_inf * np.minimum(1.0, self.util + self.headroom) - 1e-9)
        self.loanable_series = (self.n_inf - need).astype(np.int64)
        self._day = max(1, int(round(86400.0 / self.sample_seconds)))
        # plain-list copies for the per-round scalar look-ups (faster than numpy indexing)
        self._util_list: list[float] = self.util.tolist()
        self._loanable_list: list[int] = self.loanable_series.tolist()
        self._n = len(self._util_list)
        # run_end[i]: the first index after i whose loanable count differs from i's (n if none)
        ls = self.loanable_series
        starts = np.flatnonzero(ls[1:] != ls[:-1]) + 1  # where a new run begins
        self._run_end: list[int] = np.append(starts, self._n)[
            np.searchsorted(starts, np.arange(self._n), side="right")].tolist()

    def _index(self, t: float) -> int:
        i = int(t // self.sample_seconds)
        n = self._n
        if i >= n:
            period = min(self._day, n)
            i = n - period + (i - n) % period
        return i

    def utilization(self, t: float) -> float:
        return self._util_list[self._index(t)]

    def loanable(self, t: float) -> int:
        return self._loanable_list[self._index(t)]

    def steady_rounds(self, t0: float, dt: float, k_max: int, cur: int) -> int:
        """The least ``k`` in ``[0, k_max)`` with ``loanable(t0 + k dt) != cur``, else ``k_max``
        (what ``k = 0; while k < k_max and loanable(t0 + k * dt) == cur: k += 1`` gives), without
        a look-up per round: inside the series, the rounds that land on one run of equal counts
        are passed in one jump (the sample index ``(t0 + k dt) // sample_seconds`` never
        decreases with ``k``). ``dt > 0``."""
        ss, n, lo, run_end = self.sample_seconds, self._n, self._loanable_list, self._run_end
        k = 0
        while k < k_max:
            t = t0 + k * dt
            i = int(t // ss)
            if i >= n:  # past the series' end (the repeated day): one round at a time
                if self.loanable(t) != cur:
                    return k
                k += 1
                continue
            if lo[i] != cur:
                return k
            e = run_end[i]
            if e >= n:  # the run reaches the end: the rounds past it are looked up one by one
                k += 1
                continue
            # the first k2 > k whose round lands at index e or later; every round before it
            # lands in [i, e), where the count is cur
            k2 = max(k + 1, math.ceil((e * ss - t0) / dt))
            while k2 - 1 > k and int((t0 + (k2 - 1) * dt) // ss) >= e:
                k2 -= 1
            while k2 < k_max and int((t0 + k2 * dt) // ss) < e:
                k2 += 1
            k = k2
        return k_max
