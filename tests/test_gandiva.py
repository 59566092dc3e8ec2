"""Gandiva grow/shrink, the random policy and aryl+tuned: hand cases and full tiny runs."""

from __future__ import annotations

import pytest
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.gandiva import GandivaPolicy

from tests.helpers import job, make_sim, small_config


def test_gandiva_grows_into_idle_gpus_then_shrinks_for_an_arrival():
    cfg = small_config(train_servers=1, train_gpus=4)
    jobs = [
        job(0, work=40000.0, w=4, w_min=1, elastic=True),
        job(1, submit=100.0, work=600.0, g=2, w=1),  # 2-GPU inelastic job arrives later
    ]
    sim = make_sim(cfg, jobs)
    pol = GandivaPolicy()
    sim.begin(pol)
    sim.step(pol)  # t = 0: alone, grows to all 4 GPUs
    assert int(sim.workers[0]) == 4
    sim.step(pol)  # t = 60
    sim.step(pol)  # t = 120: job 1 seen; job 0 shrinks to make room
    assert int(sim.workers[0]) == 2 and int(sim.workers[1]) == 1
    res = make_sim(cfg, jobs).run(GandivaPolicy())
    # job 1 runs 600 s from t = 120 -> JCT = 120 + 600 - 100
    assert min(res.jcts) == pytest.approx(620.0)
    assert res.scale_ins >= 1 and res.scale_outs >= 1


@pytest.mark.parametrize("name", ["gandiva", "random", "aryl+tuned"])
def test_tiny_runs_finish_and_repeat(name):
    from aryl_gym.scenario import make_episode

    a = make_episode("tiny", 1).simulator().run(make_policy(name))
    b = make_episode("tiny", 1).simulator().run(make_policy(name))
    assert a.jobs_completed == a.jobs_total
    assert a.jcts == b.jcts
    assert a.invalid_decisions == 0 and a.unplaced_targets == 0


def test_random_differs_across_seeds():
    from aryl_gym.scenario import make_episode

    ep = make_episode("tiny", 1)
    a = ep.simulator().run(make_policy("random"))
    sim = ep.simulator()
    sim.seed = 7
    b = sim.run(make_policy("random"))
    assert a.jcts != b.jcts


def test_aryl_tuned_tunes_every_job_inelastic_ones_too():
    """Aryl+TunedJobs (World v2 reading): every job Aryl runs is modelled and trains at the batch
    its model picks, not only the elastic ones; no rate tables are sent."""
    from aryl_gym.scenario import make_episode

    sim = make_episode("tiny", 0).simulator()
    pol = make_policy("aryl+tuned")
    res = sim.run(pol)
    assert res.jobs_completed == res.jobs_total and not sim.rate_mult
    inelastic = [j.id for j in sim.jobs if not j.elastic]
    tuned = {j for j, lam in pol._lam_sent.items() if lam != 1.0}
    assert inelastic and all(j in pol._models for j in inelastic)
    assert tuned & set(inelastic)  # inelastic jobs get tuned batches too
