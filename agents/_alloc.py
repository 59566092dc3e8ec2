"""Shared allocation helper for the elastic baselines (AFS, Pollux, Gandiva, random).

:func:`fit_targets` dry-runs a set of worker targets with the placement engine itself
(:func:`aryl_gym.sim.placement.plan`) and lowers every target to what would be placed
(fragmentation: a worker of ``g`` GPUs needs ``g`` free GPUs on one server). Policies call it
last, so their decisions are placeable as they are and the engine's ``unplaced`` count stays a
signal of real conflicts, not of policy sloppiness. Step-by-step trial placements use
:class:`aryl_gym.sim.placement.Scratch` (``release`` / ``grow`` / ``fits``).
"""

from __future__ import annotations

from collections.abc import Sequence

from aryl_gym.sim.placement import plan
from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions


def fit_targets(
    view: ClusterView,
    targets: dict[int, int],
    order: Sequence[int] | None,
    pools: dict[int, int] | None,
    opts: PlacementOptions,
) -> dict[int, int]:
    """Lower ``targets`` until the placement engine would place every one in full.

    Returns a new dict (same keys): the workers each job would have once the decision is
    placed. A running job whose growth does not fit keeps what fits (at least its current
    count); a queued job that cannot get ``w_min`` workers gets 0; an elastic queued job gets
    the most that fit up to its target.
    """
    dec = Decision(targets=dict(targets), pools=dict(pools or {}), order=list(order or []))
    p = plan(view, dec, opts)
    return {j: p.workers(j) for j in targets}
