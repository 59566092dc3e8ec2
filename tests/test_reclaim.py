"""Reclaim rules (paper section 4; SPEC 3 step 1) on hand-made and random instances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    aryl_reclaim,
    default_reclaim_instance,
    optimal_reclaim,
    random_instance,
    reclaim_preemptions,
)


def _inst() -> ReclaimInstance:
    """Four loaned servers (ids 10..13).

    * job 1: inelastic, 1 worker on server 10;
    * job 2: elastic w_min=2, base 2 workers on server 11, flexible 2 on server 12;
    * job 3: elastic w_min=1, base 1 on server 11, flexible 1 on server 13;
    * server 13 also holds job 4: inelastic, 1 worker.
    """
    return ReclaimInstance(
        loaned=[10, 11, 12, 13],
        srv_jobs={10: {1: 1}, 11: {2: 2, 3: 1}, 12: {2: 2}, 13: {3: 1, 4: 1}},
        srv_flex={12: {2: 2}, 13: {3: 1}},
        workers={1: 1, 2: 4, 3: 2, 4: 1},
        w_min={1: 1, 2: 2, 3: 1, 4: 1},
        elastic={1: False, 2: True, 3: True, 4: False},
        g={1: 1, 2: 1, 3: 1, 4: 1},
        time_one={2: 4000.0, 3: 1000.0},
    )


def test_preemption_count() -> None:
    inst = _inst()
    assert reclaim_preemptions(inst, []) == 0
    assert reclaim_preemptions(inst, [12]) == 0  # flexible only: job 2 scales in to 2
    assert reclaim_preemptions(inst, [10]) == 1  # inelastic job 1
    # base workers, but both elastic jobs keep >= w_min elsewhere: job 2 keeps 2, job 3 keeps 1
    assert reclaim_preemptions(inst, [11]) == 0
    assert reclaim_preemptions(inst, [11, 12]) == 1  # job 2 loses all 4 -> preempted
    assert reclaim_preemptions(inst, [11, 13]) == 2  # job 3 loses both, job 4 preempted


def test_flexible_servers_first_without_preemption() -> None:
    inst = _inst()
    # one server: only server 12 holds nothing but flexible workers
    assert aryl_reclaim(inst, 1) == [12]
    assert reclaim_preemptions(inst, aryl_reclaim(inst, 1)) == 0


def test_never_preempts_when_flexible_servers_suffice() -> None:
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        inst = random_instance(rng, int(rng.integers(2, 9)))
        flex_only = [
            s
            for s in inst.loaned
            if all(inst.srv_flex.get(s, {}).get(j, 0) == k for j, k in inst.srv_jobs[s].items())
        ]
        for n in range(1, len(flex_only) + 1):
            picked = aryl_reclaim(inst, n)
            assert len(picked) == n and len(set(picked)) == n
            assert reclaim_preemptions(inst, picked) == 0
            assert set(picked) <= set(flex_only)
            checked += 1
    assert checked > 50


def test_smallest_jct_loss_first_among_flexible_servers() -> None:
    # two flexible-only servers; the slower job loses more from a scale-in
    inst = ReclaimInstance(
        loaned=[0, 1, 2],
        srv_jobs={0: {1: 1}, 1: {2: 1}, 2: {1: 1, 2: 1}},
        srv_flex={0: {1: 1}, 1: {2: 1}},
        workers={1: 3, 2: 3},
        w_min={1: 2, 2: 2},
        elastic={1: True, 2: True},
        time_one={1: 9000.0, 2: 3000.0},
    )
    # job 1 loses 9000/2 - 9000/3 = 1500 s; job 2 loses 500 s
    assert aryl_reclaim(inst, 1) == [1]


def test_heuristic_equals_optimum_on_obvious_instances() -> None:
    # Server 0: one inelastic job; server 1: three inelastic jobs; server 2: an elastic job that
    # keeps enough workers elsewhere. Taking 2 servers: {2, 0} (1 preemption) is obviously best.
    inst = ReclaimInstance(
        loaned=[0, 1, 2],
        srv_jobs={0: {1: 1}, 1: {2: 1, 3: 1, 4: 1}, 2: {5: 2}},
        workers={1: 1, 2: 1, 3: 1, 4: 1, 5: 6},
        w_min={1: 1, 2: 1, 3: 1, 4: 1, 5: 2},
        elastic={5: True},
    )
    h, o = aryl_reclaim(inst, 2), optimal_reclaim(inst, 2)
    assert sorted(h) == sorted(o) == [0, 2]
    assert reclaim_preemptions(inst, h) == reclaim_preemptions(inst, o) == 1
    # A job spread over two servers: once it is marked for preemption its second server is free.
    inst2 = ReclaimInstance(
        loaned=[0, 1, 2],
        srv_jobs={0: {1: 1}, 1: {1: 1}, 2: {2: 1, 3: 1}},
        workers={1: 2, 2: 1, 3: 1},
        w_min={1: 2, 2: 1, 3: 1},
    )
    assert sorted(aryl_reclaim(inst2, 2)) == sorted(optimal_reclaim(inst2, 2)) == [0, 1]


def test_optimal_is_optimal_and_heuristic_never_better() -> None:
    rng = np.random.default_rng(11)
    for _ in range(60):
        inst = random_instance(rng, int(rng.integers(2, 8)))
        L = len(inst.loaned)
        n = int(rng.integers(1, L + 1))
        o = optimal_reclaim(inst, n)
        best = min(reclaim_preemptions(inst, c) for c in itertools.combinations(inst.loaned, n))
        assert reclaim_preemptions(inst, o) == best
        h = aryl_reclaim(inst, n)
        assert len(set(h)) == n and set(h) <= set(inst.loaned)
        assert reclaim_preemptions(inst, h) >= best
        d = default_reclaim_instance(inst, n)
        assert reclaim_preemptions(inst, d) >= best


def test_bad_n_and_limits() -> None:
    inst = _inst()
    with pytest.raises(ValueError, match="cannot reclaim"):
        aryl_reclaim(inst, 5)
    with pytest.raises(ValueError, match="max_subsets"):
        optimal_reclaim(inst, 2, max_subsets=3)
    assert aryl_reclaim(inst, 0) == [] and optimal_reclaim(inst, 0) == []
    assert sorted(aryl_reclaim(inst, 4)) == [10, 11, 12, 13]
