"""From a scenario and a seed to a ready :class:`~aryl_gym.sim.engine.Simulator`.

One seed gives one episode, bit for bit: the trace and the inference series are drawn from
independent child generators of ``numpy.random.SeedSequence(seed)``, and the simulator's
``policy_rng`` from a third.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aryl_gym.config import ConfigError, ScenarioConfig, load_scenario
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.loaning import diurnal_utilization, load_utilization_csv
from aryl_gym.workload.generator import expected_batches, generate_jobs
from aryl_gym.workload.paths import resolve_data_path


@dataclass
class Episode:
    """A drawn episode: the trace and the inference series, before any policy runs."""

    config: ScenarioConfig
    jobs: list[JobSpec]
    utilization: np.ndarray
    seed: int | None

    def simulator(self) -> Simulator:
        return Simulator(self.config, self.jobs, self.utilization, seed=self.seed)


def _seed_streams(seed: int | None) -> list[np.random.Generator]:
    ss = np.random.SeedSequence(seed)
    return [np.random.default_rng(s) for s in ss.spawn(3)]


#: the most samples of a generated inference series (100,000,000: 950 years at 300 s) and the
#: latest time it may reach; beyond them numpy failed ("Maximum allowed size exceeded", an
#: IndexError) instead of a message naming the keys
MAX_SERIES_SAMPLES = 100_000_000
MAX_SERIES_S = 1e15


def _check_series(cfg: ScenarioConfig, span_s: float, extra_s: float) -> None:
    ss = float(cfg.inference.sample_seconds)
    cover = max(float(span_s) + extra_s, 1.0)
    if cover / ss + 2 <= MAX_SERIES_SAMPLES and (cover + ss) <= MAX_SERIES_S:
        return
    if ss > MAX_SERIES_S / 2:
        raise ConfigError(f"{cfg.source}: inference.sample_seconds {ss:g} is too long (a sample every "
                          f"{ss / 86400 / 365:.3g} years); give it in seconds, e.g. 300 (5 minutes)")
    raise ConfigError(
        f"{cfg.source}: the jobs' arrivals span {span_s / 86400:.4g} days, so the inference series would "
        f"need {cover / ss:.3g} samples of inference.sample_seconds {ss:g} (at most "
        f"{MAX_SERIES_SAMPLES:,}); check workload.burst_gap_s, workload.duration_hours or the trace's "
        "times, or raise inference.sample_seconds")


def _beside_scenario(cfg: ScenarioConfig, path: str, key: str) -> str:
    """A hint for a relative data path that is not found but sits beside the scenario file (was:
    only "relative data path but no data root", or a data-root path that does not exist)."""
    p = Path(path)
    src = Path(cfg.source)
    try:
        if p.is_absolute() or not src.is_file() or not (src.parent / p).is_file():
            return ""
    except OSError:
        return ""
    return (f". Relative paths in a scenario are read from the working directory or the data root, "
            f"not from the scenario file's folder; the file is at {src.parent / p}: set {key} to "
            f"{str((src.parent / p).resolve())!r} (an absolute path) or pass --data-root")


def utilization_for(
    cfg: ScenarioConfig, span_s: float, rng: np.random.Generator, data_root: str | None = None
) -> np.ndarray:
    inf = cfg.inference
    if inf.mode != "csv":
        _check_series(cfg, span_s, 0.0 if inf.mode == "constant" else 7 * 86400.0)
    if inf.mode == "constant":
        n = int(span_s // inf.sample_seconds) + 2
        return np.full(n, float(inf.mean))
    if inf.mode == "csv":
        try:
            path = resolve_data_path(inf.csv or "", data_root)
        except ConfigError as exc:
            raise ConfigError(f"{exc}{_beside_scenario(cfg, inf.csv or '', 'inference.csv')}") from None
        return load_utilization_csv(path, inf.sample_seconds)
    # Cover the arrivals plus a generous tail; the controller repeats the last day beyond it.
    return diurnal_utilization(inf, span_s + 7 * 86400.0, rng)


def load_jobs(cfg: ScenarioConfig, rng: np.random.Generator, data_root: str | None = None):
    """The scenario's trace: generated, or loaded when ``workload.trace`` is set."""
    if cfg.workload.trace:
        # traces imports pyarrow: only when a trace is read
        from aryl_gym.workload.traces import load_scenario_trace

        return load_scenario_trace(cfg, rng, data_root=data_root)
    return generate_jobs(cfg, rng)


