"""World v1: elastic growth past the request, bursty arrivals fitted to Philly, relevance."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.config import ConfigError, WorkloadConfig, load_scenario
from aryl_gym.metrics import hourly_queued_share
from aryl_gym.relevance import summarize
from aryl_gym.workload import fit
from aryl_gym.workload.generator import (
    _arrivals,
    batch_size_pmf,
    generate_jobs,
    rate_multiplier,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
HAS_TRACES = (SHARED / fit.PHILLY_CSV).exists()
needs_traces = pytest.mark.skipif(
    not HAS_TRACES, reason=f"public traces not found at {SHARED}/traces (../shared beside the checkout)"
)


# ---------------------------------------------------------------------------------------------
# Job model
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["tiny", "testbed", "basic", "ideal"])
def test_elastic_jobs_request_base_and_grow_by_r(scenario: str) -> None:
    cfg = load_scenario(scenario)
    cap = cfg.workload.max_job_gpus or cfg.cluster.train_gpus
    cap = min(cap, cfg.cluster.train_gpus)
    jobs = generate_jobs(cfg, np.random.default_rng(3))
    assert jobs
    for j in jobs:
        assert j.w_req == j.w_min  # World v1: the request is the base demand
        if not j.elastic:
            assert j.w_min == j.w_max
        else:
            r = j.w_max / j.w_min
            capped = j.w_max == max(cap // j.g, j.w_min)
            # World v2 scales elastic requests (elastic_gpu_share), so a capped ratio need not be
            # a power of two
            assert (r in (2.0, 4.0)) or capped, (j, r)
        assert j.g * j.w_max <= max(cap, j.g * j.w_min)


def test_elastic_range_one_means_no_growth() -> None:
    cfg = load_scenario("testbed").replace(workload={"elastic_range": 1.0})
    jobs = generate_jobs(cfg, np.random.default_rng(0))
    assert all(j.w_max == j.w_min for j in jobs)


def test_elastic_range_below_one_is_rejected() -> None:
    with pytest.raises(ConfigError, match="elastic_range"):
        load_scenario("testbed").replace(workload={"elastic_range": 0.5})


def test_same_seed_same_trace_and_exact_num_jobs() -> None:
    cfg = load_scenario("tiny")
    a = generate_jobs(cfg, np.random.default_rng(7))
    b = generate_jobs(cfg, np.random.default_rng(7))
    assert a == b
    assert len(a) == cfg.workload.num_jobs
    assert [j.submit for j in a] == sorted(j.submit for j in a)


def test_num_jobs_zero_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="num_jobs"):
        load_scenario("tiny").replace(workload={"num_jobs": 0})


# ---------------------------------------------------------------------------------------------
# Arrivals
# ---------------------------------------------------------------------------------------------


def test_zipf_fit_recovers_exponent() -> None:
    rng = np.random.default_rng(0)
    pmf = fit.zipf_pmf(2.3, 400)
    sizes = rng.choice(400, size=40_000, p=pmf) + 1
    assert fit.fit_zipf(sizes, 400) == pytest.approx(2.3, abs=0.03)


def _golden_section_zipf(sizes: np.ndarray, s_max: int) -> float:
    """The hand-written search fit_zipf used before scipy's minimize_scalar: the reference."""
    mean_log = float(np.log(np.asarray(sizes, dtype=float)).mean())
    logs = np.log(np.arange(1, s_max + 1, dtype=float))

    def nll(a: float) -> float:
        return a * mean_log + math.log(float(np.exp(-a * logs).sum()))

    lo, hi = 1.01, 6.0
    phi = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(100):
        m1, m2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if nll(m1) < nll(m2):
            hi = m2
        else:
            lo = m1
    return 0.5 * (lo + hi)


#: Philly's batches of multi-GPU jobs (fit.batches on philly.csv): {batch size: count}
PHILLY_MULTI_BATCHES = {1: 3648, 2: 567, 3: 71, 4: 31, 5: 24, 6: 13, 7: 7, 8: 7, 9: 3, 10: 6, 11: 3, 12: 4,
                        14: 3, 15: 1, 17: 1, 119: 1}


def test_zipf_fit_equals_the_golden_section_search() -> None:
    sizes = np.repeat(list(PHILLY_MULTI_BATCHES), list(PHILLY_MULTI_BATCHES.values()))
    new = fit.fit_zipf(sizes, 119)
    assert new == pytest.approx(_golden_section_zipf(sizes, 119), abs=1e-6)
    assert round(new, 3) == WorkloadConfig().burst_multi_alpha == 3.088  # the shipped default
    rng = np.random.default_rng(1)
    for alpha, s_max in ((1.5, 50), (2.3, 400), (4.0, 10)):
        s = rng.choice(s_max, size=2000, p=fit.zipf_pmf(alpha, s_max)) + 1
        assert fit.fit_zipf(s, s_max) == pytest.approx(_golden_section_zipf(s, s_max), abs=1e-6)
    # a sample all at size 1 pushes alpha to the upper bound, as before
    assert fit.fit_zipf(np.ones(10), 5) == pytest.approx(6.0, abs=1e-4)


