"""Every registered reference policy on tiny degenerate worlds (review).

Each episode must either end (every job done, or truncated / stalled with the flag set) with
every invariant of :mod:`aryl_gym.sim.invariants` holding after every round, and no NaN in a
metric of an episode that finished every job; or the simulator must refuse the world at once
with a :class:`~aryl_gym.errors.ConfigError` naming the cause. No episode may hang: each runs
under a round cap (``sim.max_rounds``) and a wall-clock guard (SIGALRM).

The exact multiple-choice knapsack (tests/test_knapsack.py) and the reclaim rules
(tests/test_reclaim.py: the exhaustive optimum against ``itertools.combinations``, the MILP
against the exhaustive one) already have brute-force tests; they are not repeated here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from aryl_gym.agents.base import make_policy, policy_names

from aryl_gym.config import ConfigError, ScenarioConfig, scenario_from_dict
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.invariants import InvariantChecker
from aryl_gym.sim.jobs import JobSpec
from tests.helpers import job

POLICIES = policy_names()
MAX_ROUNDS = 3000


class _Hang(Exception):
    """The wall-clock guard fired: the episode did not end in time."""


@contextlib.contextmanager
def _guard(seconds: float) -> Iterator[None]:
    """Raise :class:`_Hang` if the block runs longer than ``seconds`` of wall time."""

    def _fire(signum, frame):  # type: ignore[no-untyped-def]
        raise _Hang(f"no end after {seconds} s of wall time")

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)


def _cfg(
    train_servers: int = 2,
    train_gpus: int = 4,
    inf_servers: int = 2,
    inf_gpus: int = 4,
    sample_seconds: float = 300.0,
    **sim: object,
) -> ScenarioConfig:
    return scenario_from_dict(
        {
            "name": "review",
            "cluster": {
                "train_servers": train_servers,
                "train_gpus_per_server": train_gpus,
                "inf_servers": inf_servers,
                "inf_gpus_per_server": inf_gpus,
            },
            "inference": {
                "mode": "constant", "mean": 0.0, "headroom": 0.0, "sample_seconds": sample_seconds,
            },
            "sim": {"interval": 60.0, "max_rounds": MAX_ROUNDS, **sim},
        }
    )


def _ela(i: int, work: float, w: int = 4, g: int = 1, submit: float = 0.0) -> JobSpec:
    """An elastic, type-agnostic job of 1..w workers (may run on loaned servers)."""
    return job(i, submit=submit, work=work, g=g, w=w, w_min=1, elastic=True, ta=True)


FLIP = [0.0, 1.0] * 1000  # with 60 s samples: everything loanable, nothing, ... every round

# name -> (config, jobs, utilization (constant or series)); every world finishes every job
WORLDS: dict[str, Callable[[], tuple[ScenarioConfig, list[JobSpec], float | list[float]]]] = {
    "one-job": lambda: (_cfg(), [job(0, work=600.0)], 0.0),
    "same-instant": lambda: (
        _cfg(),
        [job(i, work=300.0 * (i + 1), w=2, w_min=1 if i % 3 == 0 else 2, elastic=i % 3 == 0)
         for i in range(6)],
        0.0,
    ),
    "all-inelastic": lambda: (_cfg(), [job(i, submit=10.0 * i, work=500.0, g=2, w=2) for i in range(5)], 0.0),
    "elastic-wmin-eq-wmax": lambda: (
        _cfg(), [job(i, submit=5.0 * i, work=800.0, w=2, w_min=2, elastic=True, ta=True) for i in range(5)], 0.0,
    ),
    "no-inference-servers": lambda: (_cfg(inf_servers=0), [_ela(i, 600.0) for i in range(4)], 0.0),
    "inference-100pct": lambda: (_cfg(), [_ela(i, 600.0) for i in range(4)], 1.0),
    "inference-0pct": lambda: (_cfg(), [_ela(i, 6000.0) for i in range(4)], 0.0),
    "inference-flips-every-round": lambda: (_cfg(sample_seconds=60.0), [_ela(i, 3000.0) for i in range(4)], FLIP),
    "one-server-each": lambda: (_cfg(train_servers=1, inf_servers=1), [_ela(i, 600.0, w=2) for i in range(3)], 0.0),
    "job-fills-the-pool": lambda: (_cfg(), [job(0, work=600.0, g=4, w=2), job(1, work=60.0)], 0.0),
    "tiny-work": lambda: (_cfg(), [_ela(i, 1e-6, w=2) for i in range(3)], 0.0),
    "w_max-far-beyond-cluster": lambda: (_cfg(), [_ela(i, 6000.0, w=100) for i in range(2)], 0.0),
    "8-gpu-workers-4-gpu-loans": lambda: (
        _cfg(train_gpus=8, inf_gpus=4), [_ela(i, 1200.0, g=8) for i in range(3)], 0.0,
    ),
    "8-gpu-workers-4-gpu-loans-flip": lambda: (
        _cfg(train_gpus=8, inf_gpus=4, sample_seconds=60.0), [_ela(i, 1200.0, g=8) for i in range(3)], FLIP,
    ),
    "training-server-plus-many-loans": lambda: (
        _cfg(train_servers=1, inf_servers=3), [_ela(i, 3000.0) for i in range(4)], 0.0,
    ),
    "late-single-arrival": lambda: (_cfg(), [job(0, submit=9_000.0, work=120.0)], 0.0),
}


def _util(u: float | list[float]) -> np.ndarray:
    return np.full(2000, float(u)) if isinstance(u, (int, float)) else np.asarray(u, dtype=float)


def _run(cfg: ScenarioConfig, jobs: list[JobSpec], util: float | list[float], name: str, wall: float = 5.0):
    sim = Simulator(cfg, jobs, _util(util), seed=0)
    chk = InvariantChecker()
    with _guard(wall):
        res = sim.run(make_policy(name), on_round=chk)
    return sim, res, chk


def _nan_metrics(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [k for k, v in dataclasses.asdict(res).items() if isinstance(v, float) and math.isnan(v)]


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_every_policy_finishes_a_degenerate_world(world: str) -> None:
    cfg, jobs, util = WORLDS[world]()
    bad: list[str] = []
    reclaimed = 0
    for name in POLICIES:
        try:
            sim, res, chk = _run(cfg, jobs, util, name)
        except Exception as exc:  # noqa: BLE001 - collected, named with the policy below
            bad.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        why = []
        if not sim.done:
            why.append(f"{res.jobs_completed}/{res.jobs_total} done after {sim.round_index} rounds "
                       f"(stalled={res.stalled}, thrashing={res.thrashing}, truncated={res.truncated})")
        if chk.rounds < 1 or not sim.now > 0.0:
            why.append(f"the clock did not move ({chk.rounds} rounds, t={sim.now})")
        if sim.done and _nan_metrics(res):
            why.append(f"NaN metrics on a finished episode: {_nan_metrics(res)}")
        if why:
            bad.append(f"{name}: " + "; ".join(why))
        reclaimed += res.reclaimed_servers
    assert not bad, "\n".join(bad)
    if "flip" in world:  # the world is as hostile as meant: loaning policies saw reclaims
        assert reclaimed > 0


@pytest.mark.parametrize("name", POLICIES)
def test_horizon_shorter_than_one_round(name: str) -> None:
    """``horizon_hours`` of 3.6 s with 60 s rounds: one round, then truncated; the unfinished
    job's metrics are NaN only with ``truncated`` set (not silently)."""
    sim, res, chk = _run(_cfg(horizon_hours=0.001), [job(0, work=600.0)], 0.0, name)
    assert chk.rounds == 1 and sim.round_index == 1 and sim.now == 60.0
    assert res.truncated and not sim.done and res.jobs_completed == 0
    assert res.failed == 1
    nans = set(_nan_metrics(res))
    assert "makespan" in nans and "avg_jct_finished" in nans
    assert math.isfinite(res.avg_jct)  # the unfinished job, censored at the end


