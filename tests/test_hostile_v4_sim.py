"""The simulator's API as a hostile user drives it (fourth pass): a pool for a job that is not
in the trace, and rates a policy declares itself."""

from __future__ import annotations

import numpy as np

from aryl_gym.sim.placement import INFER, TRAIN
from aryl_gym.sim.view import Decision
from tests.test_hostile_v3 import _open_tiny_round as _open_first_round


def _open_tiny_round():  # type: ignore[no-untyped-def]
    """``tiny`` seed 0 under FIFO, at the first open round with a queued job."""
    sim, pol = _open_first_round()
    while not (sim.state == 1).any():
        sim.close_round(pol, None)
        while not sim.open_round(pol):
            sim.close_round(pol, None)
    return sim, pol


def test_a_pool_for_a_job_outside_the_trace_is_reported() -> None:
    sim, pol = _open_tiny_round()
    n = sim.n_jobs
    for key in (n, 999, -1, 2.0, "0", True):
        sim, pol = _open_tiny_round()
        rep = sim.close_round(pol, Decision(pools={key: TRAIN})).report  # type: ignore[dict-item]
        # was: ignored without a word (and 2.0 used as job 2's pool)
        assert any("not a job id of the trace" in str(v) for v in rep.invalid.values()), key


def test_a_float_pool_key_is_not_used_as_a_job_s_pool(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the preferred pool each growing job is placed with, as the engine hands it on
    import aryl_gym.sim.placement as placement

    seen: dict[int, object] = {}
    real = placement.grow_job

    def spy(st, j, t, opts, pref, *rest):  # type: ignore[no-untyped-def]
        seen[j] = pref
        return real(st, j, t, opts, pref, *rest)

    monkeypatch.setattr(placement, "grow_job", spy)
    sim, pol = _open_tiny_round()
    j = int(np.flatnonzero(sim.state == 1)[0])
    sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={float(j): INFER}))  # type: ignore[dict-item]
    assert seen == {j: None}  # was: INFER (2.0 read as job 2)
    sim, pol = _open_tiny_round()
    sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={j: INFER}))
    assert seen == {j: INFER}


def test_a_valid_pool_is_still_quiet() -> None:
    sim, pol = _open_tiny_round()
    j = int(np.flatnonzero(sim.state == 1)[0])
    rep = sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={j: TRAIN})).report
    assert not rep.invalid


def test_declared_rates_leave_a_trace_in_the_result() -> None:
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode
    from aryl_gym.sim.view import ClusterView

    base = make_episode("tiny", 0).simulator().run(make_policy("sjf"))
    assert base.declared_rate_jobs == 0

    class Boast:
        """SJF that declares every job it starts 3x faster."""

        name = "boast"

        def __init__(self) -> None:
            self.inner = make_policy("sjf")

        def reset(self, seed: int | None = None) -> None:
            self.inner.reset(seed)

        def __getattr__(self, k: str):  # type: ignore[no-untyped-def]
            return getattr(self.inner, k)

        def decide(self, view: ClusterView) -> Decision:
            d = self.inner.decide(view)
            d.speedup = {int(j): [3.0] for j in d.targets}
            return d

    res = make_episode("tiny", 0).simulator().run(Boast())
    assert res.declared_rate_jobs > 0
    assert res.to_dict()["declared_rate_jobs"] == res.declared_rate_jobs
    assert res.avg_jct < base.avg_jct  # the declared rate was run: nothing bounds it
