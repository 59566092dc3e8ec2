"""A compiled loop for the generations of Pollux's GA (:meth:`agents.pollux.GAProblem.search`).

The numpy search makes about 25 numpy calls per generation; on a round of a few dozen jobs
(population 100) their per-call overhead, not the arithmetic, is most of Pollux's time in an
episode (a profile of 300 production rounds at 52 active jobs: the search 8.5 of 10.9 CPU-s).
:func:`run_block` runs one draw block's generations as plain loops over cells, compiled with
numba where it is installed (``pip install numba``, the ``fast`` extra); without numba the
numpy search runs and nothing else changes. :func:`gap_positions` turns a chunk of exponential
draws into Bernoulli cells in one pass (:func:`~aryl_gym.agents.pollux.bernoulli_cells`); with
both, a busy production round spends most of its search time in numpy's own random draws,
which define the stream and stay as they are.

The kernel is **bit-identical** to the numpy search on the same draws, not merely the same law:
every integer step is the same integer arithmetic; the float steps are the same IEEE operations
in the same order (the raise ``(span - count) * u`` truncated to int32, the harmonic mean
``n / sum``: the search uses the kernel at upstream's ``p = -1`` only), and a
child's fitness sum is numpy's own pairwise summation (:func:`pairwise_sum`: blocks of eight
accumulators, halves split on multiples of eight, as numpy's ``add.reduce`` sums a contiguous
row). ``tests/test_pollux.py`` compares the two searches on random problems (dense and sparse
raises, valid and invalid starting rows, unit and mixed GPUs per worker, rows past 128
jobs), and a whole episode under ``pollux-250`` gives the same result either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

try:  # the ``fast`` extra; without it these are plain Python and the numpy search runs
    import numba

    _jit = numba.njit(cache=True, nogil=True)
except ImportError:  # pragma: no cover - depends on the install
    numba = None  # type: ignore[assignment]

    def _jit(f: Any) -> Any:
        return f


#: set to ``1`` to run the numpy search even where numba is installed (a check or a profile)
ENV_DISABLE = "ARYL_GYM_NO_NUMBA"


@_jit
def _leaf_sum(a: np.ndarray, lo: int, n: int) -> float:
    """numpy's pairwise sum of ``a[lo : lo + n]`` for ``n <= 128`` (one leaf of the tree)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@_jit
def pairwise_sum(a: np.ndarray, lo: int, n: int) -> float:
    """The sum of ``a[lo : lo + n]`` in numpy's pairwise order (``np.add.reduce`` on a
    contiguous float64 row): under 8 items one by one from 0.0; up to 128 eight running sums
    combined as ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`` then the rest one by one; above 128
    the two halves (the first a multiple of 8 long) summed apart and added. The tree is walked
    with an explicit stack (numba's on-disk cache does not hold recursive functions safely)."""
    if n <= 128:
        return _leaf_sum(a, lo, n)
    seg_lo = np.empty(64, dtype=np.int64)
    seg_n = np.empty(64, dtype=np.int64)
    state = np.zeros(64, dtype=np.int64)  # 0: new, 1: left half pending, 2: right half pending
    left = np.empty(64)
    top = 0
    seg_lo[0], seg_n[0] = lo, n
    while True:
        m = seg_n[top]
        if m > 128:  # split: the left half first
            h = m // 2
            h -= h % 8
            state[top] = 1
            top += 1
            seg_lo[top], seg_n[top], state[top] = seg_lo[top - 1], h, 0
            continue
        v = _leaf_sum(a, seg_lo[top], m)
        top -= 1
        while True:  # hand the value up until a frame needs its right half
            if top < 0:
                return v
            if state[top] == 1:
                left[top] = v
                state[top] = 2
                h = seg_n[top] // 2
                h -= h % 8
                nxt = top + 1
                seg_lo[nxt], seg_n[nxt], state[nxt] = seg_lo[top] + h, seg_n[top] - h, 0
                top = nxt
                break
            v = left[top] + v
            top -= 1


@_jit
def _cut_row(x: np.ndarray, r: int, n: int, g: np.ndarray, unit_g: bool, cap: int,
             fix2: np.ndarray, offs: np.ndarray) -> None:
    """The capacity step on row ``r`` (over capacity): jobs keep theirs in order until the
    first that passes ``cap``, which gets what is left (repair step 2), and the rest 0."""
    cum = 0
    for k in range(n):
        gk = 1 if unit_g else g[k]
        c = cum + x[r, k] * gk
        if c > cap:
            left = (cap - cum) // gk
            x[r, k] = fix2[offs[k] + left]
            for m in range(k + 1, n):
                x[r, m] = 0
            return
        cum = c


@_jit
def _follow(cell: int, r: int, rb: int, n: int) -> tuple[int, int]:
    """The child row of ``cell`` (a block-relative cell of a sorted run): advance row ``r``,
    whose first cell is ``rb``, until ``cell`` lies in it; no division per cell."""
    while cell - rb >= n:
        r += 1
        rb += n
    return r, rb


