"""Pollux as published (issue 32 item 5): 60 s rounds, upstream's replica range and mutation
rate, a goodput model fitted from what the policy observes, Aryl+TunedJobs on every job."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.pollux import PolluxPolicy

from tests.helpers import job, make_sim, small_config


class _Counting(PolluxPolicy):
    """Pollux that records the clock of every decision it is asked for."""

    def reset(self, seed=None):
        super().reset(seed)
        self.calls: list[float] = []

    def decide(self, view):
        self.calls.append(view.now)
        return super().decide(view)


def test_pollux_decides_every_60s_round_even_when_the_scenario_round_is_300s():
    cfg = small_config(train_servers=2, train_gpus=4, inf_servers=0, interval=300.0)
    jobs = [job(0, work=3000.0, w=2, w_min=1, elastic=True), job(1, submit=400.0, work=900.0)]
    sim = make_sim(cfg, jobs)
    pol = _Counting(generations=5)
    pol.reset(sim.seed)
    assert pol.decision_interval_s == 60.0 and pol.event_driven is False
    sim.begin(pol)
    assert sim.interval == 60.0
    ends = []
    while not sim.done:
        info = sim.step(pol)
        ends.append(info.t_end - info.t_start)
    # every round is 60 s long (no fast-forward) and every round asked Pollux for a decision
    assert all(d == pytest.approx(60.0) for d in ends)
    assert pol.calls == [60.0 * k for k in range(len(ends))]
    for name in ("pollux", "pollux-250"):
        p = make_policy(name)
        assert p.decision_interval_s == 60.0 and not p.event_driven


def _range_case(policy: PolluxPolicy, ceiling: int = 256):
    """An inelastic cnn job (4 workers) and an elastic bert job (1 GPU workers, batch limit
    384 // 4 = 96 replicas) on 8 x 8 GPUs, with the parallelism ceiling raised to ``ceiling``."""
    cfg = small_config(train_servers=8, train_gpus=8, inf_servers=0, ceiling_gpus=ceiling)
    jobs = [job(0, work=1e5, w=4, w_min=4), job(1, work=1e5, w=4, w_min=1, elastic=True,
                                               family="bert")]
    sim = make_sim(cfg, jobs)
    policy.reset(sim.seed)
    sim.begin(policy)
    return sim


def _ranges(policy, sim):
    prob = policy.problem(sim.view)
    order = np.argsort(prob.jobs)
    return prob.lo[order].tolist(), prob.hi[order].tolist(), prob.inel_run[order].tolist()


def test_replica_range_is_upstreams_for_every_job():
    pol = PolluxPolicy(generations=2)
    sim = _range_case(pol)
    # never run: upstream's exploration cap max(2 x 0, 1) = 1 for both, inelastic or not
    assert _ranges(pol, sim)[:2] == ([1, 1], [1, 1])
    pol._max_seen = {0: 3, 1: 100}
    # 2 x 3 = 6; min(2 x 100, ceiling 256 // 1, batch limit 384 // 4 = 96) = 96
    assert _ranges(pol, sim)[:2] == ([1, 1], [6, 96])
    free = PolluxPolicy(generations=2, explore=False)
    sim = _range_case(free)
    # ceiling 256 GPUs: the batch limits bind (cnn -> cifar10: 4096 // 32 = 128; bert 96)
    assert _ranges(free, sim)[:2] == ([1, 1], [128, 96])
    # at the default ceiling (64 GPUs) the ceiling binds: 64 // g
    sim = _range_case(free, ceiling=64)
    assert _ranges(free, sim)[:2] == ([1, 1], [64, 64])


def test_pollux_elastic_keeps_inelastic_requests():
    pol = make_policy("pollux-elastic")
    assert pol.elasticity == "elastic"
    pol.explore = False
    sim = _range_case(pol)
    lo, hi, _ = _ranges(pol, sim)
    assert lo == [4, 1] and hi == [4, 96]  # inelastic: its request; elastic: up to the limits


def test_raise_probability_is_upstreams_rate_per_job():
    from aryl_gym.agents.pollux import raise_probability

    # about one raise per node with room: nodes / jobs per job, capped at 1, floor 1 / jobs
    assert raise_probability(100, 64) == pytest.approx(0.64)
    assert raise_probability(10, 64) == 1.0
    assert raise_probability(450, 0) == pytest.approx(1 / 450)
    assert raise_probability(0, 5) == 1.0


def test_raised_cells_follow_the_per_job_rate_statistically():
    from aryl_gym.agents.pollux import draw_block

    rng = np.random.default_rng(11)
    P, n, G, p = 20, 50, 200, 0.16  # 8 nodes with room, 50 jobs
    d = draw_block(rng, G, P, n, p)
    N = G * P * n
    k = d.inc_cells.size
    assert abs(k - N * p) < 5 * np.sqrt(N * p * (1 - p))
    per_child = np.bincount((d.inc_cells // n) % P, minlength=P) / G  # raises per child per gen
    assert per_child.mean() == pytest.approx(n * p, rel=0.02)  # = nodes with room (8)


def test_policy_counts_nodes_with_room():
    # 4 servers of 4 GPUs, one 4-worker job running on one server: 3 servers have room
    cfg = small_config(train_servers=4, train_gpus=4, inf_servers=0)
    jobs = [job(i, work=1e5, w=4, w_min=4) for i in range(6)]
    sim = make_sim(cfg, jobs)
    pol = PolluxPolicy(generations=1)
    pol.reset(sim.seed)
    sim.begin(pol)
    assert pol.problem(sim.view).p_inc == pytest.approx(4 / 6)  # empty cluster: 4 nodes
    pol._max_seen = {0: 4}
    sim.step(pol)  # Pollux places something; count what has room now
    room = int((sim.srv_free[:4] > 0).sum())
    assert pol.problem(sim.view).p_inc == pytest.approx(min(1.0, max(room, 1) / 6))
    assert PolluxPolicy(upstream_mutation=False).problem(sim.view).p_inc == pytest.approx(1 / 6)