@pytest.mark.slow
def test_zipf_fit_on_philly_equals_the_golden_section_search() -> None:
    from aryl_gym.workload.paths import default_data_root

    root = default_data_root()
    if root is None or not (root / fit.PHILLY_CSV).exists():
        pytest.skip("philly.csv not found (set ARYL_GYM_DATA)")
    times, _, gpus = fit.read_philly(root / fit.PHILLY_CSV)
    order = np.argsort(times, kind="stable")
    bs = fit.batches(times[order] - times[order][0])
    sizes = np.array([len(b) for b in bs])
    single = np.array([float(np.median(np.asarray(gpus)[order][b])) <= 1.0 for b in bs])
    for mask, default in ((single, WorkloadConfig().burst_size_alpha), (~single, WorkloadConfig().burst_multi_alpha)):
        s = sizes[mask]
        new = fit.fit_zipf(s, int(s.max()))
        assert new == pytest.approx(_golden_section_zipf(s, int(s.max())), abs=1e-6)
        assert round(new, 3) == default


def test_batches_split_on_ten_second_gaps() -> None:
    t = np.array([0.0, 3.0, 9.0, 30.0, 100.0, 105.0])
    assert [list(b) for b in fit.batches(t)] == [[0, 1, 2], [3], [4, 5]]


def test_arrival_stats_by_hand() -> None:
    # hour 0: 3 jobs, hour 1: 0, hour 2: 1 -> mean 4/3, gaps 1, 1, 7198 -> 2 of 3 under 10 s
    st = fit.arrival_stats(np.array([0.0, 1.0, 2.0, 7200.0]))
    counts = np.array([3.0, 0.0, 1.0])
    assert st["hourly_cv"] == pytest.approx(counts.std() / counts.mean())
    assert st["gap_lt_10s"] == pytest.approx(2 / 3)
    assert st["p99_hour_over_mean"] == pytest.approx(np.percentile(counts, 99) / counts.mean())


def test_generated_arrivals_match_philly_within_25_percent() -> None:
    """The generator at the trace's rate and span, 3 seeds: each statistic within 25%."""
    w = load_scenario("production").workload
    from aryl_gym.workload.generator import generated_arrival_stats

    gen = generated_arrival_stats(w, seeds=3)
    for key in ("hourly_cv", "gap_lt_10s", "p99_hour_over_mean"):
        trace = fit.PHILLY_ARRIVAL_STATS[key]
        assert abs(gen[key] / trace - 1.0) <= 0.25, (key, gen[key], trace)


def test_burstiness_zero_is_a_poisson_process() -> None:
    w = load_scenario("production").workload.__class__(burstiness=0.0, diurnal_arrivals=0.0)
    assert list(batch_size_pmf(w)) == [1.0]
    rate = 0.01  # jobs per second: 36 per hour
    times, batch = _arrivals(w, rate, 2000 * 3600.0, None, np.random.default_rng(1))
    assert len(np.unique(batch)) == len(times)  # one job per batch
    st = fit.arrival_stats(times)
    assert st["hourly_cv"] == pytest.approx(1 / math.sqrt(36.0), rel=0.15)
    assert st["gap_lt_10s"] == pytest.approx(1 - math.exp(-0.1), abs=0.02)


def test_rate_multiplier_has_mean_one_over_the_episode() -> None:
    w = load_scenario("testbed").workload
    for seed in range(5):
        m = rate_multiplier(w, 36, np.random.default_rng(seed))
        assert m.mean() == pytest.approx(1.0) and (m > 0).all()


def test_jobs_of_a_batch_share_their_shape() -> None:
    # gaps inside a batch of 1 ms: batches are then told apart by a 10 ms split
    cfg = load_scenario("basic").replace(workload={"burst_gap_s": 0.001})
    jobs = generate_jobs(cfg, np.random.default_rng(5))
    t = np.array([j.submit for j in jobs])
    groups = [b for b in fit.batches(t, 0.01) if len(b) > 1]
    assert len(groups) > 50
    same = [
        len({(jobs[i].g, jobs[i].w_req, jobs[i].family, jobs[i].elastic) for i in b}) == 1
        for b in groups
    ]
    assert np.mean(same) > 0.98


