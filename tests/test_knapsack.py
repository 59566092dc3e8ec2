"""The exact multiple-choice knapsack of Aryl's phase two (paper 5.2, Appendix D)."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents.knapsack import brute_force_mckp, solve_mckp


def _check(groups, capacity, res) -> tuple[int, float]:
    assert len(res.choice) == len(groups)
    w = sum(groups[g][i][0] for g, i in enumerate(res.choice) if i >= 0)
    v = sum(groups[g][i][1] for g, i in enumerate(res.choice) if i >= 0)
    assert w <= max(capacity, 0), "chosen items exceed the capacity"
    assert w == res.weight
    assert v == pytest.approx(res.value)
    return w, v


def test_equals_brute_force_on_random_instances() -> None:
    rng = np.random.default_rng(1234)
    for _ in range(800):
        G = int(rng.integers(0, 5))
        groups = [
            [
                (int(rng.integers(0, 9)), float(rng.integers(-3, 12)) + 0.5 * float(rng.random()))
                for _ in range(int(rng.integers(0, 4)))
            ]
            for _ in range(G)
        ]
        cap = int(rng.integers(-1, 18))
        res = solve_mckp(groups, cap)
        _check(groups, cap, res)
        ref = brute_force_mckp(groups, max(cap, 0))
        assert res.value == pytest.approx(ref.value, abs=1e-9), (groups, cap)


def test_equals_brute_force_on_aryl_shaped_instances() -> None:
    """Items k*g GPUs, values R*(1/w_min - 1/(w_min+k)) as Aryl builds them."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        groups = []
        for _ in range(int(rng.integers(1, 5))):
            g = int(rng.choice([1, 2, 4]))
            wmin = int(rng.integers(1, 4))
            K = int(rng.integers(1, 4))
            R = float(rng.uniform(100, 1e4))
            groups.append([(k * g, R / wmin - R / (wmin + k)) for k in range(1, K + 1)])
        cap = int(rng.integers(0, 30))
        res = solve_mckp(groups, cap)
        _check(groups, cap, res)
        assert res.value == pytest.approx(brute_force_mckp(groups, cap).value)


def test_two_job_example_structure() -> None:
    """Paper 5.2 / Table 4 structure (our numbers): two elastic jobs sharing spare workers.

    Job A: work 120 worker-s, w in [1, 4] -> T(w) = 120 / w; job B: work 60, w in [1, 4].
    Three spare workers (g = 1). Gains over w_min: A: 60, 80, 90; B: 30, 40, 45.
    Best: A +2, B +1 (80 + 30 = 110) beats A +3 (90) and A +1, B +2 (60 + 40 = 100).
    """
    A = [(k, 120 / 1 - 120 / (1 + k)) for k in (1, 2, 3)]
    B = [(k, 60 / 1 - 60 / (1 + k)) for k in (1, 2, 3)]
    res = solve_mckp([A, B], 3)
    assert res.choice == [1, 0]  # A gets 2 extra, B gets 1 extra
    assert res.value == pytest.approx(110.0)
    # the bigger workload gets more of the spare capacity, though both have the same range
    assert res.choice[0] > res.choice[1]
    # with enough room both take their maximum
    assert solve_mckp([A, B], 6).choice == [2, 2]


def test_edge_cases() -> None:
    assert solve_mckp([], 10).value == 0.0 and solve_mckp([], 10).choice == []
    res = solve_mckp([[(1, 5.0)], [(2, 3.0)]], 0)
    assert res.choice == [-1, -1] and res.value == 0.0
    # items heavier than the capacity are never chosen
    res = solve_mckp([[(5, 100.0), (1, 1.0)]], 3)
    assert res.choice == [1] and res.value == 1.0
    # a group without items
    assert solve_mckp([[], [(1, 2.0)]], 1).choice == [-1, 0]


def test_ties_prefer_lighter_and_lower_index() -> None:
    # equal values: the lighter item (fewer GPUs) wins
    assert solve_mckp([[(1, 5.0), (2, 5.0)]], 1).choice == [0]
    assert solve_mckp([[(1, 5.0), (2, 5.0)]], 2).choice == [0]  # shortcut path (room for all)
    assert solve_mckp([[(1, 5.0), (2, 5.0)], [(3, 1.0)]], 3).choice[0] == 0  # DP path
    # a zero-value item is never preferred over nothing
    assert solve_mckp([[(1, 0.0)]], 1).choice == [-1]
    # deterministic: same answer twice
    g = [[(1, 1.0), (2, 2.0)], [(1, 1.0), (2, 2.0)]]
    assert solve_mckp(g, 2).choice == solve_mckp(g, 2).choice


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="group 1"):
        solve_mckp([[(1, 1.0)], [(-1, 1.0)]], 3)
    with pytest.raises(ValueError, match="finite"):
        solve_mckp([[(1, float("nan"))]], 3)
    with pytest.raises(ValueError, match="whole"):
        solve_mckp([[(1.5, 1.0)]], 3)
