"""The trailing overhead-share window shared by the thrash rule, the shield and its script."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.sim.overhead import OverheadWindow


def brute(marks: list[tuple[float, float, float]], span: float, min_gap: float) -> list[tuple[float, float] | None]:
    """The window's answer after each mark, from its definition: the kept marks (later than the
    newest kept one by > 0 and >= min_gap), and the newest kept one at least ``span`` old."""
    kept: list[tuple[float, float, float]] = []
    out: list[tuple[float, float] | None] = []
    for t, w, a in marks:
        if not kept or (t > kept[-1][0] and t - kept[-1][0] >= min_gap):
            kept.append((t, w, a))
        old = [m for m in kept if t - m[0] >= span]
        out.append((w - old[-1][1], a - old[-1][2]) if old else None)
    return out


def test_by_hand() -> None:
    win = OverheadWindow(3600.0)
    assert win.push(0.0, 0.0, 0.0) is None
    assert win.push(1800.0, 100.0, 1000.0) is None
    # one hour after the first mark: growth since t=0
    assert win.push(3600.0, 300.0, 2000.0) == (300.0, 2000.0)
    # at 5400 s the newest mark at least an hour old is the one at 1800 s
    assert win.push(5400.0, 400.0, 3000.0) == (300.0, 2000.0)
    assert len(win) == 3  # the mark at 0 s is no longer needed


def test_min_gap_thins_the_marks() -> None:
    win = OverheadWindow(800.0, min_gap=100.0)
    for t in range(0, 1000, 60):
        win.push(float(t), float(t), 2.0 * t)
    # kept: 0, 120, 240, ... (60 s after a kept mark is too close)
    assert win.push(1000.0, 1000.0, 2000.0) == (1000.0 - 120.0, 2000.0 - 240.0)


def test_same_time_is_not_a_new_mark() -> None:
    win = OverheadWindow(10.0)
    win.push(0.0, 0.0, 0.0)
    win.push(0.0, 5.0, 5.0)  # a second check at the same time keeps the first mark
    assert win.push(10.0, 6.0, 8.0) == (6.0, 8.0)


@pytest.mark.parametrize("span,gap", [(0.0, 0.0), (-1.0, 0.0), (10.0, -1.0), (float("nan"), 0.0)])
def test_bad_settings(span: float, gap: float) -> None:
    with pytest.raises(ValueError, match="OverheadWindow"):
        OverheadWindow(span, gap)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 50), st.integers(0, 100)), min_size=1, max_size=60),
    span=st.integers(1, 2000),
    gap=st.sampled_from([0.0, 1.0, 60.0, 250.0]),
)
def test_matches_the_definition(steps: list[tuple[int, int, int]], span: int, gap: float) -> None:
    t = w = a = 0.0
    marks = []
    for dt, dw, da in steps:
        t, w, a = t + dt, w + dw, a + dw + da
        marks.append((t, w, a))
    win = OverheadWindow(float(span), gap)
    got = [win.push(*m) for m in marks]
    assert got == brute(marks, float(span), gap)


def test_copies_continue_alike() -> None:
    win = OverheadWindow(100.0, 10.0)
    for t in range(0, 300, 7):
        win.push(float(t), t / 3.0, float(t))
    a, b = copy.deepcopy(win), pickle.loads(pickle.dumps(win))
    ra = [a.push(300.0 + k, 100.0 + k, 300.0 + k) for k in range(0, 200, 5)]
    rb = [b.push(300.0 + k, 100.0 + k, 300.0 + k) for k in range(0, 200, 5)]
    rw = [win.push(300.0 + k, 100.0 + k, 300.0 + k) for k in range(0, 200, 5)]
    assert ra == rb == rw
    assert any(r is not None for r in rw)
