"""World v2 (SPEC "World v2"): the true goodput curves, the ceiling, the elasticity modes, tuned
batches, re-queue time, the Baseline, the world versions and the elastic GPU-time share."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from aryl_gym.agents import make_policy

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.scenario import make_episode
from aryl_gym.sim import goodput
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.invariants import check
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import INFER, TRAIN, Decision
from aryl_gym.world_versions import V1_OVERRIDES, in_world

SHARED = Path(__file__).resolve().parents[2] / "shared"
PROFILES = SHARED / "traces" / "pollux-philly" / "traces"


# ---------------------------------------------------------------------------------------------
# the goodput model
# ---------------------------------------------------------------------------------------------
def _curve(**kw: float) -> goodput.AppCurve:
    base = dict(alpha_c=0.1, beta_c=0.01, alpha_n=0.2, beta_n=0.01, alpha_r=0.05, beta_r=0.005,
                gamma=2.0, init_batch=64.0, min_local=8.0, max_local=128.0, max_batch=4096.0,
                pgns=((0.0, 100.0), (1.0, 10000.0)))
    base.update(kw)
    return goodput.AppCurve("test", **base)  # type: ignore[arg-type]


def test_step_time_by_hand() -> None:
    c = _curve()
    # one GPU: compute 0.1 + 0.01 * 32 = 0.42; network 1e-8: (0.42^2 + 1e-16)^(1/2) ~ 0.42
    assert c.step_time(1, 32)[0] == pytest.approx(0.42, rel=1e-9)
    # 4 GPUs in one node: network 0.05 + 0.005 * 2 = 0.06
    t, n = c.step_time(4, 32)
    assert n == pytest.approx(0.06)
    assert t == pytest.approx(math.hypot(0.42, 0.06))
    # 16 GPUs cross nodes (NODE_GPUS = 4): 0.2 + 0.01 * 14 = 0.34
    assert goodput.NODE_GPUS == 4
    assert c.step_time(16, 32)[1] == pytest.approx(0.34)


def test_pgns_interpolates_in_log_space_and_clamps() -> None:
    c = _curve()
    assert c.phi(0.0) == 100.0 and c.phi(1.0) == 10000.0
    assert c.phi(0.5) == pytest.approx(1000.0)  # geometric midpoint
    assert c.phi(-1.0) == 100.0 and c.phi(2.0) == 10000.0


def test_efficiency_is_pollux_formula() -> None:
    c = _curve()
    # (phi + B0) / (phi + B) at p = 0: (100 + 64) / (100 + 256)
    assert c.efficiency(256, 0.0) == pytest.approx(164 / 356)
    assert c.efficiency(64, 0.3) == pytest.approx(1.0)


def test_accumulation_skips_the_allreduce() -> None:
    c = _curve(max_local=32.0)
    # local 64 = 2 x 32: one accumulation step of compute only
    step, _ = c.step_time(4, 32)
    compute = 0.1 + 0.01 * 32
    assert c.throughput(4, 64) == pytest.approx(4 * 64 / (step + compute))


@pytest.mark.parametrize("family", sorted(goodput.FAMILY_APPS))
def test_beyond_is_sublinear_and_continuous(family: str) -> None:
    c = goodput.JobCurve(goodput.app_for(family), g=1, w_req=4, w_max=8)
    for p in (0.0, 0.5, 1.0):
        assert c.beyond(8, p) == pytest.approx(1.0)
        for w in (9, 12, 16, 32, 64):
            assert 0 < c.beyond(w, p) < w / 8  # never linear past w_max


def test_tuned_reference_batch_is_neutral() -> None:
    c = goodput.JobCurve(goodput.app_for("resnet50"), g=1, w_req=4, w_max=16)
    assert c.tuned(8, 1.0, 0.5) == pytest.approx(1.0)
    lo, hi = c.lam_range(8)
    assert 0 < lo <= hi


def test_ceiling() -> None:
    assert goodput.ceiling_workers(1, 4) == 64
    assert goodput.ceiling_workers(4, 4) == 16
    assert goodput.ceiling_workers(8, 16) == 16  # never below w_max


@pytest.mark.skipif(not PROFILES.exists(), reason=f"{PROFILES} (the Pollux profiles) is absent")
def test_fitted_constants_match_a_fresh_fit() -> None:
    from aryl_gym.workload.fit import fit_app_curves

    fresh = fit_app_curves(PROFILES)
    for app, f in fresh.items():
        c = goodput.APP_CURVES[app]
        got = (c.alpha_c, c.beta_c, c.alpha_n, c.beta_n, c.alpha_r, c.beta_r, c.gamma)
        for a, b in zip(got, f["params"]):
            assert a == pytest.approx(b, rel=1e-4, abs=1e-12), app
        assert (c.init_batch, c.min_local, c.max_local, c.max_batch) == f["batches"]
        for (p0, v0), (p1, v1) in zip(c.pgns, f["knots"]):
            assert p0 == p1 and v0 == pytest.approx(v1, rel=1e-4), app
        # PGNS never falls as training progresses (isotonic fit)
        vals = [v for _, v in c.pgns]
        assert vals == sorted(vals)
        assert f["rmsle"] < 0.2  # the throughput model fits the profile (log step time)


# ---------------------------------------------------------------------------------------------
# the engine: elasticity modes, the curve, tuned batches
# ---------------------------------------------------------------------------------------------
def _sim(jobs: list[JobSpec], servers: int = 4) -> Simulator:
    cfg = load_scenario("tiny").replace(
        cluster={"train_servers": servers, "train_gpus_per_server": 8, "inf_servers": 0},
        inference={"mode": "constant", "mean": 0.5},
    )
    return Simulator(cfg, jobs, np.full(1000, 0.5), seed=0)


def _job(i: int = 0, w_min: int = 2, w_max: int = 4, elastic: bool = True,
         family: str = "resnet50", work: float = 3600.0 * 8) -> JobSpec:
    return JobSpec(i, 0.0, family, 1, w_min, w_max, elastic, False, work, work)


class _Fixed:
    """A policy that asks for fixed targets every round."""

    uses_loaning = False
    event_driven = False
    reclaim = None

    def __init__(self, targets: dict[int, int], elasticity: str = "limited",
                 batch: dict[int, float] | None = None, interval: float | None = None):
        from aryl_gym.sim.view import PlacementOptions

        self.placement = PlacementOptions()
        self.targets, self.elasticity, self.batch = targets, elasticity, batch
        self.decision_interval_s = interval
        self.name = "fixed"
        self.rounds = 0

    def reset(self, seed: int | None = None) -> None:
        self.rounds = 0

    def decide(self, view):  # noqa: ANN001
        self.rounds += 1
        return Decision(targets=dict(self.targets), pools={j: TRAIN for j in self.targets},
                        batch=self.batch)


def test_limited_mode_clamps_to_w_max_and_elastic_mode_does_not() -> None:
    sim = _sim([_job(w_max=4)])
    sim.begin(_Fixed({0: 10}))
    sim.step(_Fixed({0: 10}))
    assert sim.workers[0] == 4  # clamped to w_max (the report says so)
    sim2 = _sim([_job(w_max=4)])
    pol = _Fixed({0: 10}, elasticity="elastic")
    sim2.begin(pol)
    sim2.step(pol)
    assert sim2.workers[0] == 10
    # the true rate past w_max: rate(w_max) times the curve's ratio at the job's progress
    # (at the round's start: the job started at progress 0)
    c = sim2.job_curve(0)
    assert sim2.rate[0] == pytest.approx(4.0 * c.beyond(10, 0.0))
    check(sim2)


def test_elastic_mode_keeps_inelastic_jobs_fixed_and_all_mode_resizes_them() -> None:
    jobs = [_job(0, 2, 2, elastic=False, family="lstm")]
    for mode, want in (("elastic", 2), ("all", 6)):
        sim = _sim(jobs)
        pol = _Fixed({0: 6}, elasticity=mode)
        sim.begin(pol)
        sim.step(pol)
        assert sim.workers[0] == want, mode
        check(sim)


def test_ceiling_is_hard() -> None:
    sim = _sim([_job(w_max=4)], servers=16)
    pol = _Fixed({0: 100}, elasticity="all")
    sim.begin(pol)
    sim.step(pol)
    assert sim.workers[0] == 64 == sim.w_ceil[0]


def test_progress_dependent_rate_is_refreshed_every_round() -> None:
    sim = _sim([_job(w_max=4, work=3600.0 * 64)])
    pol = _Fixed({0: 16}, elasticity="elastic")
    sim.begin(pol)
    rates = []
    for _ in range(30):
        p = sim.progress(0)  # the rate of a round follows the progress at its start
        sim.step(pol)
        rates.append(float(sim.rate[0]))
        c = sim.job_curve(0)
        assert sim.rate[0] == pytest.approx(4.0 * c.beyond(16, p))
    assert rates[-1] != rates[1]  # the noise scale grows with progress: the curve moves


def test_batch_is_valued_by_the_simulator_not_the_policy() -> None:
    sim = _sim([_job(w_max=4, work=3600.0 * 64)])
    pol = _Fixed({0: 4}, batch={0: 2.0})
    sim.begin(pol)
    sim.step(pol)
    c = sim.job_curve(0)
    lam_lo, lam_hi = c.lam_range(4)
    assert c.tuned(4, 1e6, 0.0) == c.tuned(4, lam_hi, 0.0)  # cut to what the app allows
    want = 4.0 * c.tuned(4, min(max(2.0, lam_lo), lam_hi), 0.0)
    assert sim.rate[0] == pytest.approx(want)
    # back to the reference batch: the linear rate again
    pol.batch = {0: 1.0}
    sim.step(pol)
    assert sim.rate[0] == pytest.approx(4.0)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, 0.0, "x"])
def test_bad_batch_factor_is_reported_not_applied(bad: object) -> None:
    sim = _sim([_job()])
    pol = _Fixed({0: 4}, batch={0: bad})  # type: ignore[dict-item]
    sim.begin(pol)
    info = sim.step(pol)
    assert info.report.invalid and 0 not in sim.batch_lam


def test_policy_decision_interval() -> None:
    sim = _sim([_job(work=3600.0 * 4)])
    pol = _Fixed({0: 4}, interval=30.0)
    sim.begin(pol)
    sim.step(pol)
    assert sim.now == 30.0
    with pytest.raises(ValueError, match="decision_interval_s"):
        sim.begin(_Fixed({0: 4}, interval=-5.0))


def test_requeue_time_counts_in_the_total_queue() -> None:
    jobs = [_job(0, 4, 4, elastic=False, family="lstm", work=3600.0 * 4 * 2)]
    sim = _sim(jobs)
    run, stop = _Fixed({0: 4}), _Fixed({0: 0})
    sim.begin(run)
    sim.step(run)  # starts at t=0
    sim.step(stop)  # preempted at t=60
    for _ in range(4):
        sim.step(stop)  # still queued at 120 .. 300; restarted at 360
    while not sim.done:
        sim.step(run)
    res = __import__("aryl_gym.metrics", fromlist=["episode_result"]).episode_result(sim, "x", 0.0)
    assert res.avg_queue_time == 0.0
    assert res.avg_queue_time_total == pytest.approx(360.0 - 60.0)
    # JCT = queuing (total) + running for a finished episode
    assert res.avg_jct == pytest.approx(res.avg_queue_time_total + res.avg_run_time)


# ---------------------------------------------------------------------------------------------
# policies
# ---------------------------------------------------------------------------------------------
def test_baseline_passes_over_a_job_that_does_not_fit() -> None:
    jobs = [
        JobSpec(0, 0.0, "lstm", 8, 3, 3, False, False, 1e5, 1e5),  # 24 GPUs: runs
        JobSpec(1, 1.0, "lstm", 8, 2, 2, False, False, 1e5, 1e5),  # 16 GPUs: does not fit now
        JobSpec(2, 2.0, "lstm", 8, 1, 1, False, False, 1e5, 1e5),  # 8 GPUs: fits
    ]
    for name, started in (("baseline", {0, 2}), ("fifo", {0})):
        sim = _sim(jobs)
        pol = make_policy(name)
        sim.begin(pol)
        sim.step(pol)
        sim.step(pol)
        assert set(sim.running_ids()) == started, name


def test_aryl_pause_charges_only_resizes() -> None:
    ep = make_episode("testbed", 3)
    a = ep.simulator().run(make_policy("aryl"))
    b = ep.simulator().run(make_policy("aryl-pause"))
    assert a.jobs_completed == b.jobs_completed == a.jobs_total
    assert b.scaling_events <= a.scaling_events


def test_every_policy_keeps_the_invariants_on_a_v2_episode() -> None:
    from aryl_gym.sim.invariants import InvariantChecker

    ep = make_episode("tiny", 1)
    for name in ("baseline", "aryl", "aryl-pause"):
        sim = ep.simulator()
        sim.run(make_policy(name), on_round=InvariantChecker())


# ---------------------------------------------------------------------------------------------
# world versions and the generator
# ---------------------------------------------------------------------------------------------
def test_world_v1_restores_v1_knobs_of_shipped_scenarios() -> None:
    for name, fields in V1_OVERRIDES.items():
        v1 = in_world(load_scenario(name), "v1")
        assert v1.inference.sample_noise == 0.02
        for section, vals in fields.items():
            for k, v in vals.items():
                assert getattr(getattr(v1, section), k) == v
    v2 = load_scenario("basic")
    assert in_world(v2, "v2") is v2
    assert v2.inference.sample_noise == 0.0 and v2.workload.elastic_gpu_share == 0.36
    # a user's config is its own world
    mine = dataclasses.replace(v2, source="/tmp/mine.yaml")
    assert in_world(mine, "v1") is mine
    with pytest.raises(ValueError, match="world must be"):
        in_world(v2, "v3")
    # a knob the caller set keeps its value; the others take World v1's
    mine_load = in_world(load_scenario("testbed").replace(workload={"load": 1.0}), "v1")
    assert mine_load.workload.load == 1.0 and mine_load.inference.sample_noise == 0.02


def test_env_ids_draw_their_worlds() -> None:
    import gymnasium as gym

    import aryl_gym  # noqa: F401

    e1 = gym.make("aryl_gym/Aryl-v1", scenario="basic").unwrapped
    assert e1.world_version == "v1"
    e2 = gym.make("aryl_gym/Aryl-v2", scenario="basic").unwrapped
    assert e1.config.workload.elastic_gpu_share is None and e1.config.workload.load == 0.8
    assert e2.config.workload.elastic_gpu_share == 0.36


def test_elastic_gpu_share_is_kept_at_any_count_share() -> None:
    from aryl_gym.workload.generator import _max_gpus, elastic_gpu_time_share, elastic_size_scale

    cfg = load_scenario("basic")
    for count in (0.015, 0.03, 0.06):
        c = cfg.replace(workload={"elastic_fraction": count})
        s = elastic_size_scale(c.workload, _max_gpus(c), 8)
        share = elastic_gpu_time_share(c.workload, _max_gpus(c), 8, s)
        assert share == pytest.approx(0.36, abs=0.02), count
    # larger count shares need smaller elastic jobs
    scales = [elastic_size_scale(cfg.replace(workload={"elastic_fraction": x}).workload,
                                 _max_gpus(cfg), 8) for x in (0.015, 0.03, 0.06)]
    assert scales[0] > scales[1] > scales[2]
    with pytest.raises(ConfigError, match="elastic_gpu_share"):
        bad = cfg.replace(workload={"elastic_fraction": 0.5})
        elastic_size_scale(bad.workload, _max_gpus(bad), 8)


def test_default_share_sample_keeps_world_v2s_scale() -> None:
    """World v2's traces rest on this factor (basic, ideal and production draw the same job
    shapes): the default share sample must keep it to the last bit."""
    from aryl_gym.workload.generator import _max_gpus, elastic_size_scale

    for name in ("basic", "production"):
        cfg = load_scenario(name)
        assert cfg.workload.elastic_share_sample == "shapes-100k"
        assert elastic_size_scale(cfg.workload, _max_gpus(cfg), 8) == 1.1722238102965399


@pytest.mark.slow
def test_trace_share_sample_realises_the_target_in_generated_traces() -> None:
    """``elastic_share_sample: trace`` calibrates on the trace's own shapes (scatter and clip
    included): pooled over generated production traces the elastic GPU-time share is near the
    target, where World v2's 100k-shape sample lands about 0.02 higher (docs/model.md, "World
    v2 calibration"; 100 seeds in experiments/26-elastic-share-bias: 0.364 against 0.384)."""
    from aryl_gym.sim.jobs import ELASTIC_FAMILIES
    from aryl_gym.workload.generator import _max_gpus, elastic_size_scale

    base = load_scenario("production")
    trace = base.replace(workload={"elastic_share_sample": "trace"})
    s_v2 = elastic_size_scale(base.workload, _max_gpus(base), 8)
    s_tr = elastic_size_scale(trace.workload, _max_gpus(trace), 8)
    assert s_tr < s_v2  # the trace's clip cuts inelastic time: smaller elastic jobs suffice

    def pooled(cfg, seeds):
        el = tot = 0.0
        for sd in seeds:
            for j in make_episode(cfg, sd).jobs:
                gt = j.work * j.g
                tot += gt
                el += gt if j.elastic and j.family in ELASTIC_FAMILIES else 0.0
        return el / tot

    seeds = range(8)
    got_tr, got_v2 = pooled(trace, seeds), pooled(base, seeds)
    assert got_tr < got_v2
    assert got_tr == pytest.approx(0.36, abs=0.03)
    # the default stays World v2's (its scale is pinned in the test above)
    assert base.workload.elastic_share_sample == "shapes-100k"
    with pytest.raises(ConfigError, match="elastic_share_sample"):
        base.replace(workload={"elastic_share_sample": "exact"})


