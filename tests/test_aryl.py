"""The Aryl reference agent (paper sections 4-5; SPEC 3) on hand-made cases and full runs."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import make_policy
from aryl_gym.agents.aryl import ArylPolicy
from aryl_gym.agents.reclaim import reclaim_preemptions

from aryl_gym.config import load_scenario
from aryl_gym.scenario import make_episode
from aryl_gym.sim.invariants import check as check_invariants
from aryl_gym.sim.jobs import JobSpec, JobState
from aryl_gym.sim.view import TRAIN


def _job(
    i: int,
    g: int,
    w: int,
    dur: float,
    *,
    wmin: int | None = None,
    ta: bool = False,
    submit: float = 0.0,
    family: str = "cnn",
) -> JobSpec:
    """A job running ``dur`` seconds at ``w`` workers on V100 (work = dur * w)."""
    elastic = wmin is not None and wmin < w
    return JobSpec(
        id=i,
        submit=submit,
        family=family,
        g=g,
        w_min=wmin if elastic else w,
        w_max=w,
        elastic=elastic,
        type_agnostic=ta,
        work=dur * w,
        pred_work=dur * w,
    )


def _tiny_train_only():
    """tiny's cluster (2 x 4 V100 + 2 x 4 T4), inference always busy (nothing loanable)."""
    cfg = load_scenario("tiny")
    return cfg.replace(inference={"mode": "constant", "mean": 1.0})


def _run_hand(policy, jobs):
    ep = make_episode(_tiny_train_only(), 0, jobs=jobs)
    sim = ep.simulator()
    res = sim.run(policy)
    return sim, res


def test_no_loaning_no_elasticity_reduces_to_sjf() -> None:
    # 8 training GPUs. Shortest first: job 3 (300 s), job 1 (600 s), job 2 (1200 s), job 0 (3600 s).
    jobs = [
        _job(0, 1, 4, 3600.0),
        _job(1, 1, 4, 600.0),
        _job(2, 1, 2, 1200.0),
        _job(3, 4, 1, 300.0),
    ]
    sim_a, _ = _run_hand(ArylPolicy("aryl-plain", loaning=False, elastic=False), jobs)
    sim_s, _ = _run_hand(make_policy("sjf"), jobs)
    np.testing.assert_allclose(sim_a.first_start, sim_s.first_start)
    np.testing.assert_allclose(sim_a.finish, sim_s.finish)
    # By hand: t=0 job 3 (4 GPUs) and job 1 (4 GPUs) fill the cluster; job 3 ends at 300 and
    # job 2 (2 GPUs) starts in the round at 300; job 1 ends at 600, job 0 (4 GPUs) starts then.
    np.testing.assert_allclose(sim_a.first_start, [600.0, 0.0, 300.0, 0.0])
    np.testing.assert_allclose(sim_a.finish, [4200.0, 600.0, 1500.0, 300.0])
    # FIFO differs (job 0 first), so the comparison can fail
    sim_f, _ = _run_hand(make_policy("fifo"), jobs)
    assert sim_f.first_start[0] == 0.0


def test_no_elasticity_runs_elastic_jobs_at_their_request() -> None:
    # World v1: the job requests its base demand (1 worker) and could grow to 4; without
    # elastic scaling it runs at the request: work 600 x 4 = 2,400 worker-s at 1 worker.
    jobs = [_job(0, 1, 4, 600.0, wmin=1)]
    sim, _ = _run_hand(ArylPolicy("x", loaning=False, elastic=False), jobs)
    assert sim.finish[0] == pytest.approx(2400.0)
    assert int(sim.scale_out_count.sum() + sim.scale_in_count.sum()) == 0


