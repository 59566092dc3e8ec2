"""``aryl+pretuned``: the other reading of Aryl+TunedJobs (jobs submitted pre-tuned, one batch
per job, fixed): the factor against brute force, the policy sets it once per job, and with every
factor 1 it is ``aryl-noloan`` to the last digit."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import aryl_tuned
from aryl_gym.agents.base import make_policy

from aryl_gym.scenario import make_episode
from aryl_gym.sim.goodput import job_curve_of


def _time_at(curve, w, lam, ps):
    """Running time at a fixed factor, in units of the reference batch's (trapezoids)."""
    n, u, c = w * curve.g, curve.u_ref, curve.curve
    inv = np.array([c.goodput(n, u, p) / c.goodput(n, lam * u, p) for p in ps])
    return float(np.sum(np.diff(ps) * (inv[:-1] + inv[1:]) / 2.0))


@pytest.mark.parametrize("family,g,w", [("resnet50", 1, 1), ("bert", 2, 4), ("gnmt16", 1, 8), ("cnn", 4, 2),
                                        ("rl", 1, 2), ("gan", 2, 1)])
def test_pretuned_factor_is_the_fastest_fixed_batch(family, g, w):
    curve = job_curve_of(family, None, g, w, max(w, 4), None)
    lam = aryl_tuned.pretuned_factor(curve, w)
    lo, hi = curve.lam_range(w)
    assert lo <= lam <= hi or lam == 1.0
    ps = np.linspace(0.0, 1.0, 201)  # a finer progress grid than the factor's own
    t_best = _time_at(curve, w, lam, ps)
    assert t_best <= 1.0 + 1e-3  # never slower than the reference batch
    # no factor on a finer grid is more than 1% faster (the factor's own grids are coarser)
    dense = np.geomspace(lo, hi, 200) if hi > lo else np.array([lo])
    assert min(_time_at(curve, w, x, ps) for x in dense) >= t_best * 0.99


def test_every_job_gets_its_batch_once_at_submission_and_keeps_it():
    sim = make_episode("testbed", 0).simulator()
    pol = make_policy("aryl+pretuned")
    sent: list[dict[int, float]] = []
    orig = pol.decide

    def decide(view):
        d = orig(view)
        sent.append(dict(d.batch or {}))
        return d

    pol.decide = decide  # type: ignore[method-assign]
    res = sim.run(pol)
    assert res.jobs_completed == res.jobs_total
    seen: dict[int, float] = {}
    for b in sent:
        for j, lam in b.items():
            assert j not in seen  # set once, never changed
            seen[j] = lam
    assert set(pol._lam) == set(range(sim.n_jobs))  # every job was considered
    assert seen == {j: x for j, x in pol._lam.items() if x != 1.0} and seen  # some jobs are tuned
    assert sim.batch_lam == seen  # the simulator kept each job's factor to the end
    # the shapes' factors are what pretuned_factor says
    for j in list(seen)[:5]:
        s = sim.jobs[j]
        curve = job_curve_of(s.family, s.app, s.g, s.w_req, s.w_max, s.batch_size)
        assert seen[j] == aryl_tuned.pretuned_factor(curve, s.w_req)


def test_with_every_factor_one_it_is_aryl_noloan(monkeypatch):
    monkeypatch.setattr(aryl_tuned, "pretuned_factor", lambda curve, w, points=0: 1.0)
    a = make_episode("testbed", 1).simulator().run(make_policy("aryl+pretuned"))
    b = make_episode("testbed", 1).simulator().run(make_policy("aryl-noloan"))
    assert a.jcts == b.jcts and a.queue_times == b.queue_times


def test_pretuned_is_seeded_and_repeats():
    a = make_episode("tiny", 2).simulator().run(make_policy("aryl+pretuned"))
    b = make_episode("tiny", 2).simulator().run(make_policy("aryl+pretuned"))
    assert a.jcts == b.jcts and a.invalid_decisions == 0 and a.unplaced_targets == 0
