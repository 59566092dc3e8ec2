"""The overhead share over a trailing window of simulated time.

One rule, three users: the simulator's thrash rule (:meth:`aryl_gym.sim.engine.Simulator.
check_thrash`), the flap damping shield's engagement (:class:`aryl_gym.envs.damping.FlapDamping`)
and ``experiments/07-flap-damping/overhead_share.py``. Each feeds the running totals of GPU-seconds spent in
relaunch and scaling overheads and of GPU-seconds allocated, at the simulated times it checks;
the window holds marks of those totals and answers with their growth since the newest mark that
is at least ``span`` old (so a window covers ``span`` and at most one gap between marks more).
"""

from __future__ import annotations

from collections import deque


class OverheadWindow:
    """Marks ``(time, overhead_gs, alloc_gs)`` of the last ``span`` seconds of simulated time.

    A mark is kept when it is later than the newest one by at least ``min_gap`` seconds (and by
    more than 0): ``min_gap = span / 8`` bounds the memory of a long window, ``0`` keeps every
    distinct time. Picklable (the simulator is deep-copied and pickled with it).
    """

    __slots__ = ("span", "min_gap", "_marks")

    def __init__(self, span: float, min_gap: float = 0.0):
        if not span > 0.0:
            raise ValueError(f"OverheadWindow: span must be > 0 seconds, got {span!r}")
        if not min_gap >= 0.0:
            raise ValueError(f"OverheadWindow: min_gap must be >= 0 seconds, got {min_gap!r}")
        self.span = float(span)
        self.min_gap = float(min_gap)
        self._marks: deque[tuple[float, float, float]] = deque()

    def __getstate__(self) -> tuple[float, float, list[tuple[float, float, float]]]:
        return (self.span, self.min_gap, list(self._marks))

    def __setstate__(self, state: tuple[float, float, list[tuple[float, float, float]]]) -> None:
        self.span, self.min_gap, marks = state
        self._marks = deque(marks)

    def push(self, now: float, overhead_gs: float, alloc_gs: float) -> tuple[float, float] | None:
        """Record the totals at ``now`` (non-decreasing across calls); return the overhead and
        allocated GPU-seconds of the window ending at ``now`` once the marks span ``span``
        seconds, else ``None``."""
        marks = self._marks
        if not marks or (now > marks[-1][0] and now - marks[-1][0] >= self.min_gap):
            marks.append((now, overhead_gs, alloc_gs))
        while len(marks) >= 2 and now - marks[1][0] >= self.span:
            marks.popleft()
        t0, w0, a0 = marks[0]
        if now - t0 >= self.span:
            return overhead_gs - w0, alloc_gs - a0
        return None

    def halves(self, now: float, overhead_gs: float, alloc_gs: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """The window of the last :meth:`push` (``now`` and the same totals) split in two at
        the newest mark at least ``span / 2`` old: ``((overhead, alloc) of the first part,
        (overhead, alloc) of the second)``. With no mark between the window's start and that
        point the first part is empty (zeros)."""
        marks = self._marks
        _, w0, a0 = mid = marks[0]
        for m in marks:
            if now - m[0] < self.span / 2.0:
                break
            mid = m
        return (mid[1] - w0, mid[2] - a0), (overhead_gs - mid[1], alloc_gs - mid[2])

    def clear(self) -> None:
        self._marks.clear()

    def __len__(self) -> int:
        return len(self._marks)
