"""World v1's data-fitted knobs: arrival burstiness and elastic range (SPEC "World v1").

Every default here is *fitted from public data*, never chosen by looking at a policy's result.
``aryl-gym fit-world`` re-runs the fits on ``../shared/traces`` and prints them beside the
defaults in :class:`aryl_gym.config.WorkloadConfig`, so anyone can check where a number came from.

**Arrivals** (``traces/pollux-philly/traces/philly.csv``, 82,247 submissions over 109 days). Jobs
come in *batches*: a run of submissions less than ``BATCH_GAP_S`` = 10 s apart is one batch (a
sweep, a retry loop). Fitted by :func:`fit_arrivals`:

* batch size: a Zipf law ``P(S = s) ~ s^-alpha`` on ``1..s_max``, ``alpha`` by maximum
  likelihood, ``s_max`` the largest batch seen, fitted apart for batches of 1-GPU jobs and of
  multi-GPU jobs (large batches are sweeps of 1-GPU jobs);
* the gap between submissions inside a batch: its mean (seconds; drawn exponential);
* jobs of a batch share their shape (95% of the trace's multi-job batches have one GPU count);
  their log running times scatter around the batch's by the within-batch standard deviation;
* batch *starts* form a Cox process: a Poisson process whose hourly rate is multiplied by
  ``exp(X_day + X_hour)``, two stationary Gaussian AR(1) processes, one over days and one over
  hours (the trace's hourly counts correlate 0.65 at one hour, and still 0.2-0.3 at 12-48 hours:
  two time scales). Their standard deviations and lag-one correlations come from the moments of
  the trace's daily and hourly *job* counts with the compound-Poisson part of the fitted batch
  sizes removed (method of moments for a log-normal Cox process).

:func:`arrival_stats` computes the three statistics ``calibrate`` compares (hourly count
coefficient of variation, share of gaps under 10 s, 99th-percentile hour over the mean hour).

**Elastic range** (Pollux profiles ``traces/pollux-philly/traces/<app>/scalability.csv``,
measured at a fixed local batch, the regime the paper's elastic jobs scale in). For each
application and local batch size, the largest growth factor ``r`` (a power of two) at which
throughput per GPU stays at or above ``EFFICIENCY_FLOOR`` = 0.8 of its value at the smallest
measured size; :func:`fit_elastic_range` reports them and the median over the six applications.
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Submissions closer than this (seconds) belong to one batch.
BATCH_GAP_S = 10.0
#: Throughput per GPU, relative to the smallest measured size, below which a job no longer
#: "scales well" (paper: limited elasticity).
EFFICIENCY_FLOOR = 0.8
PHILLY_CSV = "traces/pollux-philly/traces/philly.csv"
POLLUX_APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


# ----------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------


def arrival_stats(times: np.ndarray) -> dict[str, float]:
    """The burstiness statistics of submission times (seconds, any order).

    ``hourly_cv``: coefficient of variation of per-hour counts (hours from the first submission
    to the last, empty hours included); ``gap_lt_10s``: share of inter-arrival gaps under 10 s;
    ``p99_hour_over_mean``: 99th-percentile hourly count over the mean; plus the mean hourly
    count and the number of submissions.
    """
    t = np.sort(np.asarray(times, dtype=np.float64))
    if len(t) < 2:
        return {"jobs": float(len(t)), "hourly_mean": math.nan, "hourly_cv": math.nan,
                "gap_lt_10s": math.nan, "p99_hour_over_mean": math.nan}
    t = t - t[0]
    h = np.bincount((t // 3600.0).astype(np.int64)).astype(np.float64)
    gaps = np.diff(t)
    return {
        "jobs": float(len(t)),
        "hourly_mean": float(h.mean()),
        "hourly_cv": float(h.std() / h.mean()),
        "gap_lt_10s": float(np.mean(gaps < BATCH_GAP_S)),
        "p99_hour_over_mean": float(np.percentile(h, 99) / h.mean()),
    }


def batches(times: np.ndarray, gap_s: float = BATCH_GAP_S) -> list[np.ndarray]:
    """Indices (into the sorted order) of each batch: runs of gaps below ``gap_s``."""
    t = np.sort(np.asarray(times, dtype=np.float64))
    if len(t) == 0:
        return []
    return np.split(np.arange(len(t)), np.where(np.diff(t) >= gap_s)[0] + 1)


# ----------------------------------------------------------------------------------------------
# Fits
# ----------------------------------------------------------------------------------------------


def zipf_pmf(alpha: float, s_max: int) -> np.ndarray:
    """``P(S = s)`` for ``s = 1..s_max`` (index 0 is ``s = 1``)."""
    s = np.arange(1, int(s_max) + 1, dtype=np.float64)
    p = s ** (-float(alpha))
    return p / p.sum()


#: the exponents :func:`fit_zipf` searches (a Zipf law on a finite range allows any alpha > 0;
#: burst sizes of real traces fall between these)
ZIPF_ALPHA_BOUNDS = (1.01, 6.0)


def fit_zipf(sizes: np.ndarray, s_max: int) -> float:
    """Maximum-likelihood exponent of a Zipf law on ``1..s_max``, in :data:`ZIPF_ALPHA_BOUNDS`.

    The negative log-likelihood per observation, ``alpha mean(log s) + log sum_k k^-alpha``, is
    convex in ``alpha``; ``scipy.optimize.minimize_scalar`` (bounded Brent) finds its minimum
    (it replaced a hand-written golden-section search; the two agree to 1e-7 on the Philly
    batch sizes, tests/test_world_v1.py)."""
    # scipy.optimize: imported when a fit runs
    from scipy.optimize import minimize_scalar

    sizes = np.asarray(sizes, dtype=np.float64)
    mean_log = float(np.log(sizes).mean())
    logs = np.log(np.arange(1, int(s_max) + 1, dtype=np.float64))

    def nll(a: float) -> float:  # per observation
        return a * mean_log + math.log(float(np.exp(-a * logs).sum()))

    res = minimize_scalar(nll, bounds=ZIPF_ALPHA_BOUNDS, method="bounded", options={"xatol": 1e-10})
    return float(res.x)


@dataclass(frozen=True)
class ArrivalFit:
    """Fitted batch-arrival parameters (see the module docstring)."""

    size_alpha: float
    size_max: int
    multi_alpha: float
    multi_max: int
    single_share: float
    gap_s: float
    rate_sigma: float
    rate_rho: float
    day_sigma: float
    day_rho: float
    duration_sigma: float
    batches: int
    jobs: int


def _lognormal_ar(var_m: float, corr_m: float) -> tuple[float, float]:
    """(sigma, rho) of a Gaussian AR(1) ``X`` with ``Var(exp X) / E[exp X]^2 = var_m`` and
    lag-one correlation of ``exp X`` equal to ``corr_m``."""
    var_m = max(var_m, 1e-9)
    s2 = math.log1p(var_m)
    c = min(max(corr_m, 0.0), 0.999999)
    rho = math.log1p(c * (math.exp(s2) - 1.0)) / s2
    return math.sqrt(s2), min(max(rho, 0.0), 0.999)


def _modulation_moments(counts: np.ndarray, per_batch_var: float) -> tuple[float, float]:
    """Relative variance and lag-one correlation of the rate multiplier behind ``counts``.

    Counts of jobs per period are a compound Cox process: ``Var(N) = mean x E[S^2] / E[S] +
    mean^2 x Var(m)`` (``per_batch_var`` = ``E[S^2] / E[S]``); the compound-Poisson part does not
    correlate across periods.
    """
    mu = float(counts.mean())
    var_m = max((float(counts.var()) - mu * per_batch_var) / mu**2, 1e-9)
    cov1 = float(np.mean((counts[:-1] - mu) * (counts[1:] - mu))) / mu**2
    return var_m, cov1 / var_m


def fit_arrivals(
    times: np.ndarray, durations: np.ndarray | None = None, gpus: np.ndarray | None = None
) -> ArrivalFit:
    """Fit the batch-arrival model to submission times (running times and GPU counts give the
    within-batch scatter and the per-class batch sizes).

    Batch sizes are fitted separately for batches of 1-GPU jobs and of multi-GPU jobs (a batch's
    class is its median GPU count): in Philly the large batches are sweeps of 1-GPU jobs (97% of
    the batches of 5 or more), while multi-GPU jobs come mostly alone.

    The rate multiplier is ``exp(X_day + X_hour)``: a day-level AR(1) fitted on daily job
    counts, and an hour-level AR(1) carrying the rest of the hourly counts' variance and
    lag-one correlation (method of moments, with the compound-Poisson noise of the fitted batch
    sizes removed).
    """
    order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
    t = np.asarray(times, dtype=np.float64)[order]
    t = t - t[0]
    bs = batches(t)
    sizes = np.array([len(b) for b in bs])
    if gpus is not None:
        gg = np.asarray(gpus)[order]
        single = np.array([float(np.median(gg[b])) <= 1.0 for b in bs])
    else:
        single = np.ones(len(bs), dtype=bool)
    s_max = int(sizes[single].max())
    alpha = fit_zipf(sizes[single], s_max)
    if (~single).any():
        m_max = int(sizes[~single].max())
        m_alpha = fit_zipf(sizes[~single], m_max)
    else:
        m_max, m_alpha = s_max, alpha
    single_share = float(single.mean())
    gaps = np.diff(t)
    inside = gaps[gaps < BATCH_GAP_S]
    gap_s = float(inside.mean()) if len(inside) else 1.0

    # E[S^2] / E[S] of the fitted mixture of the two classes
    moments = []
    for a_, mx in ((alpha, s_max), (m_alpha, m_max)):
        pmf = zipf_pmf(a_, mx)
        sz = np.arange(1, mx + 1, dtype=np.float64)
        moments.append(((sz * pmf).sum(), (sz * sz * pmf).sum()))
    e1 = single_share * moments[0][0] + (1 - single_share) * moments[1][0]
    e2 = single_share * moments[0][1] + (1 - single_share) * moments[1][1]
    per_batch_var = float(e2 / e1)
    n_hour = np.bincount((t // 3600.0).astype(np.int64)).astype(np.float64)
    n_day = np.bincount((t // 86400.0).astype(np.int64)).astype(np.float64)
    v_tot, c_tot = _modulation_moments(n_hour, per_batch_var)
    v_day, c_day = _modulation_moments(n_day, per_batch_var)
    v_day = min(v_day, v_tot)
    day_sigma, day_rho = _lognormal_ar(v_day, c_day)
    # hour part u: E[m^2] = E[m_day^2] E[u^2]; E[m_h m_h+1] ~ E[m_day^2] E[u_h u_h+1]
    v_u = (1.0 + v_tot) / (1.0 + v_day) - 1.0
    cov_u = (1.0 + c_tot * v_tot) / (1.0 + v_day) - 1.0
    rate_sigma, rate_rho = _lognormal_ar(v_u, cov_u / max(v_u, 1e-9))
    dsig = math.nan
    if durations is not None:
        d = np.log(np.maximum(np.asarray(durations, dtype=np.float64)[order], 1.0))
        within = [float(d[b].std()) for b in bs if len(b) > 1]
        dsig = float(np.mean(within)) if within else 0.0
    return ArrivalFit(
        size_alpha=round(alpha, 3),
        size_max=s_max,
        multi_alpha=round(m_alpha, 3),
        multi_max=m_max,
        single_share=round(single_share, 4),
        gap_s=round(gap_s, 2),
        rate_sigma=round(rate_sigma, 3),
        rate_rho=round(rate_rho, 3),
        day_sigma=round(day_sigma, 3),
        day_rho=round(day_rho, 3),
        duration_sigma=round(dsig, 3) if not math.isnan(dsig) else math.nan,
        batches=len(bs),
        jobs=len(t),
    )


def _csv_records(path: str | Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` of a CSV file with a header naming ``columns``; a missing column is a
    :class:`~aryl_gym.workload.traces_formats.TraceError` naming the file and its header line."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        try:
            header = reader.fieldnames or []
            missing = [c for c in columns if c not in header]
            if missing:
                raise _bad_csv(path, 1, None, f"the header ({', '.join(header) or 'empty file'}) lacks the "
                               f"column(s) {', '.join(missing)}", f"give a header line naming {', '.join(columns)}")
            for row in reader:
                yield reader.line_num, row
        except UnicodeDecodeError as exc:  # was: a message with no file
            raise _bad_csv(path, None, None, f"not UTF-8 text (byte {exc.object[exc.start]:#04x}: {exc.reason})",
                           "save the file as UTF-8 CSV") from None
        except csv.Error as exc:  # was: a traceback
            raise _bad_csv(path, reader.line_num + 1, None, f"not a readable CSV line ({exc})",
                           "correct or remove the line") from None


def _bad_csv(path: str | Path, line: int | None, column: str | None, message: str, fix: str) -> Exception:
    # traces_formats imports pyarrow: only when a file is bad
    from aryl_gym.workload.traces_formats import TraceError

    return TraceError(path, message, fix, line=line, column=column)


def _field(path: str | Path, line: int, row: dict[str, Any], column: str, integer: bool = False,
           low: float = 0.0) -> float:
    """``row[column]`` as a finite number >= ``low`` (a whole one with ``integer``), else a
    TraceError naming the file, line and column."""
    text = row.get(column)
    try:
        v = float(text)  # type: ignore[arg-type]
        ok = math.isfinite(v) and v >= low and (not integer or v.is_integer())
    except (TypeError, ValueError):
        ok = False
    if not ok:
        kind = "a whole number" if integer else "a finite number"
        shown = "nothing (the row is short)" if text is None else repr(text)
        raise _bad_csv(path, line, column, f"expected {kind} >= {low:g}, got {shown}",
                       "correct or remove the row")
    return v


def read_philly(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Submission times (s from the first), running times (s) and GPU counts of ``philly.csv``.

    A missing column or a bad field is a :class:`~aryl_gym.workload.traces_formats.TraceError`
    (a ConfigError) naming the file, the line and the column."""
    times: list[float] = []
    durs: list[float] = []
    gpus: list[int] = []
    for line, row in _csv_records(path, ("timestamp", "duration", "num_gpus")):
        try:
            ts = _dt.datetime.strptime(row["timestamp"] or "", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise _bad_csv(path, line, "timestamp", f"expected a time 'YYYY-MM-DD HH:MM:SS', got "
                           f"{row['timestamp']!r}", "correct or remove the row") from None
        times.append(ts.replace(tzinfo=_dt.timezone.utc).timestamp())
        durs.append(_field(path, line, row, "duration"))
        gpus.append(int(_field(path, line, row, "num_gpus", integer=True, low=1)))
    if not times:
        raise _bad_csv(path, 1, None, "no data rows", "give the trace's job rows under the header")
    t = np.array(times)
    return t - t.min(), np.array(durs), np.array(gpus)


def fit_elastic_range(profiles_dir: str | Path) -> dict[str, Any]:
    """Largest power-of-two growth factor at >= ``EFFICIENCY_FLOOR`` per-GPU throughput.

    Returns ``{"per_app": {app: r}, "median": r}``; ``r`` per application is the median over its
    local batch sizes.
    """
    per_app: dict[str, float] = {}
    for app in POLLUX_APPS:
        path = Path(profiles_dir) / app / "scalability.csv"
        by_bsz: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for line, row in _csv_records(path, ("num_replicas", "local_bsz", "step_time")):
            n = int(_field(path, line, row, "num_replicas", integer=True, low=1))
            bsz = int(_field(path, line, row, "local_bsz", integer=True, low=1))
            by_bsz[bsz][n].append(_field(path, line, row, "step_time"))
        rs = []
        for runs in by_bsz.values():
            sizes = sorted(runs)
            # per-GPU throughput at fixed local batch = 1 / step_time; best placement per size
            thr = {n: 1.0 / min(runs[n]) for n in sizes}
            base = sizes[0]
            r = 1
            while True:
                nxt = r * 2
                cands = [n for n in sizes if n <= base * nxt]
                top = max(cands)
                if top < base * nxt or thr[top] / thr[base] < EFFICIENCY_FLOOR:
                    break
                if any(thr[n] / thr[base] < EFFICIENCY_FLOOR for n in cands):
                    break
                r = nxt
            rs.append(r)
        per_app[app] = float(np.median(rs))
    return {"per_app": per_app, "median": float(np.median(list(per_app.values())))}


#: ``arrival_stats`` of ``philly.csv`` (recorded so ``calibrate`` can print them without the
#: trace; ``aryl-gym fit-world`` recomputes them).
PHILLY_ARRIVAL_STATS: dict[str, float] = {
    "jobs": 82247.0,
    "span_days": 108.897,
    "hourly_mean": 31.464,
    "hourly_cv": 2.265,
    "gap_lt_10s": 0.5328,
    "p99_hour_over_mean": 12.20,
}


# ----------------------------------------------------------------------------------------------
# World v2: the goodput curves beyond the limited range (aryl_gym.sim.goodput)
# ----------------------------------------------------------------------------------------------

#: progress fractions at which the gradient noise scale is recorded
PGNS_KNOTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: PGNS cap (samples): near convergence ``grad_sqr`` vanishes and the estimate explodes
#: (deepspeech2: 10^187); above 10^8 the efficiency of every batch the profiles allow (at most
#: 32,768) is within 3e-4 of 1, so the cap changes nothing but keeps numbers finite
PGNS_CAP = 1e8
#: yolov3's largest atomic local batch (upstream applications.py); the others take the largest
#: profiled local batch
_MAX_LOCAL = {"yolov3": 8.0}
#: epochs per application (upstream applications.py): the PGNS is read over these
_MAX_EPOCHS = {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50}


def _perf_rows(folder: Path) -> np.ndarray:
    """(nodes, replicas, local batch, step time) rows of placements.csv and scalability.csv."""
    rows: list[tuple[float, float, float, float]] = []
    with open(folder / "placements.csv", newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            pl = r["placement"].strip()
            rows.append((float(len(pl)), float(sum(int(c) for c in pl)), float(r["local_bsz"]),
                         float(r["step_time"])))
    path = folder / "scalability.csv"
    for line, r in _csv_records(path, ("num_nodes", "num_replicas", "local_bsz", "step_time")):
        nodes, reps, bsz, step = (_field(path, line, r, c) for c in ("num_nodes", "num_replicas", "local_bsz",
                                                                      "step_time"))
        rows.append((nodes, reps, bsz, step))
    return np.array(rows)


def _predict_step(x: np.ndarray, nodes: np.ndarray, reps: np.ndarray, bsz: np.ndarray) -> np.ndarray:
    a_c, b_c, a_n, b_n, a_r, b_r = np.exp(x[:6])
    gamma = 1.0 + np.exp(x[6])
    t_c = a_c + b_c * bsz
    retro = np.maximum(reps - 2.0, 1e-8)
    t_n = np.where(nodes > 1, a_n + b_n * retro, np.where(reps > 1, a_r + b_r * retro, 1e-8))
    return (t_c**gamma + t_n**gamma) ** (1.0 / gamma)


def fit_app_curve(folder: str | Path) -> dict[str, Any]:
    """Fit Pollux's throughput model and PGNS trajectory to one application's profile.

    Throughput: the seven parameters ``(alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r,
    gamma)`` of the step-time model in :mod:`aryl_gym.sim.goodput`, least squares on the log
    step time of every measured (nodes, replicas, local batch) row (Pollux fits the same model
    to the same kind of measurements), from a fixed start so the fit is deterministic.
    Efficiency: the PGNS ``B0 x grad_var / grad_sqr`` of each epoch of the initial batch
    ``B0``'s validation file, read at the ``PGNS_KNOTS`` progress fractions (progress = the
    file's scale-invariant ``progress`` column over its value at the last epoch), interpolated
    in log space. The per-epoch estimates are noisy (one deepspeech2 epoch is 10^4 times its
    neighbours), so log PGNS is first fitted by least-squares isotonic regression over the
    epochs (non-decreasing: noise scales grow as training progresses, Pollux section 3.1).
    """
    # scipy.optimize only when fitting: importing it costs about 0.3 s at CLI start-up
    from scipy.optimize import isotonic_regression, least_squares

    folder = Path(folder)
    app = folder.name
    d = _perf_rows(folder)
    nodes, reps, bsz, step = d.T
    x0 = np.log(np.array([0.01, float(np.median(step / np.maximum(bsz, 1))), 0.05, 0.005,
                          0.02, 0.002, 0.5]))
    res = least_squares(lambda x: np.log(_predict_step(x, nodes, reps, bsz)) - np.log(step), x0,
                        method="lm", xtol=1e-12, ftol=1e-12, max_nfev=20000)
    a_c, b_c, a_n, b_n, a_r, b_r = (float(v) for v in np.exp(res.x[:6]))
    gamma = float(1.0 + np.exp(res.x[6]))
    vals = sorted(int(p.stem.split("-")[-1]) for p in folder.glob("validation-*.csv"))
    b0 = vals[0]
    with open(folder / f"validation-{b0}.csv", newline="", encoding="utf-8") as fh:
        epochs = list(csv.DictReader(fh))[: _MAX_EPOCHS.get(app, 10**9)]
    prog = np.array([float(r["progress"]) for r in epochs])
    pg = np.array([b0 * float(r["grad_var"]) / max(float(r["grad_sqr"]), 1e-300) for r in epochs])
    frac = prog / prog[-1]
    mono = isotonic_regression(np.log(pg)).x
    knots = np.minimum(np.exp(np.interp(PGNS_KNOTS, frac, mono)), PGNS_CAP)
    local = bsz
    rmse = float(np.sqrt(np.mean(res.fun**2)))
    return {
        "params": (a_c, b_c, a_n, b_n, a_r, b_r, gamma),
        "batches": (float(b0), float(local.min()), float(_MAX_LOCAL.get(app, local.max())),
                    float(vals[-1])),
        "knots": tuple((float(p), float(v)) for p, v in zip(PGNS_KNOTS, knots)),
        "rmsle": rmse,
        "rows": int(len(step)),
    }


def fit_app_curves(profiles_dir: str | Path) -> dict[str, dict[str, Any]]:
    """:func:`fit_app_curve` for each of the six Pollux applications."""
    return {app: fit_app_curve(Path(profiles_dir) / app) for app in POLLUX_APPS}


# ----------------------------------------------------------------------------------------------
# World v2: the elastic families' count share, from philly.csv
# ----------------------------------------------------------------------------------------------

#: the paper's GPU-time share of the elastic families ("36% of training cluster resources")
ELASTIC_GPU_SHARE = 0.36


def fit_elastic_count_share(durs: np.ndarray, gpus: np.ndarray, long_s: float = 3600.0) -> dict[str, float]:
    """The count share of elastic jobs implied by philly.csv under two readings.

    The paper gives the elastic families' share by resources only (36% of GPU-time, 14.2 h on
    average) and says they are "large jobs"; Philly records no model family. Both readings
    assume the families are spread over the distributed jobs in proportion to GPU-time:

    * ``multi_gpu``: the elastic families are a GPU-time-proportional subset of the multi-GPU
      jobs (the data-parallel ones): count share = 0.36 / (their GPU-time share) x (their count
      share);
    * ``long_multi_gpu``: the same over multi-GPU jobs that ran at least ``long_s`` (1 h).

    Returns both, with the figures they come from. Raises ``ValueError`` on empty or
    mismatched columns, negative or non-finite values, and when a reading selects no GPU-time
    (no multi-GPU job, or none that ran ``long_s``): its share would be 0 / 0.
    """
    durs = np.asarray(durs, dtype=np.float64)
    gpus = np.asarray(gpus, dtype=np.float64)
    if durs.ndim != 1 or durs.shape != gpus.shape or len(durs) == 0:
        raise ValueError(f"durs and gpus must be two non-empty 1-D columns of one length, got shapes "
                         f"{durs.shape} and {gpus.shape}")
    if not (np.isfinite(durs).all() and np.isfinite(gpus).all()) or (durs < 0).any() or (gpus < 0).any():
        raise ValueError("durs and gpus must be finite and >= 0 (drop or repair the trace's bad rows)")
    gt = durs * gpus
    tot = float(gt.sum())
    n = len(durs)
    out: dict[str, float] = {}
    for name, m in (("multi_gpu", gpus >= 2), ("long_multi_gpu", (gpus >= 2) & (durs >= long_s))):
        if float(gt[m].sum()) <= 0.0:
            raise ValueError(f"reading {name!r}: no GPU-time in the jobs it selects (multi-GPU"
                             f"{f', at least {long_s:g} s' if name.startswith('long') else ''}); "
                             "the count share is undefined for this trace")
        share_t = float(gt[m].sum()) / tot
        share_n = float(m.sum()) / n
        out[name] = ELASTIC_GPU_SHARE / share_t * share_n
        out[f"{name}_gpu_time_share"] = share_t
        out[f"{name}_count_share"] = share_n
        out[f"{name}_mean_hours"] = float(durs[m].mean()) / 3600.0
    return out