@pytest.mark.parametrize("name", POLICIES)
def test_huge_work_is_cut_by_the_round_cap(name: str) -> None:
    """A job of 1e8 s next to a short one (100 s): the short one finishes, the cap truncates the rest
    (not a hang: the clock moves every round). Pollux decides every round: fewer rounds."""
    cfg = _cfg(max_rounds=60)
    sim, res, chk = _run(cfg, [_ela(0, 1e8, w=2), job(1, work=100.0)], 0.0, name)
    assert res.truncated and sim.round_index == 60 and res.jobs_completed == 1
    assert sim.now == pytest.approx(60 * 60.0)


def _refused(cfg: ScenarioConfig, jobs: list[JobSpec], match: str) -> None:
    with _guard(5.0), pytest.raises(ConfigError, match=match):
        Simulator(cfg, jobs, _util(0.0), seed=0)


def test_worlds_refused_at_once_with_the_cause() -> None:
    _refused(_cfg(), [], "trace is empty")
    # a job larger than the whole training pool (GPUs), also when the loans could hold it
    _refused(_cfg(), [job(0, work=60.0, g=4, w=3)], "needs 12 GPUs at minimum but the training pool has 8")
    _refused(_cfg(inf_servers=8), [job(0, work=60.0, w=9, ta=True)], "training pool has 8")
    # 8-GPU workers on 4-GPU servers
    _refused(_cfg(), [job(0, work=60.0, g=8, w=1)], "worker of 8 GPUs does not fit a training server of 4")
    # 3 workers of 4 GPUs on two 6-GPU servers: 12 GPUs but room for 2 such workers
    _refused(_cfg(train_gpus=6), [job(0, work=60.0, g=4, w=3)], "hold 2 such workers")


