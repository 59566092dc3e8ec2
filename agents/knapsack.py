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

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

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
    arrs = [np.asarray(items, dtype=np.float64).reshape(-1, 2) for items in groups]
    flat = np.concatenate(arrs) if arrs else np.zeros((0, 2))
    if len(flat):
        fw, fv = flat[:, 0], flat[:, 1]
        if not (np.all(fw >= 0) and np.all(fw == np.floor(fw)) and np.all(np.isfinite(fv))):
            for gi, a in enumerate(arrs):  # name the offending group
                w, v = a[:, 0], a[:, 1]
                if not (np.all(w >= 0) and np.all(w == np.floor(w))):
                    raise ValueError(
                        f"group {gi}: item weights must be whole numbers >= 0, got {w.tolist()}"
                    )
                if not np.all(np.isfinite(v)):
                    raise ValueError(f"group {gi}: item values must be finite, got {v.tolist()}")
    ws = [a[:, 0].astype(np.int64) for a in arrs]
    vs = [a[:, 1] for a in arrs]
    return solve_mckp_arrays(ws, vs, capacity)


def solve_mckp_arrays(
    ws: Sequence[np.ndarray], vs: Sequence[np.ndarray], capacity: int
) -> MckpResult:
    """:func:`solve_mckp` on pre-validated arrays: ``ws[g]`` integer weights (>= 0) and
    ``vs[g]`` finite values of group ``g``'s items. No input checks (the hot path of Aryl)."""
    G = len(ws)
    if G == 0:
        return MckpResult(0.0, [], 0)
    cap = max(int(capacity), 0)
    max_total = int(sum(int(w.max()) for w in ws if len(w)))
    if cap >= max_total:
        # Every group's heaviest item fits at once: groups are independent, take each group's
        # best item (first maximum; "no item" when no value is positive).
        choice = []
        for v in vs:
            i = int(np.argmax(v)) if len(v) else -1
            choice.append(i if i >= 0 and v[i] > 0 else -1)
        total_v = float(sum(vs[g][i] for g, i in enumerate(choice) if i >= 0))
        total_w = int(sum(ws[g][i] for g, i in enumerate(choice) if i >= 0))
        return MckpResult(total_v, choice, total_w)
    C = cap
    dp = np.zeros(C + 1, dtype=np.float64)
    pick = np.full((G, C + 1), -1, dtype=np.int32)
    for gi in range(G):
        w, v = ws[gi], vs[gi]
        best = dp.copy()
        arg = pick[gi]
        for ii in range(len(w)):
            wi = int(w[ii])
            if wi > C:
                continue
            # capacities c >= wi: take item ii on top of the previous groups' best at c - wi;
            # replace only when strictly better, so "no item", lighter and lower-index items
            # win ties.
            cand = dp[: C + 1 - wi] + float(v[ii])
            tail = best[wi:]
            better = cand > tail
            np.copyto(tail, cand, where=better)
            arg[wi:][better] = ii
        dp = best
    # Backtrack from the full capacity.
    choice = [-1] * G
    c = C
    weight = 0
    for gi in range(G - 1, -1, -1):
        ii = int(pick[gi, c])
        choice[gi] = ii
        if ii >= 0:
            wt = int(ws[gi][ii])
            c -= wt
            weight += wt
    return MckpResult(float(dp[C]), choice, weight)


def brute_force_mckp(groups: Sequence[Sequence[Item]], capacity: int) -> MckpResult:
    """Exhaustive MCKP for tests: every combination of one-or-no item per group.

    O(prod(K_g + 1)); only for tiny instances.
    """

    best_v, best_c, best_w = 0.0, [-1] * len(groups), 0
    for combo in itertools.product(*[range(-1, len(items)) for items in groups]):
        w = sum(int(groups[g][i][0]) for g, i in enumerate(combo) if i >= 0)
        if w > capacity:
            continue
        v = sum(float(groups[g][i][1]) for g, i in enumerate(combo) if i >= 0)
        if v > best_v + 1e-9:
            best_v, best_c, best_w = v, list(combo), w
    return MckpResult(best_v, best_c, best_w)
