"""The plain-Python fast paths give exactly what the vectorised code gives (issue 5 speed work).

Small clusters place with lists (:func:`aryl_gym.sim.placement.best_fit_list`, ``_plan_list``),
few running jobs advance in plain Python (``Simulator._advance_small``), and the env builds
windows, fit tables and observations with lists. Each is checked against its numpy counterpart:
random instances for the primitives, and whole episodes (bit-identical ``EpisodeResult``) with
the fast paths switched off.
"""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

import aryl_gym.sim.engine as engine
import aryl_gym.sim.placement as placement
from aryl_gym.envs.observation import fit_lists, fit_tables, select_window, window_lists
from aryl_gym.scenario import make_episode
from aryl_gym.sim.placement import best_fit, best_fit_list
from tests.helpers import examples

TIMING = ("wall_s", "decision_ms_mean", "decision_ms_max")


@settings(max_examples=examples(300))
@given(
    caps=st.lists(st.sampled_from([4, 8]), min_size=1, max_size=12),
    data=st.data(),
    g=st.sampled_from([1, 2, 4, 8]),
)
def test_best_fit_list_equals_numpy(caps, data, g):
    cap = np.array(caps, dtype=np.int64)
    free = np.array([data.draw(st.integers(0, c)) for c in caps], dtype=np.int64)
    cand = np.array([data.draw(st.booleans()) for _ in caps], dtype=bool)
    expected = best_fit(free, cap, cand, g)
    got = best_fit_list(free.tolist(), cap.tolist(), np.flatnonzero(cand).tolist(), g)
    assert got == expected


def _result(scenario: str, policy: str, seed: int) -> dict:
    res = make_episode(scenario, seed).simulator().run(make_policy(policy))
    d = res.to_dict(series=True)
    for k in TIMING:
        d.pop(k)
    return d


@pytest.mark.parametrize("policy", ["fifo", "aryl", "afs-loan", "random"])
def test_fast_paths_do_not_change_episodes(monkeypatch, policy):
    fast = _result("testbed", policy, 1)
    monkeypatch.setattr(placement, "PY_SERVERS", -1)  # numpy placement
    monkeypatch.setattr(engine, "_PY_JOBS", 0)  # vectorised advance
    slow = _result("testbed", policy, 1)
    assert fast == slow


def test_list_placement_on_a_big_cluster_equals_numpy(monkeypatch):
    # basic is above both thresholds (numpy by default): force the list paths and compare
    assert make_episode("basic", 0).simulator().n_servers > placement.PY_SERVERS
    slow = _result("basic", "fifo", 0)
    monkeypatch.setattr(placement, "PY_SERVERS", 10**9)
    monkeypatch.setattr(engine, "_PY_JOBS", 10**9)
    assert _result("basic", "fifo", 0) == slow


def test_window_and_fit_lists_match_arrays():
    sim = make_episode("testbed", 0).simulator()
    pol = make_policy("aryl")
    pol.reset(0)
    sim.begin(pol)
    checked = 0
    while not sim.done and checked < 300:
        sim.step(pol)
        w, qo, ro = window_lists(sim, 16, sim.elastic.tolist())
        wa, qa, ra = select_window(sim, 16)
        assert w == wa.tolist() and qo == qa.tolist() and ro == ra.tolist()
        ft, fi = fit_tables(sim)
        assert fit_lists(sim) == (ft.tolist(), fi.tolist())
        assert sim.n_loaned == int(sim.srv_loaned.sum())
        assert sim.preemptions_total == int(sim.preempt_count.sum())
        checked += 1
