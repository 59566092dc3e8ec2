"""AFS-L (Hwang et al., NSDI '21): the pairwise rule and a hand-made two-job episode."""

from __future__ import annotations

import pytest
from aryl_gym.agents.afs import AfsPolicy
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.fifo import FifoPolicy

from tests.helpers import job, make_sim, small_config


def test_rule_linear_throughput_equalises_gpus_short_job_wins_ties_to_long():
    # a: 100 units left, b: 1000; both 1 GPU now, linear P(x) = x.
    # gain_a = (2-1)/1 = 1 > gain_b = (2-1)/2 = 0.5 -> the short job gets the GPU.
    assert AfsPolicy.prefer(100, (1, 2), 1, 1000, (1, 2), 1)
    # a at 2 GPUs: gain_a = 1/2 == gain_b = 1/2 -> strict '>' fails, the long job gets it.
    assert not AfsPolicy.prefer(100, (2, 3), 1, 1000, (1, 2), 1)
    # the order of arguments does not matter
    assert AfsPolicy.prefer(1000, (1, 2), 1, 100, (2, 3), 1)


def test_rule_differs_from_srtf_on_poor_scaling_short_job():
    # Short job a scales poorly (P: 1 -> 1.2), long job b well (P: 1 -> 1.9).
    # SRTF gives the GPU to a. AFS: gain_a = 0.2 < gain_b = 0.9 / 1.9 = 0.47 -> b.
    assert not AfsPolicy.prefer(100, (1.0, 1.2), 1, 1000, (1.0, 1.9), 1)
    # By hand, with b keeping its new share after a ends (the apathetic assumption):
    # GPU to a: 100/1.2 + 1000/1.0 = 1083.3; GPU to b: 100/1.0 + 1000/1.9 = 626.3.
    assert 100 / 1.0 + 1000 / 1.9 < 100 / 1.2 + 1000 / 1.0


def test_newcomers_srtf_and_zero_share_long_job_beats_growth():
    # Both without share: the one that finishes sooner with its first step wins.
    assert AfsPolicy.prefer(100, (0, 1), 1, 1000, (0, 1), 1)
    # A running 1-GPU short job vs a queued long one: gain_a = 1 == gain_b = 1 -> the newcomer.
    assert not AfsPolicy.prefer(100, (1, 2), 1, 1000, (0, 1), 1)
    # Per-GPU: a step of a 4-GPU worker must beat four 1-GPU steps.
    assert AfsPolicy.prefer(100, (1, 2), 1, 1000, (0, 1), 4)


def _two_jobs():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=1, inf_gpus=4)
    jobs = [
        # both request 4 workers (w_req) and may shrink to 1
        job(0, work=400.0, w=4, w_min=1, elastic=True, w_req=4),  # short: 100 s at 4 workers
        job(1, work=4000.0, w=4, w_min=1, elastic=True, w_req=4),  # long: 1000 s at 4 workers
    ]
    return cfg, jobs


def test_two_job_episode_afs_shares_where_srtf_serialises():
    cfg, jobs = _two_jobs()
    sim = make_sim(cfg, jobs)
    pol = AfsPolicy()
    sim.begin(pol)
    sim.pre_decision(pol)
    d = pol.decide(sim.view)
    # Steps: A (sooner), B (tie to the newcomer), A (1 < 2 GPUs), B (tie) -> 2 + 2.
    assert d.targets == {0: 2, 1: 2}
    res = make_sim(cfg, jobs).run(AfsPolicy())
    so = cfg.sim.scale_overhead_s
    # A: 400 / 2 = 200 s. B: 2 workers until the round at 240 s, then 4 after a scale-out.
    jct_b = 240.0 + so + (4000.0 - 2 * 240.0) / 4
    assert sorted(res.jcts) == pytest.approx(sorted([200.0, jct_b]))
    # SRTF (shortest job first at the requested size): A alone with 4, B after it.
    srtf = make_sim(cfg, jobs).run(FifoPolicy(backfill=True, order="sjf"))
    assert sorted(srtf.jcts) == pytest.approx([100.0, 120.0 + 1000.0])


def test_afs_runs_tiny_to_completion_and_is_placeable():
    from aryl_gym.scenario import make_episode

    for name in ("afs", "afs-loan"):
        res = make_episode("tiny", 0).simulator().run(make_policy(name))
        assert res.jobs_completed == res.jobs_total
        assert res.invalid_decisions == 0
        assert res.unplaced_targets == 0