@_jit
def run_block(
    Y: np.ndarray, allf: np.ndarray, tour0: np.ndarray, tour1: np.ndarray, points: np.ndarray,
    reset: np.ndarray, r_at: np.ndarray, base_cell: np.ndarray,
    zero: np.ndarray, z_at: np.ndarray,
    dense: bool, inc: np.ndarray, inc_u: np.ndarray,
    i_at: np.ndarray, span_cell: np.ndarray, offs_cell: np.ndarray,
    valid: bool, fix1: np.ndarray, fix2: np.ndarray, offs: np.ndarray, g: np.ndarray,
    unit_g: bool, cap: int, V: int, term: np.ndarray, p: float,
) -> None:
    """Run the ``G = len(points)`` generations of one draw block in place on ``Y`` (rows
    ``0..P-1`` the population best first, ``P..2P-1`` the children) and ``allf`` (their
    fitness): the loop body of :meth:`GAProblem.search`, cell by cell. The mutated cells
    (``reset``, ``zero``, ``inc``) are the block's (:class:`~aryl_gym.agents.pollux.DrawBlock`:
    ``generation x P x n + child x n + job``); ``base_cell``, ``span_cell`` and ``offs_cell``
    give a ``(P, n)`` cell's current count, ``hi + 1`` and table offset."""
    P2, n = Y.shape
    P = P2 // 2
    half = P // 2
    Pn = P * n
    G = points.shape[0]
    tb = np.empty(n)
    neg = np.empty(P2)
    keep = np.empty((P, n), dtype=Y.dtype)
    kf = np.empty(P)
    for t in range(G):
        # binary tournaments, then crossover of pairs (i, i + P/2) at the pair's point
        for i in range(half):
            x0, x1 = tour0[t, i], tour1[t, i]
            wa = x0 if allf[x0] >= allf[x1] else x1
            x0, x1 = tour0[t, i + half], tour1[t, i + half]
            wb = x0 if allf[x0] >= allf[x1] else x1
            pt = points[t, i]
            Y[P + i, :pt] = Y[wa, :pt]
            Y[P + i, pt:] = Y[wb, pt:]
            Y[P + half + i, :pt] = Y[wb, :pt]
            Y[P + half + i, pt:] = Y[wa, pt:]
        # mutations: reset to the current allocation, zero, raise
        # (cells are sorted: the child's row advances with them, no division per cell)
        o = t * Pn
        r, rb = P, 0
        for q in range(r_at[t], r_at[t + 1]):
            cell = reset[q] - o
            r, rb = _follow(cell, r, rb, n)
            Y[r, cell - rb] = base_cell[cell]
        r, rb = P, 0
        for q in range(z_at[t], z_at[t + 1]):
            cell = zero[q] - o
            r, rb = _follow(cell, r, rb, n)
            Y[r, cell - rb] = 0
        if dense:
            cell = 0
            last = fix1.size - 1
            for i in range(P):
                r = P + i
                for c in range(n):
                    cur = Y[r, c]
                    cur += np.int32((span_cell[cell] - cur) * inc_u[o + cell])
                    if valid:
                        ix = cur + offs_cell[cell]
                        cur = fix1[0 if ix < 0 else (last if ix > last else ix)]
                    Y[r, c] = cur
                    cell += 1
        else:
            r, rb = P, 0
            for q in range(i_at[t], i_at[t + 1]):
                cell = inc[q] - o
                r, rb = _follow(cell, r, rb, n)
                c = cell - rb
                cur = Y[r, c]
                cur += np.int32(inc_u[q] * (span_cell[cell] - cur))
                Y[r, c] = fix1[cur + offs_cell[cell]] if valid else cur
        # repair: step 1 everywhere when the rows may break it, then the capacity cut
        for i in range(P):
            r = P + i
            if not valid:
                for c in range(n):
                    v = Y[r, c]
                    Y[r, c] = fix1[(v if v < V - 1 else V - 1) + offs[c]]
            tot = 0
            for c in range(n):
                tot += Y[r, c] if unit_g else Y[r, c] * g[c]
            if tot > cap:
                _cut_row(Y, r, n, g, unit_g, cap, fix2, offs)
            # fitness: the power mean of the penalised speedups
            for c in range(n):
                ix = Y[r, c] + offs[c]
                ix = 0 if ix < 0 else (term.size - 1 if ix >= term.size else ix)
                tb[c] = term[ix]
            s = pairwise_sum(tb, 0, n)
            allf[r] = n / s if p == -1.0 else (s / n) ** (1.0 / p)
        # survival: the P best of parents and children (stable: a parent wins ties)
        for i in range(P2):
            neg[i] = -allf[i]
        idx = np.argsort(neg, kind="mergesort")
        for i in range(P):
            k = idx[i]
            kf[i] = allf[k]
            for c in range(n):
                keep[i, c] = Y[k, c]
        for i in range(P):
            allf[i] = kf[i]
            for c in range(n):
                Y[i, c] = keep[i, c]


@_jit
def gap_positions(e: np.ndarray, inv: float, last: int, n_cells: int) -> tuple[np.ndarray, bool]:
    """One chunk of :func:`~aryl_gym.agents.pollux.bernoulli_cells` in one pass: the positions
    ``last + cumsum(1 + trunc(e * inv))`` below ``n_cells``, and whether the chunk reached
    ``n_cells`` (the caller then stops drawing). The same float product and truncation as the
    numpy expression ``(e * inv).astype(np.int64) + 1``, and exact integer sums, so the same
    cells, without numpy's five temporaries of the chunk's length."""
    out = np.empty(e.size, dtype=np.int64)
    pos = last
    for i in range(e.size):
        pos += np.int64(e[i] * inv) + 1
        if pos >= n_cells:
            return out[:i], True
        out[i] = pos
    return out, False


def compiled_gaps() -> Callable[..., Any] | None:
    """:func:`gap_positions`, compiled, or None (as :func:`compiled`)."""
    if numba is None or os.environ.get(ENV_DISABLE, "") not in ("", "0"):
        return None
    return gap_positions


def compiled() -> Callable[..., Any] | None:
    """:func:`run_block`, compiled (numba, cached on disk), or None where numba is not installed
    or ``ARYL_GYM_NO_NUMBA=1``: the caller then runs the numpy search."""
    if numba is None or os.environ.get(ENV_DISABLE, "") not in ("", "0"):
        return None
    return run_block
