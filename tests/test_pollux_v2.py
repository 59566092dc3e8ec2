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