def test_no_share_target_draws_the_v1_trace() -> None:
    v1 = in_world(load_scenario("basic"), "v1")
    a = make_episode(v1, 4).jobs
    b = make_episode(v1.replace(workload={"elastic_gpu_share": None}), 4).jobs
    assert a == b
    assert INFER != TRAIN  # the pools stay distinct constants


def test_elastic_run_share_is_the_elastic_jobs_share_of_running_time() -> None:
    # job 0 elastic: 4 workers x 1 GPU, work 4 h of 1-GPU time -> 1 h of running;
    # job 1 inelastic: 2 workers, work 6 h -> 3 h of running: elastic share 1 / (1 + 3) = 0.25
    jobs = [_job(0, 4, 4, elastic=True, work=3600.0 * 4),
            _job(1, 2, 2, elastic=False, family="lstm", work=3600.0 * 6)]
    sim = _sim(jobs)
    run = _Fixed({0: 4, 1: 2})
    sim.begin(run)
    while not sim.done:
        sim.step(run)
    res = __import__("aryl_gym.metrics", fromlist=["episode_result"]).episode_result(sim, "x", 0.0)
    rt = np.asarray(sim.running_time, dtype=float)
    assert res.elastic_run_share == pytest.approx(rt[0] / (rt[0] + rt[1]))
    assert res.elastic_run_share == pytest.approx(0.25, rel=0.05)  # overheads aside