@needs_traces
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_fit_world_reproduces_the_defaults(capsys) -> None:
    from aryl_gym.cli import main

    assert main(["fit-world", "--data-root", str(SHARED), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key, value in out["fitted"].items():
        assert value == pytest.approx(out["defaults"][key], rel=1e-3, abs=1e-3), key
    st = out["philly_arrival_stats"]
    for key in ("hourly_cv", "gap_lt_10s", "p99_hour_over_mean"):
        assert st[key] == pytest.approx(fit.PHILLY_ARRIVAL_STATS[key], rel=1e-3)


# ---------------------------------------------------------------------------------------------
# Metrics and relevance
# ---------------------------------------------------------------------------------------------


def test_hourly_queued_share_by_hand() -> None:
    # job 0 waits 0..1800 and runs to 7200; job 1 arrives at 3600 and starts at once
    share = hourly_queued_share(
        np.array([0.0, 3600.0]), np.array([1800.0, 3600.0]), np.array([7200.0, 5400.0]), 2
    )
    assert share == pytest.approx([0.5, 0.0])
    # a job that never started counts as queued to the end
    share = hourly_queued_share(np.array([0.0]), np.array([np.nan]), np.array([np.nan]), 1)
    assert share == pytest.approx([1.0])


def test_relevance_summary_by_hand() -> None:
    res = [
        ("s", "sjf", 0, 120.0, 100.0),
        ("s", "aryl", 0, 110.0, 100.0),
        ("s", "random", 0, 220.0, 100.0),
        ("s", "sjf", 1, 300.0, 200.0),
        ("s", "aryl", 1, 330.0, 200.0),
        ("s", "random", 1, 450.0, 200.0),
        ("s", "baseline", 1, 500.0, 200.0),
        ("s", "fifo", 0, 900.0, 100.0),  # strict FIFO: not the Baseline of World v2
    ]
    (row,) = summarize(res, ["s"], ["sjf", "aryl"])
    assert row["baseline_over_bound"] == pytest.approx(2.5)  # baseline ran on seed 1 only
    assert row["bound"] == pytest.approx(150.0)
    assert row["headroom"] == pytest.approx((1.1 + 1.5) / 2)
    assert row["spread"] == pytest.approx((2.0 + 1.5) / 2)
    logs = [math.log(110 / 120), math.log(330 / 300)]
    assert row["sd_log_aryl_sjf"] == pytest.approx(float(np.std(logs, ddof=1)))


def test_calibrate_json_has_world_v1_rows(capsys) -> None:
    from aryl_gym.cli import main

    assert main(["calibrate", "--scenario", "tiny", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = {r["key"] for r in out["rows"]}
    assert {"strict_queue_ratio", "max_hourly_queued_share", "hourly_cv", "gap_lt_10s",
            "p99_hour_over_mean"} <= keys
    arr = [r for r in out["rows"] if r["key"] == "hourly_cv"][0]
    assert arr["within_25pct"] is True


def test_calibrate_relevance_runs_on_tiny(capsys) -> None:
    from aryl_gym.cli import main

    assert main(["calibrate", "--relevance", "--scenarios", "tiny", "--seeds", "0,1",
                 "--policies", "sjf,aryl", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["scenario"] == "tiny" and row["seeds"] == 2
    assert row["headroom"] >= 1.0 and row["spread"] > 0


def test_calibrate_relevance_out_caches_the_episodes(tmp_path, capsys) -> None:
    """--out: the same rows as without it, every episode in the cache, a rerun runs none."""
    from aryl_gym.cli import main

    argv = ["calibrate", "--relevance", "--scenarios", "tiny", "--seeds", "0,1",
            "--policies", "sjf,aryl", "--json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    for _ in range(2):
        assert main([*argv, "--out", str(tmp_path)]) == 0
        got = capsys.readouterr()
        assert json.loads(got.out) == plain
    assert "to run" not in got.err
    # 2 seeds x (sjf, aryl and the random policy relevance always adds)
    assert len(list(tmp_path.glob("episodes/tiny/*/*.json"))) == 6


def test_per_job_shape_mix_is_kept_with_batches() -> None:
    """Batches of 1-GPU jobs are larger, so batch shapes are reweighted: per job, the share of
    1-GPU jobs stays (1 - elastic_fraction) x Philly's 93.2%."""
    cfg = load_scenario("basic")
    jobs = [j for s in range(4) for j in generate_jobs(cfg, np.random.default_rng(100 + s))]
    one = np.mean([j.g * j.w_req == 1 for j in jobs])
    expected = (1 - cfg.workload.elastic_fraction) * 0.9317
    assert one == pytest.approx(expected, abs=0.02)
    el = np.mean([j.family in ("resnet50", "vgg16", "bert", "gnmt16") for j in jobs])
    assert el == pytest.approx(cfg.workload.elastic_fraction, abs=0.015)


def test_calibrate_seeds_average_the_baseline_figures(capsys) -> None:
    from aryl_gym.cli import main

    def rows(argv):
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        return out, {r["key"]: r["measured"] for r in out["rows"]}

    _, a = rows(["calibrate", "--scenario", "tiny", "--seed", "0", "--json"])
    _, b = rows(["calibrate", "--scenario", "tiny", "--seed", "1", "--json"])
    both, m = rows(["calibrate", "--scenario", "tiny", "--seeds", "0,1", "--json"])
    assert both["seeds"] == [0, 1]
    for key in ("avg_queue_time", "train_util", "strict_queue_ratio", "jobs"):
        assert m[key] == pytest.approx((a[key] + b[key]) / 2), key
