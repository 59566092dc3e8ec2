"""Heterogeneous training (paper 7.2): the mixed rate, placement across GPU types, reclaims,
metrics and the generator's hetero draw; hand-computed cases."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from aryl_gym.config import ConfigError, load_scenario, scenario_from_dict
from aryl_gym.sim import invariants
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import INFER, TRAIN, Decision, PlacementOptions
from aryl_gym.workload.generator import generate_jobs
from tests.helpers import ScriptedPolicy, make_sim, small_config

T4_RESNET = 0.40  # T4 speed of resnet50 relative to a V100 (built-in registry)


def _hjob(i: int = 0, work: float = 1536.0, hetero: bool = True, w_min: int = 4, w_max: int = 8):
    return JobSpec(
        id=i, submit=0.0, family="resnet50", g=1, w_min=w_min, w_max=w_max, elastic=True,
        type_agnostic=True, work=work, pred_work=work, hetero=hetero,
    )


def _policy(target: int, hetero: bool = True) -> ScriptedPolicy:
    pol = ScriptedPolicy(
        lambda v: Decision(targets={0: target}, pools={0: TRAIN}) if v.queued() else Decision()
    )
    pol.placement = PlacementOptions(True, True, hetero=hetero)
    return pol


def _started(target: int = 8, hetero: bool = True, job_hetero: bool = True, penalty: float = 0.8):
    # one 4-GPU training server, two 4-GPU inference servers, all loanable (utilization 0)
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4,
                       hetero_penalty=penalty)
    sim = make_sim(cfg, [_hjob(hetero=job_hetero)], 0.0)
    pol = _policy(target, hetero)
    sim.begin(pol)
    sim.pre_decision(pol)
    sim.apply(pol.decide(sim.view))
    return sim, pol


def test_mixed_job_rate_is_workers_times_slowest_speed_times_penalty():
    sim, _ = _started()
    # base 4 workers on the V100 server (id 0), flexible 4 on one loaned T4 server
    assert sim.pool[0] == TRAIN
    assert sim.base[0] == {0: 4}
    assert sum(sim.flex[0].values()) == 4 and all(s >= 1 for s in sim.flex[0])
    assert sim.inf_workers[0] == 4 and sim.mixed[0]
    # 8 workers x min(1.0, 0.40) x 0.8 = 2.56 V100 worker-seconds per second
    assert sim.rate[0] == pytest.approx(8 * T4_RESNET * 0.8)
    invariants.check(sim)


def test_mixed_job_finish_time_and_metrics():
    sim, pol = _started()
    res_sim = sim
    while not res_sim.done:
        res_sim.step(pol)
        invariants.check(res_sim)
    # work 1536 at 2.56 per second: done at exactly 600 s (no start overhead)
    assert sim.finish[0] == pytest.approx(600.0)
    from aryl_gym.metrics import episode_result

    res = episode_result(sim, "scripted", 0.0)
    assert res.hetero_jobs == 1
    # 8 GPUs for 600 s while mixed
    assert res.hetero_gpu_hours == pytest.approx(8 * 600.0 / 3600.0)
    # 4 of those GPU-hours-equivalents were on loaned T4s
    assert res.loaned_gpu_hours_used == pytest.approx(4 * 600.0 / 3600.0)


def test_penalty_is_the_configured_multiplier():
    sim, _ = _started(penalty=0.5)
    assert sim.rate[0] == pytest.approx(8 * T4_RESNET * 0.5)


def test_without_the_option_workers_share_one_pool():
    # placement option off: the job cannot mix; the 8 workers go to the inference pool whole
    sim, _ = _started(hetero=False)
    assert sim.inf_workers[0] in (0, 8) and not sim.mixed[0]
    assert sim.pool[0] == INFER and sim.workers[0] == 8
    # job not marked hetero: the same, even with the option on
    sim, _ = _started(job_hetero=False)
    assert not sim.mixed[0] and sim.pool[0] == INFER
    invariants.check(sim)


def test_reclaim_of_t4_part_scales_in_without_preemption():
    sim, _ = _started()
    (flex_srv,) = sim.flex[0]
    _, pre = sim.reclaim_servers([flex_srv])
    assert pre == [] and sim.preempt_count[0] == 0
    assert sim.workers[0] == 4 and sim.scale_in_count[0] == 1
    assert sim.base[0] == {0: 4} and sim.flex[0] == {}
    # back on V100 only: 4 x 1.0, no penalty
    assert not sim.mixed[0] and sim.ever_mixed[0]
    assert sim.rate[0] == pytest.approx(4.0)
    assert sim.overhead_left[0] == sim.config.sim.scale_overhead_s
    invariants.check(sim)


def test_running_job_scales_out_onto_loaned_t4():
    sim, _ = _started(target=4)
    assert sim.workers[0] == 4 and not sim.mixed[0] and sim.rate[0] == pytest.approx(4.0)
    pol = _policy(6)
    pol.fn = lambda v: Decision(targets={0: 6})
    sim.apply(pol.decide(sim.view))
    assert sim.workers[0] == 6 and sim.inf_workers[0] == 2 and sim.mixed[0]
    assert sim.rate[0] == pytest.approx(6 * T4_RESNET * 0.8)
    invariants.check(sim)


def test_hetero_spec_validation_and_config_errors():
    with pytest.raises(ValueError, match="hetero"):
        dataclasses.replace(_hjob(), type_agnostic=False).validate()
    with pytest.raises(ConfigError, match="sim.hetero_penalty"):
        small_config(hetero_penalty=1.5)
    with pytest.raises(ConfigError, match="workload.hetero_fraction"):
        scenario_from_dict({"name": "x", "workload": {"hetero_fraction": 2}})


def test_hetero_draw_is_last_and_marks_only_eligible_jobs():
    cfg = load_scenario("tiny")
    w0 = generate_jobs(cfg, np.random.default_rng(3))
    c1 = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, hetero_fraction=1.0))
    w1 = generate_jobs(c1, np.random.default_rng(3))
    assert len(w0) == len(w1)
    for a, b in zip(w0, w1):
        assert dataclasses.replace(b, hetero=False) == a  # every other field unchanged
        assert b.hetero == (b.type_agnostic and b.elastic and b.family in
                            ("resnet50", "vgg16", "bert", "gnmt16"))
    assert not any(j.hetero for j in w0)
    assert any(j.hetero for j in w1)


def test_sum_rate_model():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4,
                       hetero_rate="sum")
    sim = make_sim(cfg, [_hjob()], 0.0)
    pol = _policy(8)
    sim.begin(pol)
    sim.pre_decision(pol)
    sim.apply(pol.decide(sim.view))
    # (4 x 1.0 + 4 x 0.40) x 0.8 = 4.48
    assert sim.rate[0] == pytest.approx((4 * 1.0 + 4 * T4_RESNET) * 0.8)
    invariants.check(sim)
    with pytest.raises(ConfigError, match="sim.hetero_rate"):
        small_config(hetero_rate="fastest")


def _aryl_case(policy: str, rate_model: str):
    """A hetero job starts on the V100 server while nothing is loaned (inference busy), then the
    two T4 servers are loaned: may Aryl add T4 workers to it?"""
    from aryl_gym.agents.base import make_policy

    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4,
                       hetero_rate=rate_model, fast_forward=False)
    util = [1.0] * 5 + [0.0] * 5000
    sim = make_sim(cfg, [_hjob(work=4.0 * 36000)], util)
    pol = make_policy(policy)
    pol.reset(0)
    sim.begin(pol)
    for _ in range(int(3600 / sim.interval)):
        sim.step(pol)
        invariants.check(sim)
    return sim


def test_aryl_hetero_adds_t4_workers_only_when_mixing_pays():
    step = small_config().inference.sample_seconds
    assert step * 5 < 3600  # the loans come within the hour simulated
    # sum model: (4 + 4 x 0.4) x 0.8 = 4.48 > 4 (V100 alone) -> 4 more workers on T4
    sim = _aryl_case("aryl-hetero", "sum")
    assert sim.workers[0] == 8 and sim.mixed[0] and sim.base[0] == {0: 4}
    assert sim.rate[0] == pytest.approx(4.48)
    # slowest model: 8 x 0.4 x 0.8 = 2.56 < 4 -> mixing never pays, the job keeps its V100s
    sim = _aryl_case("aryl-hetero", "slowest")
    assert sim.workers[0] == 4 and not sim.ever_mixed[0]
    # plain aryl never mixes
    sim = _aryl_case("aryl", "sum")
    assert sim.workers[0] == 4 and not sim.ever_mixed[0]


@pytest.mark.parametrize("rate_model", ["slowest", "sum"])
def test_invariants_tiny_hetero_fraction_1(rate_model):
    from aryl_gym.agents.base import make_policy

    from aryl_gym.scenario import make_simulator

    cfg = load_scenario("tiny")
    cfg = dataclasses.replace(
        cfg, workload=dataclasses.replace(cfg.workload, hetero_fraction=1.0),
        sim=dataclasses.replace(cfg.sim, hetero_rate=rate_model),
    )
    for pol in ("aryl-hetero", "aryl", "afs"):
        sim = make_simulator(cfg, 0)
        assert any(j.hetero for j in sim.jobs)
        res = sim.run(make_policy(pol), on_round=invariants.InvariantChecker())
        assert res.jobs_completed == res.jobs_total
        if pol != "aryl-hetero":
            assert res.hetero_jobs == 0 and res.hetero_gpu_hours == 0.0