def test_fit_elastic_count_share_by_hand() -> None:
    """Both readings of the elastic count share on four jobs, computed by hand."""
    from aryl_gym.workload.fit import ELASTIC_GPU_SHARE, fit_elastic_count_share

    durs = np.array([3600.0, 7200.0, 1800.0, 10.0])
    gpus = np.array([1, 4, 2, 8])
    out = fit_elastic_count_share(durs, gpus)
    tot = 3600 + 28800 + 3600 + 80  # GPU-seconds
    # multi-GPU: the last three jobs
    assert out["multi_gpu_gpu_time_share"] == pytest.approx(32480 / tot)
    assert out["multi_gpu_count_share"] == pytest.approx(0.75)
    assert out["multi_gpu"] == pytest.approx(ELASTIC_GPU_SHARE * tot / 32480 * 0.75)
    assert out["multi_gpu_mean_hours"] == pytest.approx((7200 + 1800 + 10) / 3 / 3600)
    # multi-GPU and at least an hour: the 4-GPU job alone
    assert out["long_multi_gpu_gpu_time_share"] == pytest.approx(28800 / tot)
    assert out["long_multi_gpu_count_share"] == pytest.approx(0.25)
    assert out["long_multi_gpu"] == pytest.approx(ELASTIC_GPU_SHARE * tot / 28800 * 0.25)
    assert out["long_multi_gpu_mean_hours"] == pytest.approx(2.0)
    # the threshold moves the long reading only
    out2 = fit_elastic_count_share(durs, gpus, long_s=1800.0)
    assert out2["long_multi_gpu_count_share"] == pytest.approx(0.5)
    assert out2["multi_gpu"] == out["multi_gpu"]


