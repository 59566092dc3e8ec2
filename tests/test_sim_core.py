"""The simulator kernel on hand-computed cases, invariants and determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from aryl_gym.agents import make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.scenario import make_episode
from aryl_gym.sim.invariants import check as check_invariants
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import INFER, TRAIN, Decision
from tests.helpers import ScriptedPolicy, examples, job, make_sim, small_config


def test_single_job_exact_finish_inside_round():
    cfg = small_config()
    # 1 worker, work 90 V100-seconds: finishes 90 s after its start at t=0, inside round 2.
    sim = make_sim(cfg, [job(0, work=90.0)])
    res = sim.run(make_policy("fifo"))
    assert res.jobs_completed == 1
    assert res.avg_jct == pytest.approx(90.0)
    assert res.avg_queue_time == 0.0
    assert sim.finish[0] == pytest.approx(90.0)


def test_arrival_seen_at_next_round():
    cfg = small_config()
    sim = make_sim(cfg, [job(0, submit=30.0, work=60.0)])
    res = sim.run(make_policy("fifo"))
    # submitted at 30, seen at round t=60, runs 60 s -> finish 120, JCT 90, queue 30
    assert res.avg_queue_time == pytest.approx(30.0)
    assert res.avg_jct == pytest.approx(90.0)


def test_fifo_head_of_line_blocking_golden_jcts():
    # Training pool 2 x 4 GPUs. Job 0 takes 8 GPUs (2 workers of 4) for 600 s.
    # Job 1 (4 GPUs) must wait for it; job 2 (1 GPU) is blocked behind job 1 under fifo,
    # but fifo-backfill starts... nothing either, because job 0 holds every GPU.
    cfg = small_config()
    jobs = [
        job(0, submit=0, work=600.0 * 2, g=4, w=2),
        job(1, submit=0, work=300.0, g=4, w=1),
        job(2, submit=0, work=120.0, g=1, w=1),
    ]
    res = make_sim(cfg, jobs).run(make_policy("fifo"))
    # job0 0..600; at round 600 job1 (4 GPUs) and job2 (1 GPU) both fit: job1 600..900,
    # job2 600..720. JCTs: 600, 900, 720.
    assert res.jcts == pytest.approx([600.0, 900.0, 720.0])


def test_fifo_blocks_but_backfill_passes():
    cfg = small_config()
    jobs = [
        job(0, submit=0, work=600.0, g=4, w=1),  # 4 GPUs 0..600
        job(1, submit=10, work=600.0 * 2, g=4, w=2),  # 8 GPUs: must wait for job 0
        job(2, submit=20, work=60.0, g=1, w=1),  # 1 GPU, fits beside job 0
    ]
    fifo = make_sim(cfg, jobs).run(make_policy("fifo"))
    bf = make_sim(cfg, jobs).run(make_policy("fifo-backfill"))
    # fifo: job2 waits behind job1 (600..1200) -> starts at 1200, ends 1260, JCT 1240
    assert fifo.jcts[2] == pytest.approx(1240.0)
    # backfill: job2 starts at round 60, ends 120, JCT 100
    assert bf.jcts[2] == pytest.approx(100.0)
    # job1 is not delayed in either: starts at 600 (seen at 60, blocked till 600)
    assert fifo.jcts[1] == pytest.approx(1200.0 - 10.0)
    assert bf.jcts[1] == pytest.approx(1200.0 - 10.0)


def test_sjf_orders_by_predicted_time():
    cfg = small_config(train_servers=1, train_gpus=1, inf_servers=0)
    jobs = [job(0, submit=0, work=600.0), job(1, submit=0, work=60.0), job(2, submit=0, work=120.0)]
    res = make_sim(cfg, jobs).run(make_policy("sjf"))
    # Order 1, 2, 0: finishes 60, 180 (starts at round 60, runs 120), 780
    assert res.jcts == pytest.approx([780.0, 60.0, 180.0])


def _start_on_inference(view):
    targets = {j: view.jobs[j].w_max for j in view.queued()}
    return Decision(targets=targets, pools={j: INFER for j in targets})


def test_t4_speed_and_loan_and_reclaim_preemption():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4)
    jobs = [job(0, work=4000.0, g=1, w=4, ta=True, family="cnn")]
    # u = 0 for the first 10 minutes (both servers loanable), then 0.9 (none loanable).
    util = [0.0, 0.0] + [0.9] * 200
    sim = make_sim(cfg, jobs, util)
    pol = ScriptedPolicy(_start_on_inference)
    res = sim.run(pol)
    speed = cfg.gpu_types["T4"].speed_for("cnn")
    # Runs on T4 from 0 to 600 s (reclaimed at the round t=600): progress 4 * speed * 600.
    done_by_600 = 4 * speed * 600.0
    assert sim.preempt_count[0] == 1
    assert res.preemptions == 1
    # After the reclaim, restarted on training V100 (4 GPUs) at the next decision (same round
    # t=600, since the reclaim happens before the decision), with relaunch overhead.
    relaunch = cfg.sim.relaunch_for("cnn")
    expect = 600.0 + relaunch + (4000.0 - done_by_600) / 4.0
    assert sim.finish[0] == pytest.approx(expect)
    assert res.reclaimed_servers >= 1


def _started_elastic(w_min: int):
    cfg = small_config(train_servers=2, train_gpus=4, inf_servers=3, inf_gpus=4)
    jobs = [job(0, work=8 * 3000.0, g=1, w=8, w_min=w_min, elastic=True, ta=True)]
    sim = make_sim(cfg, jobs, 0.0)
    pol = ScriptedPolicy(lambda v: Decision(targets={0: 8}, pools={0: INFER}) if v.queued() else Decision())
    sim.begin(pol)
    sim.pre_decision(pol)
    sim.apply(pol.decide(sim.view))
    return sim


def test_reclaim_of_flexible_server_scales_in_without_preemption():
    sim = _started_elastic(w_min=4)
    (base_srv,) = sim.base[0]
    (flex_srv,) = sim.flex[0]
    _, pre = sim.reclaim_servers([flex_srv])
    assert pre == [] and sim.preempt_count[0] == 0
    assert sim.workers[0] == 4 and sim.scale_in_count[0] == 1
    assert sim.overhead_left[0] == sim.config.sim.scale_overhead_s


def test_reclaim_of_base_server_relabels_flexible_workers():
    sim = _started_elastic(w_min=4)
    (base_srv,) = sim.base[0]
    (flex_srv,) = sim.flex[0]
    _, pre = sim.reclaim_servers([base_srv])
    assert pre == []
    # the 4 remaining workers on the former flexible server are now the base
    assert sim.base[0] == {flex_srv: 4} and sim.flex[0] == {}
    assert sim.srv_base_gpus[flex_srv] == 4 and sim.srv_flex_gpus[flex_srv] == 0


def test_reclaim_below_w_min_preempts():
    sim = _started_elastic(w_min=6)
    # base 6 workers need two 4-GPU servers; flexible 2 on a third
    _, pre = sim.reclaim_servers(list(sim.base[0])[:1])
    assert pre == [0] and sim.workers[0] == 0 and sim.preempt_count[0] == 1
    assert sim.state[0] == JobState.QUEUED


def test_group_flexible_separates_base_and_flexible_servers():
    cfg = small_config(train_servers=1, train_gpus=8, inf_servers=3, inf_gpus=4)
    jobs = [job(0, work=1e6, g=1, w=6, w_min=2, elastic=True, ta=True)]
    sim = make_sim(cfg, jobs, 0.0)
    pol = ScriptedPolicy(lambda v: Decision(targets={0: 6}, pools={0: INFER}) if v.queued() else Decision())
    sim.begin(pol)
    sim.pre_decision(pol)
    sim.apply(pol.decide(sim.view))
    base, flex = sim.base[0], sim.flex[0]
    assert sum(base.values()) == 2 and sum(flex.values()) == 4
    assert not set(base) & set(flex)
    # Without grouping the flexible workers join the base server first (best fit).
    sim2 = make_sim(cfg, jobs, 0.0)
    pol2 = ScriptedPolicy(pol.fn, group_flexible=False)
    sim2.begin(pol2)
    sim2.pre_decision(pol2)
    sim2.apply(pol2.decide(sim2.view))
    assert set(sim2.base[0]) & set(sim2.flex[0])


def test_type_specific_job_never_on_inference():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4)
    jobs = [job(0, work=600.0, g=1, w=4, ta=False)]
    sim = make_sim(cfg, jobs, 0.0)
    pol = ScriptedPolicy(_start_on_inference)
    sim.begin(pol)
    sim.pre_decision(pol)
    rep = sim.apply(pol.decide(sim.view))
    assert rep.started == [0]
    assert sim.pool[0] == TRAIN


def test_invalid_targets_are_reported_not_raised():
    cfg = small_config()
    sim = make_sim(cfg, [job(0), job(1, w=2, w_min=1, elastic=True)])
    pol = ScriptedPolicy(lambda v: Decision())
    sim.begin(pol)
    sim.pre_decision(pol)
    rep = sim.apply(Decision(targets={0: float("nan"), 99: 1, 1: 5, "x": 1}))
    assert len(rep.invalid) == 4  # NaN, unknown id, clamped above w_max, non-integer id
    assert rep.started == [1] and sim.workers[1] == 2


def test_unplaceable_target_gets_largest_feasible_count():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=0)
    sim = make_sim(cfg, [job(0, work=1e4, w=8, w_min=2, elastic=True)])
    pol = ScriptedPolicy(lambda v: Decision(targets={0: 8}))
    sim.begin(pol)
    sim.pre_decision(pol)
    rep = sim.apply(pol.decide(sim.view))
    assert sim.workers[0] == 4
    assert rep.unplaced == {0: (8, 4)}


# ---------------------------------------------------------------------------------------------
# invariants on random small traces
# ---------------------------------------------------------------------------------------------


def _random_jobs(data):
    n = data.draw(st.integers(1, 12))
    jobs = []
    t = 0.0
    for i in range(n):
        t += data.draw(st.floats(0, 600))
        g = data.draw(st.sampled_from([1, 2, 4]))
        w = data.draw(st.integers(1, max(1, 8 // g)))
        elastic = data.draw(st.booleans()) and w > 1
        w_min = data.draw(st.integers(1, w)) if elastic else w
        jobs.append(
            job(i, submit=round(t, 1), work=data.draw(st.floats(10, 5000)) * w, g=g, w=w,
                w_min=w_min, elastic=elastic, ta=data.draw(st.booleans()))
        )
    return jobs


def _check_invariants(sim):
    # no GPU used twice, free = cap - used, pools, loans, worker ranges, work (library checker)
    check_invariants(sim)


@settings(max_examples=examples(40))
@given(data=st.data(), policy=st.sampled_from(["fifo", "fifo-backfill", "sjf", "loaner"]))
def test_invariants_random_traces(data, policy):
    cfg = small_config(train_servers=2, train_gpus=8, inf_servers=2, inf_gpus=8)
    jobs = _random_jobs(data)
    util = data.draw(st.lists(st.floats(0, 1), min_size=5, max_size=40))
    sim = make_sim(cfg, jobs, util)
    if policy == "loaner":
        def fn(view):
            targets = {}
            for j in view.queued():
                targets[j] = view.jobs[j].w_max
            for j in view.running():
                if view.jobs[j].elastic:
                    targets[j] = int(view.rng.integers(view.jobs[j].w_min, view.jobs[j].w_max + 1))
            return Decision(targets=targets)
        pol = ScriptedPolicy(fn, event_driven=False)
    else:
        pol = make_policy(policy)
    pol.reset(0)
    sim.begin(pol)
    steps = 0
    while not sim.done and steps < 20000:
        sim.step(pol)
        _check_invariants(sim)
        steps += 1
    assert sim.done, "every job finishes"
    # work conserved: every finished job had exactly its work done, JCT >= lower bound
    res_jct = sim.finish - sim.submit
    lb = sim.work / (sim.w_max * np.where(sim.type_agnostic, sim.speeds.max(1), sim.speeds[:, 0]))
    assert (res_jct >= lb - 1e-6).all()
    assert np.allclose(sim.remaining, 0.0)


@pytest.mark.parametrize("policy", ["fifo", "baseline", "sjf", "gandiva"])
def test_fast_forward_changes_nothing_but_wall_time(policy):
    # policies whose decisions depend on events only (docs/model.md, "Fast-forward"; Aryl and
    # AFS read progress between events, so deciding every round is another policy for them)
    ep = make_episode("testbed", seed=3)
    a = ep.simulator().run(make_policy(policy))
    cfg = ep.config.replace(sim={"fast_forward": False})
    ep2 = make_episode(cfg, seed=3)
    b = ep2.simulator().run(make_policy(policy))
    assert a.jcts == pytest.approx(b.jcts, abs=1e-6)
    assert a.train_util == pytest.approx(b.train_util)
    # metrics version 4: the usage no longer depends on the skipped spans
    assert a.combined_usage == pytest.approx(b.combined_usage, rel=1e-12)
    assert a.combined_usage_hourly == pytest.approx(b.combined_usage_hourly, rel=1e-12)
    assert a.decision_rounds < b.decision_rounds


def test_same_seed_same_episode_bit_for_bit():
    a = make_episode("tiny", seed=5).simulator().run(make_policy("sjf")).to_dict(series=True)
    b = make_episode("tiny", seed=5).simulator().run(make_policy("sjf")).to_dict(series=True)
    for k in ("wall_s", "decision_ms_mean", "decision_ms_max"):
        a.pop(k), b.pop(k)
    assert a == b
    c = make_episode("tiny", seed=6).simulator().run(make_policy("sjf")).to_dict(series=True)
    assert c["jcts"] != a["jcts"]


def test_horizon_truncates():
    ep = make_episode("testbed", seed=0)
    cfg = ep.config.replace(sim={"horizon_hours": 2.0})
    res = make_episode(cfg, seed=0).simulator().run(make_policy("fifo"))
    assert res.truncated and res.jobs_unfinished > 0
    assert res.sim_seconds <= 2 * 3600 + 1e-6


def test_result_json_has_cli_keys():
    res = make_episode("tiny", seed=0).simulator().run(make_policy("fifo"))
    d = res.to_dict()
    for k in ("avg_jct", "median_jct", "p95_jct", "avg_queue_time", "p95_queue_time", "makespan",
              "train_util", "combined_usage", "loaned_gpu_hours", "preemptions",
              "preemption_ratio", "scaling_events", "jobs_total", "jobs_completed",
              "jct_lower_bound", "decision_ms_mean", "wall_s"):
        assert k in d, k
    assert math.isfinite(d["avg_jct"])


class _ReclaimFlexFirst(ScriptedPolicy):
    """Starts job 0 on the inference pool with 8 workers; returns flexible servers first."""

    def reclaim(self, view, n):
        _, flex = view.placement(0)
        loaned = [int(s) for s in np.flatnonzero(view.srv_loaned)]
        order = sorted(loaned, key=lambda s: (s not in flex, s))
        return order[:n]


def test_hand_computed_jct_with_reclaim_scale_in():
    # 1 training server (4 V100) + 3 inference servers (4 T4). Elastic job, w in [4, 8], g = 1,
    # started at t=0 on T4: base 4 on one server, flexible 4 on another (group_flexible).
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=3, inf_gpus=4)
    family = "resnet50"
    speed = cfg.gpu_types["T4"].speed_for(family)
    work = 8 * speed * 600.0 + 4 * speed * 3000.0  # 600 s at 8 workers, then 3000 s at 4
    jobs = [job(0, work=work, g=1, w=8, w_min=4, elastic=True, ta=True, family=family)]
    # u = 0 for 10 minutes (3 loanable), then u = 0.3 -> needed ceil(0.9) = 1 -> 2 loanable
    util = [0.0, 0.0] + [0.3] * 400
    sim = make_sim(cfg, jobs, util)
    pol = _ReclaimFlexFirst(
        lambda v: Decision(targets={0: 8}, pools={0: INFER}) if v.queued() else Decision()
    )
    res = sim.run(pol)
    assert res.preemptions == 0 and res.scale_ins == 1
    # at t=600 the flexible server is returned: 4 workers go on after a 10 s scale overhead
    assert sim.finish[0] == pytest.approx(600.0 + cfg.sim.scale_overhead_s + 3000.0)
    assert res.avg_jct == pytest.approx(3610.0)


def test_stall_rule_one_default_for_the_simulator_and_both_envs():
    from aryl_gym.envs.allocation import ArylEnv
    from aryl_gym.envs.reclaim import ArylReclaimEnv
    from aryl_gym.sim.engine import STALL_HOURS

    cfg = small_config(interval=600.0)
    sim = make_sim(cfg, [job(0, submit=100.0)], 0.0)
    idle = ScriptedPolicy(lambda v: Decision(), event_driven=False)  # never starts anything
    res = sim.run(idle, stall_hours=1.0)
    assert res.stalled and res.truncated and sim.stalled
    # the job arrives in the round at 600 s; idle from that round's end (1200 s), the rule fires
    # at the first round end more than 1 h later
    assert sim.now == 1200.0 + 3600.0 + 600.0
    assert ArylEnv(scenario="tiny").stall_hours == STALL_HOURS
    assert ArylReclaimEnv(scenario="tiny").stall_hours == STALL_HOURS


def test_public_round_api_equals_step():
    """open_round / close_round with an outside decision give the same episode as step()."""
    a = make_episode("testbed", 3).simulator()
    b = make_episode("testbed", 3).simulator()
    pa, pb = make_policy("aryl"), make_policy("aryl")
    pa.reset(a.seed)
    pb.reset(b.seed)
    a.begin(pa)
    b.begin(pb)
    assert b.next_arrival_time == 0.0 or b.next_arrival_time > 0.0
    while not a.done and not a.horizon_reached():
        a.step(pa)
        if b.open_round(pb):
            b.close_round(pb, pb.decide(b.view), 0.0)
        else:
            b.close_round(pb, None)
        assert (a.now, a.running_ids(), a.queued_ids()) == (b.now, b.running_ids(), b.queued_ids())
    assert b.done and b.arrivals_left == 0 and b.next_arrival_time is None
    assert b.n_queued == b.n_running == 0 and not b.idle_with_queue