# ------------------------------------------------------------------------------------------------
# found by this review, now refused at once (Simulator._check_jobs, Simulator._check_lengths)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["baseline", "fifo", "fifo-backfill", "sjf", "aryl-noelastic"])
def test_request_larger_than_the_pool_is_refused_at_once(name: str) -> None:
    """Was: an elastic job whose w_min fits but whose request w_req does not was accepted; the
    policies that run jobs at their request never started it and the episode ended 'stalled'
    6 simulated hours later (fifo: 0 of 2 jobs done, the blocked head held up the other)."""
    jobs = [job(0, work=600.0, w=16, w_min=1, elastic=True, ta=True, w_req=16), job(1, work=60.0)]
    with pytest.raises(ConfigError, match=r"job 0: requests 16 workers of 1 GPUs .* hold 8 such workers"):
        Simulator(_cfg(), jobs, _util(0.0), seed=0)
    # a request the pool holds (8 workers) runs to the end under the same policy (training pool
    # only: on the loaned servers see test_noelastic_request_of_the_whole_loaned_pool_goes_to_the_training_pool)
    jobs = [job(0, work=600.0, w=16, w_min=1, elastic=True, w_req=8), job(1, work=60.0)]
    sim = Simulator(_cfg(), jobs, _util(0.0), seed=0)
    with _guard(5.0):
        res = sim.run(make_policy(name), on_round=InvariantChecker())
    assert sim.done and not res.stalled and res.jobs_completed == 2


def _huge_cfg(**sim: object) -> ScenarioConfig:
    return scenario_from_dict({
        "name": "review-huge",
        "cluster": {"train_servers": 2, "train_gpus_per_server": 4, "inf_servers": 2, "inf_gpus_per_server": 4},
        "inference": {"mode": "constant", "mean": 0.0, "headroom": 0.0},
        "sim": {"interval": 60.0, **sim},
    })


@pytest.mark.parametrize("name", ["baseline", "aryl"])
def test_huge_work_is_refused_without_an_end_and_cut_with_one(name: str, monkeypatch) -> None:
    """Was: a job of 1e13 s of work (no horizon, no round cap) hung the episode: the hourly
    accounting of one fast-forward grew a row per simulated hour, and a loaning policy's
    look-ahead stepped round by round. Its shortest running time (1e13 s / 1 worker) is far past
    10,000,000 rounds of 60 s (19 years): refused, naming the job and the ways out."""
    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    with pytest.raises(ConfigError, match=r"job 0: .* cannot end within 10,000,000 rounds of 60 s \(19.0 years\)"):
        Simulator(_huge_cfg(), [job(0, work=1e13)], _util(0.0), seed=0)
    # 1e8 s (3.2 years) is within the limit: accepted (not run here: the other test cuts it)
    Simulator(_huge_cfg(), [job(0, work=1e8)], _util(0.0), seed=0)
    # with an end the episode is cut there (censored), as before
    sim = Simulator(_huge_cfg(max_rounds=30), [job(0, work=1e13)], _util(0.0), seed=0)
    with _guard(5.0):
        res = sim.run(make_policy(name))
    assert res.truncated and sim.round_index == 30 and res.jobs_completed == 0
    # the size override lifts the limit, as it lifts the scenario size limits
    monkeypatch.setenv("ARYL_GYM_ALLOW_HUGE", "1")
    Simulator(_huge_cfg(), [job(0, work=1e13)], _util(0.0), seed=0)


def test_late_submission_counts_against_the_limit(monkeypatch) -> None:
    """The bound is submit + shortest running time: a short job submitted after 20 years cannot
    end within the limit either."""
    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    late = 20 * 365 * 86400.0
    with pytest.raises(ConfigError, match=r"job 1: submitted at 7,300.0 days"):
        Simulator(_huge_cfg(), [job(0, work=60.0), job(1, work=60.0, submit=late)], _util(0.0), seed=0)


def test_noelastic_request_of_the_whole_loaned_pool_goes_to_the_training_pool() -> None:
    """Was: aryl-noelastic admitted a type-agnostic elastic job at its request (8 workers) on the
    loaned servers first (elastic jobs prefer inference) by counting free GPUs, but flexible
    grouping keeps its 7 flexible workers off the server of its base worker, so 8 workers never
    fit 2 loaned 4-GPU servers; the placement check dropped it, the admission never tried the
    free training pool, and the episode ended stalled. Now the job tries its other pool."""
    jobs = [job(0, work=600.0, w=16, w_min=1, elastic=True, ta=True, w_req=8), job(1, work=60.0)]
    sim = Simulator(_cfg(), jobs, _util(0.0), seed=0)
    pol = make_policy("aryl-noelastic")
    with _guard(5.0):
        res = sim.run(pol, on_round=InvariantChecker())
    assert sim.done and not res.stalled and res.jobs_completed == 2
    assert pol.stats.waited == 1  # round 0: job 1 holds a training GPU, the retry finds no room