@pytest.mark.parametrize(
    ("durs", "gpus", "words"),
    [
        ([], [], "non-empty"),
        ([1.0, 2.0], [1], "one length"),
        ([3600.0, -1.0], [2, 2], ">= 0"),
        ([3600.0, float("nan")], [2, 2], "finite"),
        ([3600.0, 7200.0], [1, 1], "no GPU-time"),
        ([60.0, 7200.0], [4, 1], "at least 3600 s"),
    ],
)
def test_fit_elastic_count_share_refuses_what_it_cannot_read(durs, gpus, words) -> None:
    from aryl_gym.workload.fit import fit_elastic_count_share

    with pytest.raises(ValueError, match=words):
        fit_elastic_count_share(np.array(durs, dtype=float), np.array(gpus, dtype=float))


@pytest.mark.slow
def test_production_calibration_meets_the_paper_facts_it_claims(capsys) -> None:
    """`calibrate --scenario production` (seed 0, World v2, Baseline = YARN FIFO): the facts
    docs/model.md ("World v2 calibration") states as met still hold, and the two it states as
    missed are still below the paper (so a change that reaches them is noticed and the docs
    updated). The elastic GPU-time share is the known calibration gap: between the paper's 36%
    and the seed-to-seed range the docs give."""
    import json

    from aryl_gym.cli import main

    assert main(["calibrate", "--scenario", "production", "--seed", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = {r["key"]: r["measured"] for r in out["rows"]}
    assert m["avg_queue_time"] > 3000.0                       # paper: above 3,000 s
    assert m["inference_mean"] == pytest.approx(0.65, rel=0.05)  # about 65%
    assert m["inference_peak_to_trough"] == pytest.approx(2.2, rel=0.10)
    # up to 21% (workload.type_agnostic_fraction 0.21, drawn per batch: seed 0 has 22.3%)
    assert m["type_agnostic_share"] == pytest.approx(0.21, abs=0.02)
    assert m["elastic_mean_hours"] == pytest.approx(14.2, rel=0.10)
    assert 0.36 <= m["elastic_gpu_time_share"] <= 0.48        # the known gap (docs/model.md)
    assert all(r["within_25pct"] for r in out["rows"] if "within_25pct" in r)  # arrivals
    # stated as missed: utilisation (about 82%) and the job count (about 50,000)
    assert m["train_util"] < 0.72 and m["jobs"] < 45_000


def test_an_episode_cut_short_counts_only_the_jobs_it_submitted() -> None:
    # job 0 runs and is preempted once, job 1 waits throughout, job 2 arrives after the cut
    from aryl_gym.metrics import episode_result, lower_bounds

    jobs = [_job(0, 4, 4, elastic=False, family="lstm", work=3600.0 * 4 * 10),
            _job(1, 4, 4, elastic=False, family="lstm", work=3600.0 * 4 * 10),
            dataclasses.replace(_job(2, 4, 4, elastic=False, family="lstm"), submit=3600.0 * 19.5)]
    sim = _sim(jobs, servers=1)  # room for one of them
    run, stop = _Fixed({0: 4}), _Fixed({0: 0})
    sim.begin(run)
    sim.step(run)
    sim.step(stop)  # job 0 preempted
    while sim.now < 2.5 * 3600.0:
        sim.step(run)
    assert not sim.done and sim.state[2] == 0 and jobs[2].submit > sim.now
    res = episode_result(sim, "x", 0.0)
    assert res.failed == 1
    # was: 1/3 (the unsubmitted job counted as not preempted)
    assert res.preemption_ratio == pytest.approx(1 / 2)
    # was: the mean over all three jobs; now over the ones avg_jct counts
    assert res.jct_lower_bound == pytest.approx(float(lower_bounds(sim)[:2].mean()))
    # the arrival window of the submitted jobs (both at 0: hour 0); was: 20 hours, up to the
    # unsubmitted job's arrival, far past the cut
    assert len(res.queued_share_hourly) == 1
    # job 1 waits for its first start all hour, job 0 started at once (a preemption is not a wait
    # for the first start)
    assert res.queued_share_hourly == [0.5] and res.max_hourly_queued_share == 0.5
    # a later arrival inside the episode extends the window to the cut, not past it
    late = [*jobs[:2], dataclasses.replace(jobs[2], submit=3600.0 * 1.5)]
    sim = _sim(late, servers=1)
    sim.begin(run)
    while sim.now < 2.5 * 3600.0:
        sim.step(run)
    res = episode_result(sim, "x", 0.0)
    assert len(res.queued_share_hourly) == 2  # hours 0 and 1 (the last arrival at 1.5 h)
    # hour 1: job 1 queued 3,600 s and job 2 1,800 s, of 3,600 + 3,600 + 1,800 s in the system
    assert res.queued_share_hourly == [0.5, pytest.approx(5400 / 9000)]
