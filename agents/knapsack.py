"""Exact multiple-choice knapsack by dynamic programming (paper section 5.2 and Appendix D).

Aryl's phase two allocates the GPUs left after the inelastic workload to the flexible demand of
elastic jobs. The paper casts it as a multiple-choice knapsack problem (MCKP): the capacity is the
number of GPUs left, each elastic job is a *group* whose items are the possible extra allocations
(item ``k`` = ``k`` extra workers, weight ``k * g`` GPUs, value = the predicted JCT reduction
``T(w_min) - T(w_min + k)``), and at most one item may be taken per group. The problem is NP-hard
but pseudo-polynomial: a DP over capacity solves it exactly (paper: Appendix D).

This module is independent of the simulator: :func:`solve_mckp` works on plain lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: One item: (weight in GPUs, value). A group is a sequence of items.
Item = tuple[int, float]


@dataclass(frozen=True)
class MckpResult:
    """The optimum of a multiple-choice knapsack.

    Attributes:
        value: the best total value.
        choice: per group, the index of the chosen item in that group, or -1 for none.
        weight: total weight of the chosen items (<= capacity).
    """

    value: float
    choice: list[int]
    weight: int


def solve_mckp(groups: Sequence[Sequence[Item]], capacity: int) -> MckpResult:
    """Solve a multiple-choice knapsack exactly (at most one item per group).

    ``dp[c]`` is the best value using the groups seen so far within capacity ``c``; for each
    group the new table is, for every ``c`` at once (numpy), the maximum of "no item" and every
    item's ``dp[c - w] + v``. A table of chosen item indices per group lets us backtrack.

    Complexity: O(G * K * C) time and O(G * C) memory, for G groups of at most K items and
    capacity C. The capacity is first clipped to the total of the groups' heaviest items (beyond
    it nothing more can be packed), which keeps C small when the knapsack is not tight.

    Ties are deterministic: an item replaces the incumbent only when strictly better, items are
    scanned in the given order (Aryl lists them by increasing weight), so among equal values the
    lighter item (fewer GPUs), the lower index, and "no item" win; across groups, backtracking
    prefers the assignment found first.

    Args:
        groups: per group, a sequence of (weight >= 0, value) items. Items heavier than the
            capacity are never chosen; negative values are allowed (never chosen over "none").
        capacity: knapsack capacity (GPUs); negative is treated as 0.

    Returns:
        :class:`MckpResult` with the optimal value and the chosen item per group.
    """
    G = len(groups)
    if G == 0:
        return MckpResult(0.0, [], 0)
    for gi, items in enumerate(groups):
        for w, v in items:
            if int(w) != w or w < 0:
                raise ValueError(f"group {gi}: item weight {w!r} must be a whole number >= 0")
            if not np.isfinite(v):
                raise ValueError(f"group {gi}: item value {v!r} must be finite")
    cap = max(int(capacity), 0)
    max_total = sum(max((int(w) for w, _ in items), default=0) for items in groups)
    C = min(cap, max_total)
    dp = np.zeros(C + 1, dtype=np.float64)
    pick = np.full((G, C + 1), -1, dtype=np.int32)
    for gi, items in enumerate(groups):
        best = dp.copy()
        arg = pick[gi]
        for ii, (w, v) in enumerate(items):
            w = int(w)
            if w > C:
                continue
            cand = dp[: C + 1 - w] + float(v)
            tail = best[w:]
            better = cand > tail
            if better.any():
                tail[better] = cand[better]
                arg[w:][better] = ii
        dp = best
    # Backtrack from the full capacity.
    choice = [-1] * G
    c = C
    weight = 0
    for gi in range(G - 1, -1, -1):
        ii = int(pick[gi, c])
        choice[gi] = ii
        if ii >= 0:
            w = int(groups[gi][ii][0])
            c -= w
            weight += w
    return MckpResult(float(dp[C]), choice, weight)


def brute_force_mckp(groups: Sequence[Sequence[Item]], capacity: int) -> MckpResult:
    """Exhaustive MCKP for tests: every combination of one-or-no item per group.

    O(prod(K_g + 1)); only for tiny instances.
    """
    import itertools

    best_v, best_c, best_w = 0.0, [-1] * len(groups), 0
    for combo in itertools.product(*[range(-1, len(items)) for items in groups]):
        w = sum(int(groups[g][i][0]) for g, i in enumerate(combo) if i >= 0)
        if w > capacity:
            continue
        v = sum(float(groups[g][i][1]) for g, i in enumerate(combo) if i >= 0)
        if v > best_v + 1e-9:
            best_v, best_c, best_w = v, list(combo), w
    return MckpResult(best_v, best_c, best_w)
