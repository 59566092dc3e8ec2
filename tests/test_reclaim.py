"""Reclaim rules (paper section 4; SPEC 3 step 1) on hand-made and random instances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    aryl_reclaim,
    default_reclaim_instance,
    milp_reclaim,
    optimal_reclaim,
    random_instance,
    reclaim_lost_gpus,
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


# ------------------------------------------------------------------------------------------------
# the exact optimum as an integer program
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_milp_equals_exhaustive_on_500_random_instances() -> None:
    """Same (preemptions, GPUs lost) as the exhaustive search; varied elasticity, fill, sizes."""
    rng = np.random.default_rng(2024)
    for i in range(500):
        L = int(rng.integers(2, 9))
        inst = random_instance(
            rng,
            L,
            gpus_per_server=int(rng.choice([4, 8])),
            elastic_p=float(rng.random()),
            fill=float(rng.uniform(0.3, 1.0)),
            group_flexible=bool(rng.random() < 0.7),
        )
        n = int(rng.integers(0, L + 1))
        m, e = milp_reclaim(inst, n), optimal_reclaim(inst, n)
        assert len(m) == len(set(m)) == n and set(m) <= set(inst.loaned)
        assert (reclaim_preemptions(inst, m), reclaim_lost_gpus(inst, m)) == (
            reclaim_preemptions(inst, e),
            reclaim_lost_gpus(inst, e),
        )
        # without the secondary objective only the preemption count is optimal
        assert i % 5 or reclaim_preemptions(inst, milp_reclaim(inst, n, secondary=False)) == (
            reclaim_preemptions(inst, e)
        )


def test_milp_hand_computed_elastic_scale_in_is_not_a_preemption() -> None:
    # Server 0: 2 workers of elastic job 1 (6 workers, w_min 4): returning it leaves 4 -> scale-in.
    # Server 1: 1 worker of inelastic job 2. Server 2: 3 workers of elastic job 3 (4 workers,
    # w_min 2): returning it leaves 1 < 2 -> preempted. Best single server: 0, no preemption.
    inst = ReclaimInstance(
        loaned=[0, 1, 2],
        srv_jobs={0: {1: 2}, 1: {2: 1}, 2: {3: 3}},
        workers={1: 6, 2: 1, 3: 4},
        w_min={1: 4, 2: 1, 3: 2},
        elastic={1: True, 3: True},
        g={1: 1, 2: 4, 3: 1},
    )
    assert milp_reclaim(inst, 1) == [0]
    assert reclaim_preemptions(inst, [0]) == 0 and reclaim_lost_gpus(inst, [0]) == 2
    # two servers: {0, 1} preempts job 2 only (1), {0, 2} preempts job 3 only (1); GPUs lost:
    # {0, 1} = 2 + 4 = 6, {0, 2} = 2 + 3 = 5 -> {0, 2}; {1, 2} preempts both.
    assert sorted(milp_reclaim(inst, 2)) == [0, 2]
    assert reclaim_preemptions(inst, [0, 2]) == 1 and reclaim_lost_gpus(inst, [0, 2]) == 5


def test_milp_hand_computed_job_on_two_returned_servers_counts_once() -> None:
    # Inelastic job 1 spans servers 0 and 1; servers 2 and 3 each hold one inelastic job.
    # Returning 2 servers: {0, 1} preempts 1 job, any other pair preempts 2.
    inst = ReclaimInstance(
        loaned=[0, 1, 2, 3],
        srv_jobs={0: {1: 1}, 1: {1: 1}, 2: {2: 1}, 3: {3: 1}},
        workers={1: 2, 2: 1, 3: 1},
        w_min={1: 2, 2: 1, 3: 1},
    )
    assert sorted(milp_reclaim(inst, 2)) == [0, 1]
    assert reclaim_preemptions(inst, [0, 1]) == 1
    # an elastic job scaled in by two servers together: 5 workers, w_min 2, 2 on each server:
    # one server leaves 3 (scale-in), both leave 1 (preempted)
    inst2 = ReclaimInstance(
        loaned=[0, 1, 2],
        srv_jobs={0: {1: 2}, 1: {1: 2}, 2: {2: 1}},
        workers={1: 5, 2: 1},
        w_min={1: 2, 2: 1},
        elastic={1: True},
    )
    assert reclaim_preemptions(inst2, [0, 1]) == 1
    assert reclaim_preemptions(inst2, milp_reclaim(inst2, 2)) == 1
    assert milp_reclaim(inst2, 1) in ([0], [1])


def test_milp_edge_cases() -> None:
    inst = _inst()
    assert milp_reclaim(inst, 0) == []
    assert milp_reclaim(inst, 4) == [10, 11, 12, 13]
    with pytest.raises(ValueError, match="cannot reclaim"):
        milp_reclaim(inst, 5)
    empty = ReclaimInstance(loaned=[3, 1, 2], srv_jobs={})
    assert len(milp_reclaim(empty, 2)) == 2


def test_optimal_reclaim_policy_uses_the_milp_at_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """``aryl-optimal-reclaim``'s rule on a 40-server state (C(40, 12) ~ 5e9 subsets): the exact
    optimum, with no fallback to the heuristic."""
    from aryl_gym.agents import reclaim as rc

    inst = random_instance(np.random.default_rng(5), 40, elastic_p=0.7)
    monkeypatch.setattr(rc, "instance_from_view", lambda view: inst)

    def no_heuristic(*a: object, **k: object) -> None:
        raise AssertionError("fell back to the heuristic")

    monkeypatch.setattr(rc, "aryl_reclaim", no_heuristic)
    got = rc.optimal_reclaim_view(None, 12)  # type: ignore[arg-type]
    assert got == milp_reclaim(inst, 12)
    assert reclaim_preemptions(inst, got) <= reclaim_preemptions(inst, rc.default_reclaim_instance(inst, 12))