def test_aryl_grows_to_w_max_when_idle_and_back_to_request_on_arrival() -> None:
    """World v1 by hand on tiny's training pool (2 servers x 4 V100), no loaning, 60 s rounds,
    10 s scaling overhead, no first-start overhead.

    Job 0: elastic, requests 1 worker (w_min), w_max 4, work 4 x 3,000 = 12,000 worker-s.
    Job 1: inelastic, 5 workers of 1 GPU, work 5 x 600 = 3,000, submitted at 600 s.
    t = 0: Aryl starts job 0 and phase two grows it to 4 workers at once (idle GPUs).
    t = 600: phase one gives job 1 its 5 workers (one must stand on job 0's server); the
    knapsack gives job 0 the 2 GPUs left, so it scales in to 3 workers (10 s overhead).
    Job 1 runs 600 s and ends at 1,200; job 0 then scales out to 4 again (10 s overhead).
    Job 0's progress: 4 x 600 = 2,400 by 600 s; + 3 x 590 = 4,170 by 1,200 s; the remaining
    7,830 at 4 workers take 1,957.5 s after 1,210 s: it ends at 3,167.5 s.
    """
    jobs = [
        _job(0, 1, 4, 3000.0, wmin=1),
        _job(1, 1, 5, 600.0, submit=600.0),
    ]
    sim, _ = _run_hand(ArylPolicy("x", loaning=False), jobs)
    assert sim.first_start[1] == pytest.approx(600.0)
    assert sim.finish[1] == pytest.approx(1200.0)
    assert int(sim.scale_in_count[0]) == 1 and int(sim.scale_out_count[0]) == 1
    assert sim.finish[0] == pytest.approx(3167.5)


