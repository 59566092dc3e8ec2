"""Indexed free capacity: servers bucketed by free GPUs (the placement engine's best fit).

:class:`FreeIndex` keeps, for every value ``f`` of free GPUs a server can have, the set of
servers with exactly ``f`` free GPUs, as a *bitset*: a Python int whose bit ``s`` is set for
server ``s``. Servers have a handful of GPUs (8 in every shipped scenario), so there are a
handful of buckets, and a set operation on a few hundred servers is one C-level operation on a
few machine words. With it:

* the best fit for a worker of ``g`` GPUs among candidate servers ``C`` (a bitset) is the
  lowest set bit of ``bins[f] & C & not_cap[f]`` for the smallest ``f >= g`` where that is not
  empty (a non-empty server with the least free GPUs, ties to the lowest id), else the lowest set
  bit of the union of ``bins[f] & C`` over ``f >= g`` (all fitting servers are empty: the
  lowest-id empty one): :func:`best_fit_bits`, ``O(buckets)`` instead of a scan of the servers;
* the fit tables (workers of ``g`` GPUs that fit a pool) are ``sum_f popcount(bins[f] & pool)
  * (f // g)``: :meth:`FreeIndex.fits`, ``O(buckets)``.

The :class:`~aryl_gym.sim.engine.Simulator` keeps one up to date in its worker primitives and
its loan phase (``move`` on every change of a server's free GPUs, ``set_loaned`` on loans and
returns); :class:`~aryl_gym.sim.placement.Scratch` copies it (a list of a few ints) and keeps
its copy the same way. ``aryl_gym.sim.invariants.check`` compares it with a recount.

This module imports nothing from the rest of the simulator (the state protocols name it).
"""

from __future__ import annotations

from collections.abc import Sequence


def bits_of(flags: Sequence[bool] | Sequence[int]) -> int:
    """The bitset of the positions whose flag is true."""
    out = 0
    for s, on in enumerate(flags):
        if on:
            out |= 1 << s
    return out


def lowest(bits: int) -> int:
    """Position of the lowest set bit of a non-zero bitset."""
    return (bits & -bits).bit_length() - 1


def ids_of(bits: int) -> list[int]:
    """Positions of the set bits, ascending."""
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


class FreeIndex:
    """Servers bucketed by free GPUs, as bitsets (module docstring).

    Attributes:
        bins: ``bins[f]`` -- the servers with exactly ``f`` free GPUs (``f`` in ``0..max cap``).
        train: the training servers (static).
        loaned: the inference servers on loan now.
        not_cap: ``not_cap[f]`` -- the servers whose capacity is not ``f`` (static): a server
            with ``f`` free GPUs is non-empty exactly when its capacity is not ``f``.
    """

    __slots__ = ("bins", "train", "loaned", "not_cap")

    def __init__(
        self,
        free: Sequence[int],
        cap: Sequence[int],
        is_train: Sequence[bool],
        loaned: Sequence[bool],
    ):
        top = max(cap) if len(cap) else 0
        self.bins = [0] * (top + 1)
        for s, f in enumerate(free):
            self.bins[f] |= 1 << s
        everyone = (1 << len(cap)) - 1
        cap_is = [0] * (top + 1)
        for s, c in enumerate(cap):
            cap_is[c] |= 1 << s
        self.not_cap = [everyone & ~m for m in cap_is]
        self.train = bits_of(is_train)
        self.loaned = bits_of(loaned)

    def copy(self) -> FreeIndex:
        """An independent copy (the static members are shared)."""
        c = FreeIndex.__new__(FreeIndex)
        c.bins = self.bins.copy()
        c.train = self.train
        c.loaned = self.loaned
        c.not_cap = self.not_cap
        return c

    def move(self, s: int, old: int, new: int) -> None:
        """Server ``s`` went from ``old`` to ``new`` free GPUs."""
        if old != new:
            b = 1 << s
            bins = self.bins
            bins[old] ^= b
            bins[new] |= b

    def set_loaned(self, s: int, on: bool) -> None:
        """Server ``s`` was loaned (``on``) or returned."""
        if on:
            self.loaned |= 1 << s
        else:
            self.loaned &= ~(1 << s)

    def usable(self, train: bool) -> int:
        """The servers of a pool a job may use now: the training servers or the loaned ones."""
        return self.train if train else self.loaned

    def fits(self, cand: int) -> list[int]:
        """Workers of ``g`` GPUs that fit the servers of ``cand`` (fragmentation aware), for
        ``g`` = 0..8 (entries 1, 2, 4 and 8 filled, the others 0): ``sum_s free_s // g``."""
        a1 = a2 = a4 = a8 = 0
        for f, b in enumerate(self.bins):
            if f and b:
                n = (b & cand).bit_count()
                if n:
                    a1 += n * f
                    a2 += n * (f >> 1)
                    a4 += n * (f >> 2)
                    a8 += n * (f >> 3)
        return [0, a1, a2, 0, a4, 0, 0, 0, a8]

    def free_of(self, s: int) -> int:
        """Free GPUs of server ``s`` (a scan of the buckets; for checks, not hot paths)."""
        b = 1 << s
        for f, m in enumerate(self.bins):
            if m & b:
                return f
        raise KeyError(f"server {s} is in no bucket")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FreeIndex):
            return NotImplemented
        return (self.bins, self.train, self.loaned, self.not_cap) == (
            other.bins, other.train, other.loaned, other.not_cap
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FreeIndex(bins={[ids_of(b) for b in self.bins]}, loaned={ids_of(self.loaned)})"


def best_fit_bits(bins: list[int], not_cap: list[int], cand: int, g: int) -> tuple[int, int]:
    """``(server, its free GPUs)`` of the best fit for one worker of ``g`` GPUs among the
    servers of bitset ``cand``, or ``(-1, 0)``: the same rule and tie-breaks as
    :func:`aryl_gym.sim.placement.best_fit` (least free non-empty server, lowest id; else the
    lowest-id empty server)."""
    empty = 0
    top = len(bins)
    first_empty_f = 0
    f = g
    while f < top:
        m = bins[f] & cand
        if m:
            ne = m & not_cap[f]
            if ne:
                return (ne & -ne).bit_length() - 1, f
            if not empty:
                first_empty_f = f
            empty |= m
        f += 1
    if empty:
        s = (empty & -empty).bit_length() - 1
        if (bins[first_empty_f] >> s) & 1:
            return s, first_empty_f
        b = 1 << s
        for f in range(first_empty_f, top):
            if bins[f] & b:
                return s, f
    return -1, 0


def fill_bits(
    bins: list[int], not_cap: list[int], cand: int, g: int, need: int
) -> list[tuple[int, int]]:
    """:func:`aryl_gym.sim.placement.fill` on bitsets: best-fit up to ``need`` workers of ``g``
    GPUs onto the ``cand`` servers, one server at a time (as many as fit there). ``bins`` (a
    copy the caller owns) is updated in place. Returns ``[(server, workers), ...]``."""
    plan: list[tuple[int, int]] = []
    while need > 0:
        s, f = best_fit_bits(bins, not_cap, cand, g)
        if s < 0:
            break
        k = f // g
        if k > need:
            k = need
        b = 1 << s
        bins[f] ^= b
        bins[f - k * g] |= b
        plan.append((s, k))
        need -= k
    return plan
