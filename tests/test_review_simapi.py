"""Review of the public simulator API from a hostile policy author's side: malformed decisions,
aliasing and API misuse must not crash deep in the engine, corrupt the state or be silently
reinterpreted (docs/simulator.md, "The public simulator API")."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.invariants import InvariantChecker
from aryl_gym.sim.placement import plan
from aryl_gym.sim.view import INFER, TRAIN, Decision
from tests.helpers import ScriptedPolicy, job, make_sim, small_config


def _world(util: float | list[float] = 0.0) -> Simulator:
    jobs = [
        job(0, w=2, w_min=1, elastic=True, ta=True, work=60000.0),
        job(1, w=2, work=60000.0),
        job(2, w=1, submit=5000.0),
    ]
    return make_sim(small_config(), jobs, util=util)


def _running() -> tuple[Simulator, ScriptedPolicy, InvariantChecker]:
    """Jobs 0 (elastic, 2 workers) and 1 (inelastic, 2 workers) running; a round open."""
    sim = _world()
    pol = ScriptedPolicy(lambda v: Decision())
    sim.begin(pol)
    chk = InvariantChecker()
    sim.open_round(pol)
    sim.close_round(pol, Decision(targets={0: 2, 1: 2}))
    chk(sim)
    sim.open_round(pol)
    return sim, pol, chk


def _snapshot(sim: Simulator) -> tuple[list[int], list[int], list[float]]:
    return sim.workers.tolist(), sim.state.tolist(), sim.rate.tolist()


def test_uncomparable_pool_is_reported_before_the_releases() -> None:
    sim, pol, chk = _running()
    # was: ValueError "truth value of an array is ambiguous" after job 1 had been preempted
    info = sim.close_round(pol, Decision(targets={1: 0}, pools={0: np.array([0, 1])}))  # type: ignore[dict-item]
    assert any("is not TRAIN" in r for r in info.report.invalid.values())
    assert info.report.preempted == [1]
    chk(sim)
    # the same decision through a dry run on a view reports the same
    sim.open_round(pol)
    p = plan(sim.view, Decision(targets={0: 1}, pools={0: np.array([0, 1])}), pol.placement)  # type: ignore[dict-item]
    assert len(p.report.invalid) == 1


def test_bool_target_and_pool_are_not_numbers() -> None:
    sim, pol, chk = _running()
    before = _snapshot(sim)
    # was: True read as a target of 1 (job 0 scaled in) and as INFER
    info = sim.close_round(pol, Decision(targets={0: True, 2: np.True_}, pools={0: True}))  # type: ignore[dict-item]
    assert len(info.report.invalid) == 3 and not info.report.scaled_in
    assert sim.workers.tolist()[:2] == before[0][:2]
    chk(sim)


def test_huge_target_that_is_not_an_int_is_reported() -> None:
    sim, pol, chk = _running()
    # was: OverflowError from float() inside the placement engine
    info = sim.close_round(pol, Decision(targets={0: Fraction(10**400)}))
    assert "is not a number" in info.report.invalid[-1]
    chk(sim)


@pytest.mark.parametrize("field", ["speedup", "batch"])
def test_overflowing_speedup_or_batch_is_reported_not_raised_after_placing(field: str) -> None:
    sim, pol, chk = _running()
    value = [10**400] if field == "speedup" else 10**400
    # was: OverflowError after job 1 had been preempted, with the round still open
    info = sim.close_round(pol, Decision(targets={1: 0}, **{field: {0: value}}))
    assert info.report.preempted == [1] and len(info.report.invalid) == 1
    assert not sim._round_open and not sim.rate_mult and not sim.batch_lam
    chk(sim)


@pytest.mark.parametrize(
    "field,value",
    [("speedup", ["2", "2"]), ("speedup", [True, True]), ("speedup", [[1.0, 2.0], [3.0, 4.0]]),
     ("batch", "2"), ("batch", True)],
)
def test_speedup_and_batch_of_wrong_kind_are_reported(field: str, value: object) -> None:
    sim, pol, chk = _running()
    rate = sim.rate.tolist()
    # was: strings parsed, True read as 1.0, a 2-D table flattened row after row
    info = sim.close_round(pol, Decision(**{field: {0: value}}))  # type: ignore[arg-type]
    assert len(info.report.invalid) == 1
    assert not sim.rate_mult and not sim.batch_lam and sim.rate.tolist() == rate
    chk(sim)


def test_speedup_table_is_copied() -> None:
    sim, pol, chk = _running()
    tab = np.array([1.0, 1.0, 1.0])
    sim.close_round(pol, Decision(speedup={0: tab}))
    rate = float(sim.rate[0])
    tab[:] = 5.0  # the policy reuses its array
    # was: the simulator's table was the policy's array (rate_for moved, the rate did not)
    assert sim.rate_mult[0].tolist() == [1.0, 1.0, 1.0]
    assert sim.rate_for(0, 2, int(sim.pool[0])) == rate


def test_second_invalid_reason_for_a_job_is_kept() -> None:
    sim, pol, _ = _running()
    # a clamped target and a bad table for the same job: two reasons (was: one, overwritten)
    info = sim.close_round(pol, Decision(targets={0: 9}, speedup={0: [0.0]}, batch={0: -1.0}))
    assert len(info.report.invalid) == 3
    assert sim.invalid_total == 3


@pytest.mark.parametrize("order", [lambda: (j for j in [1, 0]), lambda: {1, 0}])
def test_order_that_is_not_a_sequence_is_a_type_error(order) -> None:  # type: ignore[no-untyped-def]
    sim, pol, _ = _running()
    before = _snapshot(sim)
    # was: accepted (a generator used up by a dry run, a set read in hash order)
    with pytest.raises(TypeError, match="Decision.order"):
        sim.close_round(pol, Decision(targets={1: 0}, order=order()))
    assert _snapshot(sim) == before and sim._round_open


def test_order_as_an_array_is_read_like_a_list() -> None:
    sim, pol, chk = _running()
    # was: ValueError "truth value of an array is ambiguous"
    info = sim.close_round(pol, Decision(targets={1: 0}, order=np.array([1, 0])))  # type: ignore[arg-type]
    assert info.report.preempted == [1] and not info.report.invalid
    chk(sim)


def test_view_usable_mask_is_read_only() -> None:
    sim, pol, chk = _running()
    m = sim.view.usable(TRAIN)
    # was: the simulator's own mask, so `m &= ...` in a policy took servers away from training
    with pytest.raises(ValueError):
        m[:] = False
    with pytest.raises(ValueError):
        sim.view.usable(INFER)[:] = True
    sim.close_round(pol, None)
    chk(sim)


def test_malformed_reclaim_answer_then_close_round_keeps_loans_consistent() -> None:
    sim = _world(util=[0.0] * 5 + [1.0] * 2000)  # the inference servers come back at 1500 s
    bad = {"on": False}

    class P(ScriptedPolicy):
        def reclaim(self, view, n):  # type: ignore[no-untyped-def,override]
            return "abc" if bad["on"] else None

    pol = P(lambda v: Decision(targets={0: 2}, pools={0: INFER}), event_driven=False)
    sim.begin(pol)
    chk = InvariantChecker()
    for _ in range(60):
        bad["on"] = sim.reclaims_due() > 0
        try:
            due = sim.open_round(pol)
        except TypeError:  # the documented answer: the round stays open; close it
            assert bad["on"]
            n_invalid = sim.invalid_total
            info = sim.close_round(pol, None)
            # was: the servers stayed on loan beyond what is loanable (an invariant broken),
            # and the round reported the previous loan phase's reclaims
            assert sorted(info.reclaimed) == [2, 3] and info.preempted_by_reclaim == [0]
            assert sim.invalid_total == n_invalid + 1
            chk(sim)
            return
        sim.close_round(pol, pol.decide(sim.view) if due else None)
        chk(sim)
    raise AssertionError("no reclaim happened")


@pytest.mark.parametrize("bad,err", [("abc", TypeError), (None, TypeError), (True, TypeError),
                                     (float("nan"), ValueError), (-1.0, ValueError)])
def test_close_round_refuses_a_bad_decision_time(bad: object, err: type) -> None:
    sim, pol, _ = _running()
    # was: kept, and episode_result failed on it (or reported nan timings) at the episode's end
    with pytest.raises(err, match="decision_s"):
        sim.close_round(pol, Decision(), decision_s=bad)  # type: ignore[arg-type]
    assert sim._round_open and sim.decision_times == [0.0]
    sim.close_round(pol, Decision(), decision_s=0)


@pytest.mark.parametrize("future", [None, 3, job(5, submit=1e6)])
def test_replace_future_that_is_not_a_list_is_a_value_error(future: object) -> None:
    sim, _, _ = _running()
    with pytest.raises(ValueError, match="future must be a list of JobSpecs"):  # was: a raw TypeError
        sim.replace_future(future)  # type: ignore[arg-type]
    assert sim.n_jobs == 3