def test_baseline_runs_at_request_and_bound_is_below_w_max() -> None:
    from aryl_gym.metrics import lower_bounds
    from aryl_gym.sim.goodput import job_min_time_factor

    jobs = [_job(0, 1, 4, 600.0, wmin=1)]  # request 1 worker, w_max 4, work 2,400
    sim, _ = _run_hand(make_policy("fifo"), jobs)
    assert sim.finish[0] == pytest.approx(2400.0)  # Baseline: 1 worker, the request
    # alone at w_max = 4 on a V100 takes 600 s; the bound also counts what more workers (up to
    # the ceiling and the cluster) and a tuned batch would give
    j = sim.jobs[0]
    room = sim.config.cluster.train_servers * (sim.config.cluster.train_gpus_per_server // j.g)
    w_cap = min(max(4, sim.config.sim.ceiling_gpus // j.g), room)
    f = job_min_time_factor(j.family, j.app, j.g, j.w_req, j.w_max, j.batch_size, j.scaling, w_cap)
    assert 0 < f <= 1 and lower_bounds(sim)[0] == pytest.approx(600.0 * f)


def test_phase_two_two_job_structure() -> None:
    """Two elastic jobs with the same range; the bigger workload gets more spare workers.

    8 training GPUs; inelastic job 2 holds 3, bases of jobs 0 and 1 hold 1 each: 3 spare.
    Gains over w_min=1 with T(w) = W/w: A (W=120k): 60k, 80k, 90k; B (W=60k): 30k, 40k, 45k.
    The knapsack gives A 2 extra and B 1 extra (110k), not A 3 (90k) nor A 1 + B 2 (100k).
    """
    jobs = [
        _job(0, 1, 4, 30000.0, wmin=1),  # work 120,000
        _job(1, 1, 4, 15000.0, wmin=1),  # work 60,000
        _job(2, 1, 3, 50000.0),
    ]
    ep = make_episode(_tiny_train_only(), 0, jobs=jobs)
    sim = ep.simulator()
    pol = ArylPolicy("aryl", loaning=False)
    pol.reset(0)
    sim.begin(pol)
    sim.step(pol)
    assert list(sim.workers) == [3, 2, 3]
    assert int(sim.srv_free[sim.srv_pool == TRAIN].sum()) == 0


def test_phase_one_beats_flexible_workers() -> None:
    """The inelastic workload comes first: a queued job may take GPUs from flexible workers."""
    jobs = [
        _job(0, 1, 8, 20000.0, wmin=2),
        _job(1, 4, 1, 600.0, submit=120.0),
    ]
    sim, res = _run_hand(ArylPolicy("aryl", loaning=False), jobs)
    assert sim.first_start[1] == pytest.approx(120.0)  # no waiting for the elastic job
    assert int(sim.scale_in_count[0]) >= 1 and int(sim.scale_out_count[0]) >= 1
    assert sim.preempt_count.sum() == 0 and res.jobs_completed == 2


def _check_invariants(sim) -> None:
    check_invariants(sim)  # aryl_gym.sim.invariants: every invariant of SPEC 1 on the state


@pytest.mark.parametrize("scenario,seed", [("tiny", 0), ("tiny", 3), ("testbed", 1)])
@pytest.mark.parametrize("name", ["aryl", "aryl-nogroup"])
def test_full_runs_keep_invariants(scenario: str, seed: int, name: str) -> None:
    ep = make_episode(scenario, seed)
    sim = ep.simulator()
    pol = make_policy(name)
    pol.reset(seed)
    sim.begin(pol)
    n_pre_pred = n_pre = 0
    orig = pol.reclaim

    def spy(view, n):  # the preemptions the rule predicts must be what the simulator does
        nonlocal n_pre_pred
        picked = orig(view, n)
        n_pre_pred += reclaim_preemptions(view, picked)
        return picked

    pol.reclaim = spy  # type: ignore[method-assign]
    rounds = 0
    while not sim.done and rounds < 20000:
        info = sim.step(pol)
        n_pre += len(info.preempted_by_reclaim)
        assert not info.report.unplaced, info.report.unplaced
        assert not info.report.invalid, info.report.invalid
        _check_invariants(sim)
        rounds += 1
    assert sim.done, "every job finishes"
    assert np.all(sim.state == JobState.DONE)
    assert n_pre == n_pre_pred


def test_determinism_and_variants() -> None:
    a = make_episode("testbed", 2).simulator().run(make_policy("aryl"))
    b = make_episode("testbed", 2).simulator().run(make_policy("aryl"))
    assert a.jcts == b.jcts and a.preemptions == b.preemptions
    assert make_policy("aryl").uses_loaning and not make_policy("aryl-noloan").uses_loaning
    assert make_policy("aryl").placement.group_flexible
    ng = make_policy("aryl-nogroup").placement
    assert not ng.group_flexible and not ng.elastic_prefer_inference
    assert make_policy("aryl-optimal-reclaim").reclaim_rule == "optimal"  # type: ignore[attr-defined]
    assert make_policy("aryl-default-reclaim").reclaim_rule == "default"  # type: ignore[attr-defined]
    assert make_policy("aryl").event_driven
    with pytest.raises(ValueError, match="reclaim rule"):
        ArylPolicy(reclaim="nope")


def test_aryl_uses_loaned_servers_on_testbed() -> None:
    res = make_episode("testbed", 0).simulator().run(make_policy("aryl"))
    assert res.loaned_gpu_hours_used > 0
    assert res.unplaced_targets == 0
    res_nl = make_episode("testbed", 0).simulator().run(make_policy("aryl-noloan"))
    assert res_nl.loaned_gpu_hours_used == 0


def test_cli_compare_reclaim_study_and_bench(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from aryl_gym.benchmarks import BENCHMARKS
    from aryl_gym.cli import main

    assert (
        main(
            ["compare", "--scenario", "tiny", "--policies", "fifo,aryl", "--seeds", "0,1", "--json"]
        )
        == 0
    )
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert [(r["policy"], r["seed"]) for r in out["rows"]] == [
        ("fifo", 0),
        ("aryl", 0),
        ("fifo", 1),
        ("aryl", 1),
    ]
    assert out["ratios"]["fifo"]["avg_jct"] == pytest.approx(1.0)

    def mean(p):
        return sum(r["avg_jct"] for r in out["rows"] if r["policy"] == p) / 2

    assert out["ratios"]["aryl"]["avg_jct"] == pytest.approx(mean("aryl") / mean("fifo"))
    assert cap.err.count("tiny seed") == 4  # one progress line per episode
    assert main(["compare", "--scenario", "tiny", "--policies", "fifo,nope"]) == 2
    assert "unknown policy" in capsys.readouterr().err

    assert main(["reclaim-study", "--instances", "8", "--max-servers", "8", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["aryl"]["preemptions"] >= st["optimal"]["preemptions"]
    assert 0.0 <= st["aryl"]["equal_fraction"] <= 1.0 and 0.0 <= st["aryl"]["overlap"] <= 1.0
    assert {"sim", "knapsack"} <= {b.name for b in BENCHMARKS}


# ------------------------------------------------------------------------------------------------
# aryl-preempt [ours]: Aryl that preempts long running jobs for much shorter queued ones
def test_preempt_serves_a_short_arrival_by_hand() -> None:
    # 8 training GPUs. Job 0 holds all of them for 10 h; job 1 (4 GPUs, 600 s) arrives at 120 s
    # (a round boundary: tiny decides every 60 s).
    jobs = [_job(0, 1, 8, 36000.0), _job(1, 1, 4, 600.0, submit=120.0)]
    relaunch = _tiny_train_only().sim.relaunch_for("cnn")
    sim_a, _ = _run_hand(make_policy("aryl"), jobs)
    np.testing.assert_allclose(sim_a.first_start, [0.0, 36000.0])  # Aryl never preempts
    sim_p, _ = _run_hand(make_policy("aryl-preempt"), jobs)
    # By hand: at 120 s job 1 is 59.8x shorter than job 0's remaining 35,880 s (factor 2), so
    # job 0 is preempted and job 1 starts in the same round; job 0 cannot come back on the 4
    # GPUs left (it needs 8), so it relaunches when job 1 ends at 720 s and pays the relaunch.
    np.testing.assert_allclose(sim_p.first_start, [0.0, 120.0])
    np.testing.assert_allclose(sim_p.finish, [720.0 + relaunch + 35880.0, 720.0])
    assert sim_p.preempt_count.tolist() == [1, 0]
    assert sim_a.preempt_count.tolist() == [0, 0]
    assert sim_p.finish.sum() < sim_a.finish.sum()  # the point of preempting


def test_preempt_respects_its_factor() -> None:
    # The queued job is only 1.8x shorter than what job 0 has left (35,880 s at 120 s): factor
    # 2 does not preempt, factor 1.5 does.
    jobs = [_job(0, 1, 8, 36000.0), _job(1, 1, 4, 19900.0, submit=120.0)]
    sim_2, _ = _run_hand(ArylPolicy("p2", preempt=2.0), jobs)
    assert sim_2.preempt_count.tolist() == [0, 0]
    assert sim_2.first_start[1] == 36000.0
    sim_15, _ = _run_hand(ArylPolicy("p15", preempt=1.5), jobs)
    assert sim_15.preempt_count.tolist() == [1, 0]
    assert sim_15.first_start[1] == 120.0


def test_preempt_takes_the_fewest_longest_jobs() -> None:
    # Two 4-GPU jobs fill the cluster, job 0 with 10 h left and job 1 with 5 h; a 4-GPU job of
    # 600 s arrives: only job 0 (the longest) is preempted.
    jobs = [_job(0, 1, 4, 36000.0), _job(1, 1, 4, 18000.0), _job(2, 1, 4, 600.0, submit=120.0)]
    sim, _ = _run_hand(make_policy("aryl-preempt"), jobs)
    assert sim.preempt_count.tolist() == [1, 0, 0]
    assert sim.first_start[2] == 120.0


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf"), -1.0])
def test_preempt_factor_is_checked(bad: float) -> None:
    with pytest.raises(ValueError, match="preempt"):
        ArylPolicy("x", preempt=bad)
    with pytest.raises(ValueError, match="preempt_scan"):
        ArylPolicy("x", preempt=2.0, preempt_scan=0)


def test_preempt_on_testbed_keeps_invariants_and_is_placeable() -> None:
    # A full testbed episode at a high load: every decision is placed in full (no unplaced or
    # invalid targets), the simulator's invariants hold after every round, every job finishes,
    # and aryl-preempt does preempt where aryl never does.
    cfg = load_scenario("testbed").replace(workload={"load": 1.3})
    sim = make_episode(cfg, 2000).simulator()
    pol = make_policy("aryl-preempt")
    pol.reset(0)
    sim.begin(pol)
    while not sim.done:
        info = sim.step(pol)
        assert not info.report.unplaced, info.report.unplaced
        assert not info.report.invalid, info.report.invalid
        check_invariants(sim)
    assert np.all(sim.state == JobState.DONE)
    assert pol.stats.preempted > 0 and sim.preempt_count.sum() >= pol.stats.preempted
    base = make_episode(cfg, 2000).simulator().run(make_policy("aryl"))
    assert base.preemptions < int(sim.preempt_count.sum())
