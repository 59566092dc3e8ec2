"""Brute-force audit of the reported numbers: every figure recomputed from raw per-round data by
code written independently of ``aryl_gym.metrics`` (an observer records, each round, the
allocation the simulator is about to run; the figures are integrated from those snapshots, the
jobs' specs and their finish times), the env's ``jct`` reward identity, ``compare --json`` and the
paired ratio interval by hand.

The regression this file was written for: ``combined_usage`` (and its hourly series) charged a
whole fast-forwarded span of rounds at the inference utilisation of its first instant, so the
same episode had another usage with ``sim.fast_forward`` off (testbed ``sjf`` seed 0: 0.6120 vs
0.6098; single hours off by up to ~0.02).
"""

from __future__ import annotations

import json
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym  # noqa: F401 - registers the envs
from aryl_gym.config import load_scenario
from aryl_gym.metrics import lower_bounds
from aryl_gym.scenario import make_episode
from aryl_gym.sim.jobs import JobState
from aryl_gym.stats import paired_ratio_ci

RUNNING, QUEUED = int(JobState.RUNNING), int(JobState.QUEUED)


def _percentile(xs: Any, q: float) -> float:
    """The linear-interpolation percentile (Hyndman & Fan type 7), written out."""
    xs = sorted(float(x) for x in xs)
    if not xs:
        return math.nan
    h = (len(xs) - 1) * q / 100.0
    lo = int(math.floor(h))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _mean(xs: Any) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else math.nan


def _observed_run(policy: str, seed: int, **sim: Any) -> tuple[Any, Any, list[tuple]]:
    """Run an episode, recording after each decision (before the clock moves) every job's state,
    workers, GPUs per worker, workers on loaned servers, and the loaned GPU count."""
    cfg = load_scenario("testbed")
    if sim:
        cfg = cfg.replace(sim=sim)
    s = make_episode(cfg, seed).simulator()
    snaps: list[tuple] = []
    begin = s.begin

    def observed_begin(pol: Any) -> None:
        begin(pol)
        sample = s.acc.sample

        def record(sim_: Any) -> None:
            snaps.append((float(sim_.now), np.array(sim_.state), np.array(sim_.workers),
                          np.array(sim_.g), np.array(sim_.inf_workers), float(sim_.loaned_gpus)))
            sample(sim_)

        s.acc.sample = record

    s.begin = observed_begin  # type: ignore[method-assign]
    res = s.run(make_policy(policy))
    return s, res, snaps