#: a generated scenario whose seeds draw no job more often than this is warned about (an env's
#: ``reset(seed=...)`` raises ConfigError for such a seed)
EMPTY_SEED_WARN = 1e-3


def warn_if_seeds_may_be_empty(cfg: ScenarioConfig) -> float:
    """Warn (``UserWarning``) when ``cfg``'s generated workload is so small that a noticeable share
    of seeds draws no job (:func:`make_episode` then raises ConfigError for them, so a training
    loop would stop at a random reset); returns that share (0 with ``num_jobs`` or a trace)."""
    lam = expected_batches(cfg)
    share = math.exp(-lam) if lam is not None else 0.0
    if share > EMPTY_SEED_WARN:
        warnings.warn(
            f"{cfg.source}: an episode draws {lam:.2g} batches of jobs on average, so about "
            f"{100 * share:.2g}% of seeds draw no job and reset() raises ConfigError for them; raise "
            "workload.load or workload.duration_hours, or set workload.num_jobs", UserWarning, stacklevel=3)
    return share


def make_episode(
    scenario: str | Path | ScenarioConfig,
    seed: int | None = 0,
    jobs: Sequence[JobSpec] | None = None,
    data_root: str | None = None,
) -> Episode:
    """Draw the episode of ``scenario`` for ``seed`` (or use the given ``jobs``)."""
    cfg = scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario)
    r_jobs, r_util, _ = _seed_streams(seed)
    job_list = list(jobs) if jobs is not None else load_jobs(cfg, r_jobs, data_root)
    if not job_list and jobs is None and not cfg.workload.trace:
        # a generated workload that drew no job (was: the simulator's message about a trace file)
        w, c = cfg.workload, cfg.cluster
        raise ConfigError(
            f"{cfg.source}: the generated workload has no job for seed {seed} (load {w.load:g} over "
            f"{w.duration_hours:g} h on {c.train_gpus} training GPUs); raise workload.load or "
            "workload.duration_hours, or set workload.num_jobs"
        )
    span = max((j.submit for j in job_list), default=0.0)
    util = utilization_for(cfg, span, r_util, data_root)
    return Episode(cfg, job_list, util, seed)


def make_simulator(
    scenario: str | Path | ScenarioConfig,
    seed: int | None = 0,
    jobs: Sequence[JobSpec] | None = None,
    data_root: str | None = None,
) -> Simulator:
    return make_episode(scenario, seed, jobs, data_root).simulator()


def fresh_future(
    sim: Simulator, seed: int, data_root: str | None = None
) -> tuple[list[JobSpec], np.ndarray | None]:
    """A fresh future for ``sim`` from the episode of ``sim.config`` drawn for ``seed``.

    Returns the jobs of that episode submitted after ``sim.now`` and its inference series
    (None when the scenario's series is not drawn: ``constant`` and ``csv`` modes), ready for
    :meth:`Simulator.replace_future`. This samples the arrival process afresh from ``now`` on,
    not conditioned on the past: a batch of jobs in progress at ``now`` is cut, and the hourly
    rate multiplier and the inference noise are drawn anew. Two calls with the same seed give
    the same future.

    Raises:
        ValueError: the scenario replays a trace file (``workload.trace``): its future is fixed.
    """
    cfg = sim.config
    if cfg.workload.trace:
        raise ValueError(
            f"{cfg.source}: the workload replays the trace {cfg.workload.trace!r}, which has one "
            "future only; fresh futures need a generated workload (no workload.trace)"
        )
    r_jobs, r_util, _ = _seed_streams(seed)
    jobs = [j for j in generate_jobs(cfg, r_jobs) if j.submit > sim.now + 1e-9]
    if cfg.inference.mode != "diurnal":
        return jobs, None
    span = max([sim.now] + [j.submit for j in jobs[-1:]])
    return jobs, utilization_for(cfg, span, r_util, data_root)