def _recompute(s: Any, snaps: list[tuple]) -> dict[str, Any]:
    n, end = s.n_jobs, float(s.now)
    submit = np.array([j.submit for j in s.jobs], dtype=float)
    finish = np.array(s.finish, dtype=float)
    done = ~np.isnan(finish)
    c = s.config.cluster
    first = np.full(n, math.nan)
    requeue = np.zeros(n)
    queued_since = np.full(n, math.nan)
    last = np.full(n, -1)
    run_t = np.zeros(n)
    train_gs = loan_gs = offered_gs = 0.0
    hours: dict[int, list[float]] = {}

    def bin_hours(a: float, b: float, k: int, per_s: float) -> None:
        t = a
        while t < b - 1e-9:
            h = int(t // 3600.0)
            seg = min(b, (h + 1) * 3600.0) - t
            row = hours.setdefault(h, [0.0, 0.0, 0.0, 0.0])
            row[k] += per_s * seg
            t += seg

    for i, (t0, st, w, g, iw, loaned) in enumerate(snaps):
        t1 = snaps[i + 1][0] if i + 1 < len(snaps) else end
        for j in np.flatnonzero(st == RUNNING):
            if math.isnan(first[j]):
                first[j] = t0
            elif last[j] == QUEUED and not math.isnan(queued_since[j]):
                requeue[j] += t0 - queued_since[j]
                queued_since[j] = math.nan
        for j in np.flatnonzero((st == QUEUED) & (last == RUNNING)):
            queued_since[j] = t0  # preempted this round, before the decision ran
        last = st
        offered_gs += loaned * (t1 - t0)
        # a job that finishes inside the span releases its GPUs at its finish time
        cuts = sorted({t0, t1, *(float(finish[j]) for j in np.flatnonzero(st == RUNNING)
                                 if done[j] and t0 < finish[j] < t1)})
        for a, b in zip(cuts[:-1], cuts[1:]):
            holding = [j for j in np.flatnonzero(st == RUNNING) if not (done[j] and finish[j] <= a + 1e-9)]
            tr = float(sum((w[j] - iw[j]) * g[j] for j in holding))
            lo = float(sum(iw[j] * g[j] for j in holding))
            run_t[holding] += b - a
            train_gs += tr * (b - a)
            loan_gs += lo * (b - a)
            bin_hours(a, b, 0, tr)
            bin_hours(a, b, 1, lo)
            bin_hours(a, b, 3, 1.0)
    # inference's own usage: u(t) x inference GPUs, u constant over each sample of the series
    ss, inf_gs, t = s.loan.sample_seconds, 0.0, 0.0
    while t < end - 1e-9:
        b = min(end, (math.floor(t / ss + 1e-9) + 1) * ss)
        per_s = s.loan.utilization(t) * c.inf_gpus
        inf_gs += per_s * (b - t)
        bin_hours(t, b, 2, per_s)
        t = b
    seen = done | (submit <= end)
    jct_all = (np.where(done, finish, end) - submit)[seen]
    jct_done = (finish - submit)[done]
    started = ~np.isnan(first)
    back = ~np.isnan(queued_since)  # preempted, still waiting at the end: censored there
    requeue[back] += end - queued_since[back]
    qt = (first - submit)[started]
    qt_total = qt + requeue[started]
    all_gpus = c.train_gpus + c.inf_gpus
    last_hour = max(int(math.ceil(min(submit[seen].max(), end) / 3600.0)), 1)
    win = [hours[h] for h in sorted(hours) if h < last_hour]
    # queued share per hour: time-integrated queued jobs / jobs in the system
    qshare = []
    stop = end if not done.all() else math.inf
    for h in range(min(last_hour, 24 * 400)):
        lo_h, hi_h = h * 3600.0, (h + 1) * 3600.0
        q = sys_ = 0.0
        for j in np.flatnonzero(seen):
            q_end = min(first[j] if started[j] else math.inf, stop)
            s_end = min(finish[j] if done[j] else math.inf, stop)
            q += max(0.0, min(q_end, hi_h) - max(submit[j], lo_h))
            sys_ += max(0.0, min(s_end, hi_h) - max(submit[j], lo_h))
        qshare.append(q / sys_ if sys_ > 0 else 0.0)
    elastic = np.array([bool(j.elastic) for j in s.jobs])
    wait = jct_done - run_t[done]
    return {
        "jobs_completed": int(done.sum()),
        "jobs_unfinished": int(n - done.sum()),
        "avg_jct": _mean(jct_all),
        "median_jct": _percentile(jct_all, 50),
        "p95_jct": _percentile(jct_all, 95),
        "avg_jct_finished": _mean(jct_done),
        "avg_queue_time": _mean(qt),
        "p95_queue_time": _percentile(qt, 95),
        "avg_queue_time_total": _mean(qt_total),
        "p95_queue_time_total": _percentile(qt_total, 95),
        "total_wait_time": float(wait.sum()),
        "avg_wait_time": _mean(wait),
        "avg_run_time": _mean(run_t[done]),
        "elastic_run_share": float(run_t[done & elastic].sum() / run_t[done].sum()) if done.any() else math.nan,
        "makespan": float(finish[done].max()) if done.any() else math.nan,
        "train_util": sum(r[0] for r in win) / (c.train_gpus * sum(r[3] for r in win)),
        "train_util_makespan": train_gs / (c.train_gpus * end),
        "combined_usage": (train_gs + loan_gs + inf_gs) / (all_gpus * end),
        "combined_usage_hourly": [(r[0] + r[1] + r[2]) / (all_gpus * r[3]) for _, r in sorted(hours.items())],
        "loaned_gpu_hours_offered": offered_gs / 3600.0,
        "loaned_gpu_hours_used": loan_gs / 3600.0,
        "max_hourly_queued_share": max(qshare) if qshare else math.nan,
        "truncated": not done.all(),
        "jcts": sorted(float(x) for x in jct_done),
        "_first_start": first,
        "_running_time": run_t,
        "_seen": seen,
        "_jct_all": jct_all,
    }


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= rel * max(1.0, abs(b))


# policy, seed, sim overrides: loaning (aryl), preemptions (aryl-preempt, 12 of them on seed 5),
# backfill (sjf, baseline), a non-event-driven policy (random), truncated episodes (horizons)
CASES = [
    ("aryl", 0, {}),
    ("aryl-preempt", 5, {}),
    ("sjf", 1, {}),
    ("baseline", 0, {}),
    ("random", 4, {}),
    ("aryl", 1, {"horizon_hours": 6.0}),
    ("aryl-preempt", 0, {"horizon_hours": 20.0}),
    # 3 jobs preempted and back in the queue at the end (10,560 s of re-queuing; the queuing
    # totals dropped it before metrics version 4)
    ("aryl-preempt", 0, {"horizon_hours": 8.0}),
]


@pytest.mark.parametrize(("policy", "seed", "sim"), CASES)
def test_episode_result_recomputed_from_rounds(policy: str, seed: int, sim: dict) -> None:
    s, res, snaps = _observed_run(policy, seed, **sim)
    mine = _recompute(s, snaps)
    got = res.to_dict(series=True)
    for k, v in mine.items():
        if k.startswith("_"):
            continue
        r = got[k]
        if isinstance(v, list):
            r = sorted(r) if k == "jcts" else r
            assert len(v) == len(r), k
            bad = [(i, a, b) for i, (a, b) in enumerate(zip(v, r)) if not _close(a, b)]
            assert not bad, (k, bad[:3])
        elif isinstance(v, (bool, int)) and not isinstance(v, float):
            assert v == r, (k, v, r)
        else:
            assert _close(v, math.nan if r is None else r), (k, v, r)
    # the raw series the figures come from
    assert np.allclose(mine["_running_time"], s.running_time, rtol=0, atol=1e-6)
    fs = mine["_first_start"]
    assert np.array_equal(np.isnan(fs), np.isnan(s.first_start))
    assert np.allclose(fs[~np.isnan(fs)], s.first_start[~np.isnan(fs)], rtol=0, atol=1e-9)
    # preemptions: each call of Simulator.preempt is one; the observer sees those not undone
    # within the same round, so it gives a lower bound on the count
    assert res.preemptions == int(s.preempt_count.sum())
    assert res.preempted_jobs == int((s.preempt_count > 0).sum())
    seen = mine["_seen"]
    assert _close(res.preemption_ratio, float((s.preempt_count[seen] > 0).mean()))
    if sim:
        assert res.truncated and res.failed == 1 and res.jobs_unfinished > 0
    if policy == "aryl-preempt" and not sim:
        assert res.preemptions > 0 and res.avg_queue_time_total > res.avg_queue_time
    if policy == "aryl" and not sim:
        assert res.loaned_gpu_hours_used > 0
    # the lower bound holds for every finished job, and the slowdown is over the same jobs
    lb = lower_bounds(s)
    done = ~np.isnan(s.finish)
    assert (s.running_time[done] >= lb[done] * (1 - 1e-9)).all()
    assert _close(res.mean_slowdown, _mean(mine["_jct_all"] / lb[seen]))
    assert _close(res.jct_lower_bound, _mean(lb[seen]))


def test_combined_usage_does_not_depend_on_fast_forward() -> None:
    """Same episode with and without fast-forward (sjf: identical JCTs): same usage figures.
    Failed before the fix (0.61196 vs 0.60975; the inference usage of a fast-forwarded span was
    charged at its first instant's utilisation)."""
    cfg = load_scenario("testbed")
    a = make_episode(cfg, 0).simulator().run(make_policy("sjf"))
    b = make_episode(cfg.replace(sim={"fast_forward": False}), 0).simulator().run(make_policy("sjf"))
    assert a.jcts == b.jcts and a.decision_rounds < b.decision_rounds
    assert a.combined_usage == pytest.approx(b.combined_usage, rel=1e-12)
    assert a.combined_usage_hourly == pytest.approx(b.combined_usage_hourly, rel=1e-12)
    assert a.train_util == pytest.approx(b.train_util, rel=1e-12)


def _random_masked_episode(scenario: str, seed: int, max_steps: int | None) -> tuple[float, Any, Any]:
    env = gym.make("aryl_gym/Aryl-v2", scenario=scenario, window=8, max_steps=max_steps)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    total = 0.0
    while True:
        mask = env.unwrapped.action_masks().reshape(8, -1)
        action = np.array([rng.choice(np.flatnonzero(row)) for row in mask])
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    s = env.unwrapped.sim
    env.close()
    return total, info, s


@pytest.mark.parametrize(("scenario", "seed", "max_steps"), [("tiny", 3, None), ("testbed", 0, 150)])
def test_jct_reward_sums_to_minus_censored_total_jct(scenario: str, seed: int, max_steps: int | None) -> None:
    total, info, s = _random_masked_episode(scenario, seed, max_steps)
    res = info["episode_result"]
    end = float(s.now)
    submit = np.array([j.submit for j in s.jobs])
    finish = np.array(s.finish, dtype=float)
    done = ~np.isnan(finish)
    seen = done | (submit <= end)
    job_seconds = float((np.where(done, finish, end) - submit)[seen].sum())
    assert total == pytest.approx(-job_seconds / 3600.0, rel=1e-12, abs=1e-9)
    if max_steps is None:
        assert res.jobs_completed == res.jobs_total
        assert total == pytest.approx(-sum(res.jcts) / 3600.0, rel=1e-12)
    else:
        assert res.jobs_unfinished > 0 and res.truncated
        # avg_jct is the censored mean over the submitted jobs
        assert res.avg_jct * int(seen.sum()) == pytest.approx(job_seconds, rel=1e-12)


def test_compare_json_rows_and_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import main

    assert main(["compare", "--scenario", "testbed", "--policies", "aryl,sjf", "--seeds", "0-2",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert [(r["policy"], r["seed"]) for r in rows] == [(p, s) for s in range(3) for p in ("aryl", "sjf")]
    for r in rows:
        s, res, snaps = _observed_run(r["policy"], r["seed"])
        mine = _recompute(s, snaps)
        for k in ("avg_jct", "p95_jct", "median_jct", "avg_queue_time", "p95_queue_time",
                  "train_util", "combined_usage", "makespan", "loaned_gpu_hours_used"):
            assert _close(mine[k], r[k]), (r["policy"], r["seed"], k)
    # the ratios are mean(sjf) / mean(aryl) over the seeds (a ratio of means, no interval)
    for k in ("avg_jct", "p95_jct", "avg_queue_time", "combined_usage"):
        a = _mean(r[k] for r in rows if r["policy"] == "sjf")
        b = _mean(r[k] for r in rows if r["policy"] == "aryl")
        assert _close(out["ratios"]["sjf"][k], a / b, 1e-12)
        assert out["ratios"]["aryl"][k] == 1.0


# two-sided 95% Student t quantiles from printed tables
_T975 = {1: 12.7062047, 2: 4.3026527, 4: 2.7764451}


def _t_interval_of_logs(rs: list[float]) -> tuple[float, float, float]:
    logs = [math.log(r) for r in rs]
    m = _mean(logs)
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    h = _T975[len(rs) - 1] * sd / math.sqrt(len(rs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)


@pytest.mark.parametrize("ratios", [[1.2, 0.8], [1.1, 1.1, 1.1], [1e-6, 1e6, 1.0, 3.0, 0.5],
                                    [0.9, 1.1, 1.05, 0.97, 1.3]])
def test_paired_ratio_ci_is_a_t_interval_on_log_ratios(ratios: list[float]) -> None:
    st = paired_ratio_ci({i: r for i, r in enumerate(ratios)})
    want = _t_interval_of_logs(ratios)
    assert st.method == "geometric" and st.n == len(ratios) and st.dropped == 0
    for got, w in zip((st.mean, st.lo, st.hi), want):
        assert got == pytest.approx(w, rel=1e-6)
    if len(set(ratios)) == 1:
        assert st.lo == st.hi == st.mean  # no spread: a zero-width interval, not NaN
    # undefined ratios (a zero denominator gives inf; NaN; negative) are dropped and counted
    st2 = paired_ratio_ci([*ratios, math.inf, math.nan, -1.0])
    assert st2.dropped == 3 and (st2.mean, st2.lo, st2.hi) == (st.mean, st.lo, st.hi)


def test_compare_ratios_pair_the_seeds_both_policies_have() -> None:
    # b has no value on seed 1 (e.g. no queuing time when no job started): its ratio to a is
    # b / a on seed 0 alone, 2.0 (was: mean(b) over seed 0 over mean(a) over seeds 0-1, 1.0)
    from aryl_gym.commands.compare import METRICS, summarize

    m = "avg_queue_time"
    rows = [{"policy": "a", "seed": 0, **{k: 1.0 for k in METRICS}},
            {"policy": "a", "seed": 1, **{k: 3.0 for k in METRICS}},
            {"policy": "b", "seed": 0, **{k: 2.0 for k in METRICS}},
            {"policy": "b", "seed": 1, **{k: None for k in METRICS}}]
    means, ratios = summarize(rows, ["a", "b"])
    assert means["a"][m] == 2.0 and means["b"][m] == 2.0  # the table: each over its own seeds
    assert ratios["b"][m] == 2.0 and ratios["a"][m] == 1.0
    rows[3][m] = float("nan")  # NaN is no value either
    assert summarize(rows, ["a", "b"])[1]["b"][m] == 2.0
    rows[3][m] = 6.0  # complete data: the plain ratio of means
    assert summarize(rows, ["a", "b"])[1]["b"][m] == 2.0


def test_evaluation_ratios_pair_the_seeds_both_have() -> None:
    from dataclasses import replace

    from aryl_gym.scenario import make_episode
    from aryl_gym.train.evaluation import ratios

    r0, r1 = (make_episode("tiny", seed=s).simulator().run(make_policy("fifo")) for s in (0, 1))
    assert (r0.seed, r1.seed) == (0, 1)
    a = [replace(r0, avg_queue_time=1.0), replace(r1, avg_queue_time=3.0)]
    b = [replace(r0, policy="b", avg_queue_time=2.0), replace(r1, policy="b", avg_queue_time=None)]
    got = ratios({"a": a, "b": b}, "a", ["avg_queue_time"])
    assert got["b"]["avg_queue_time"] == 2.0  # seed 0 alone (was 1.0: 2.0 over the mean of 1 and 3)
    assert got["a"]["avg_queue_time"] == 1.0
