"""AFS-L (Hwang et al., NSDI '21): the pairwise rule, hand-made episodes, the World v2 variants
(``afs`` unbounded up to ``w_ceil``, ``afs-all``, ``afs-bounded``), the fast tournament against
the reference loop, and ``afs-bounded`` against a frozen copy of the World v1 ``afs``."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import afs as afs_mod
from aryl_gym.agents.afs import AfsPolicy
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.fifo import FifoPolicy
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.scenario import make_episode
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.invariants import check
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import TRAIN
from tests.afs_frozen import FrozenAfsV1
from tests.helpers import examples, job, make_sim, small_config, util_series


def test_rule_linear_throughput_equalises_gpus_short_job_wins_ties_to_long():
    # a: 100 units left, b: 1000; both 1 GPU now, linear P(x) = x.
    # gain_a = (2-1)/1 = 1 > gain_b = (2-1)/2 = 0.5 -> the short job gets the GPU.
    assert AfsPolicy.prefer(100, (1, 2), 1, 1000, (1, 2), 1)
    # a at 2 GPUs: gain_a = 1/2 == gain_b = 1/2 -> strict '>' fails, the long job gets it.
    assert not AfsPolicy.prefer(100, (2, 3), 1, 1000, (1, 2), 1)
    # the order of arguments does not matter
    assert AfsPolicy.prefer(1000, (1, 2), 1, 100, (2, 3), 1)


def test_rule_differs_from_srtf_on_poor_scaling_short_job():
    # Short job a scales poorly (P: 1 -> 1.2), long job b well (P: 1 -> 1.9).
    # SRTF gives the GPU to a. AFS: gain_a = 0.2 < gain_b = 0.9 / 1.9 = 0.47 -> b.
    assert not AfsPolicy.prefer(100, (1.0, 1.2), 1, 1000, (1.0, 1.9), 1)
    # By hand, with b keeping its new share after a ends (the apathetic assumption):
    # GPU to a: 100/1.2 + 1000/1.0 = 1083.3; GPU to b: 100/1.0 + 1000/1.9 = 626.3.
    assert 100 / 1.0 + 1000 / 1.9 < 100 / 1.2 + 1000 / 1.0


def test_newcomers_srtf_and_zero_share_long_job_beats_growth():
    # Both without share: the one that finishes sooner with its first step wins.
    assert AfsPolicy.prefer(100, (0, 1), 1, 1000, (0, 1), 1)
    # A running 1-GPU short job vs a queued long one: gain_a = 1 == gain_b = 1 -> the newcomer.
    assert not AfsPolicy.prefer(100, (1, 2), 1, 1000, (0, 1), 1)
    # Per-GPU: a step of a 4-GPU worker must beat four 1-GPU steps.
    assert AfsPolicy.prefer(100, (1, 2), 1, 1000, (0, 1), 4)


def test_rule_is_not_transitive_so_the_list_order_matters():
    # Linear throughput (P = GPUs), remaining times t1 < t2 < t3. The shorter job wins iff its
    # GPUs now are fewer than the other's after the step: with GPUs 6, 4, 4 and steps of 1, 4
    # and 1 GPUs, 1 beats 2 (6 < 8), 2 beats 3 (4 < 5) and 3 beats 1 (6 < 5 fails).
    one = (6.0, (6.0, 7.0), 1)  # (remaining work, (P now, P after the step), GPUs of the step)
    two = (40.0, (4.0, 8.0), 4)
    three = (400.0, (4.0, 5.0), 1)
    assert AfsPolicy.prefer(*one, *two)
    assert AfsPolicy.prefer(*two, *three)
    assert AfsPolicy.prefer(*three, *one)

    def scan(jobs):  # the paper's tournament: the incumbent meets each job in list order
        best = jobs[0]
        for j in jobs[1:]:
            if AfsPolicy.prefer(*j, *best):
                best = j
        return best

    # so the winner depends on the list order, which the fast tournament keeps
    assert scan([one, two, three]) is three
    assert scan([two, three, one]) is one
    assert scan([three, one, two]) is two


def _two_jobs():
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=1, inf_gpus=4)
    jobs = [
        # both request 4 workers (w_req) and may shrink to 1
        job(0, work=400.0, w=4, w_min=1, elastic=True, w_req=4),  # short: 100 s at 4 workers
        job(1, work=4000.0, w=4, w_min=1, elastic=True, w_req=4),  # long: 1000 s at 4 workers
    ]
    return cfg, jobs


@pytest.mark.parametrize("elasticity", ["limited", "elastic"])
def test_two_job_episode_afs_shares_where_srtf_serialises(elasticity: str):
    cfg, jobs = _two_jobs()
    sim = make_sim(cfg, jobs)
    pol = AfsPolicy(elasticity=elasticity)
    sim.begin(pol)
    sim.pre_decision(pol)
    d = pol.decide(sim.view)
    # Steps: A (sooner), B (tie to the newcomer), A (1 < 2 GPUs), B (tie) -> 2 + 2.
    assert d.targets == {0: 2, 1: 2}
    res = make_sim(cfg, jobs).run(AfsPolicy(elasticity=elasticity))
    so = cfg.sim.scale_overhead_s
    # A: 400 / 2 = 200 s. B: 2 workers until the round at 240 s, then 4 after a scale-out
    # (4 GPUs in all: nothing to grow into beyond w_max).
    jct_b = 240.0 + so + (4000.0 - 2 * 240.0) / 4
    assert sorted(res.jcts) == pytest.approx(sorted([200.0, jct_b]))
    # SRTF (shortest job first at the requested size): A alone with 4, B after it.
    srtf = make_sim(cfg, jobs).run(FifoPolicy(backfill=True, order="sjf"))
    assert sorted(srtf.jcts) == pytest.approx([100.0, 120.0 + 1000.0])


@pytest.mark.parametrize("name", ["afs", "afs-all", "afs-bounded", "afs-loan"])
def test_afs_runs_tiny_to_completion_and_is_placeable(name: str):
    res = make_episode("tiny", 0).simulator().run(make_policy(name))
    assert res.jobs_completed == res.jobs_total
    assert res.invalid_decisions == 0
    assert res.unplaced_targets == 0


def test_variants_declare_their_elasticity():
    assert make_policy("afs").elasticity == "elastic"
    assert make_policy("afs-all").elasticity == "all"
    assert make_policy("afs-bounded").elasticity == "limited"
    loan = make_policy("afs-loan")
    assert loan.elasticity == "elastic" and loan.uses_loaning
    assert not make_policy("afs").uses_loaning
    with pytest.raises(ValueError, match="elasticity"):
        AfsPolicy(elasticity="unbounded")


# ----------------------------------------------------------------------------------------------
# Beyond w_max (World v2)
# ----------------------------------------------------------------------------------------------
def _first_decision(pol: AfsPolicy, cfg, jobs: list[JobSpec]):  # type: ignore[no-untyped-def]
    sim = make_sim(cfg, jobs)
    sim.begin(pol)
    sim.pre_decision(pol)
    return sim, pol.decide(sim.view)


def test_afs_grows_an_elastic_job_past_w_max_and_stops_at_the_ceiling():
    # one 8-GPU training server, the ceiling at 4 GPUs; a bert job of w_max 2 whose true
    # throughput still rises at 4 GPUs (one profile node: no cross-node all-reduce)
    cfg = small_config(train_servers=1, train_gpus=8, inf_servers=1, inf_gpus=8, ceiling_gpus=4)
    jobs = [job(0, work=36000.0, w=2, w_min=1, elastic=True, family="bert")]
    sim, d = _first_decision(AfsPolicy(elasticity="elastic"), cfg, jobs)
    assert sim.w_ceil[0] == 4
    assert d.targets == {0: 4}
    # the curve past w_max is sublinear but rising: each step paid off
    r = [sim.view.rate(0, w, TRAIN) for w in range(1, 5)]
    assert all(b > a for a, b in zip(r, r[1:]))
    assert r[3] < 2 * r[1]  # less than linear from w_max = 2
    # bounded: w_max; and the episode runs it at 6 workers
    _, d = _first_decision(AfsPolicy(elasticity="limited"), cfg, jobs)
    assert d.targets == {0: 2}
    sim = make_sim(cfg, jobs)
    most = []
    sim.run(AfsPolicy(elasticity="elastic"), on_round=lambda s: most.append(int(s.workers[0])))
    assert max(most) == 4


def test_afs_stops_a_job_at_its_throughput_peak_before_the_ceiling():
    # gnmt16 early in training: its goodput past w_max = 2 peaks at 3 workers (the PGNS is
    # small, so a bigger global batch buys little), with 8 GPUs free and the ceiling at 64
    cfg = small_config(train_servers=1, train_gpus=8, inf_servers=1, inf_gpus=8)
    jobs = [job(0, work=36000.0, w=2, w_min=1, elastic=True, family="gnmt16")]
    sim, d = _first_decision(AfsPolicy(elasticity="elastic"), cfg, jobs)
    r = [sim.view.rate(0, w, TRAIN) for w in range(0, 9)]
    peak = next(w for w in range(2, 8) if not r[w + 1] > r[w])
    assert peak < 8 and sim.w_ceil[0] == 64
    assert d.targets == {0: peak}
    # without the stop AFS-L would hand it the free GPUs anyway (nobody else gains)
    _, d = _first_decision(AfsPolicy(elasticity="elastic", stop_at_peak=False), cfg, jobs)
    assert d.targets == {0: 8}


def test_afs_all_resizes_an_inelastic_job_and_afs_does_not():
    cfg = small_config(train_servers=1, train_gpus=8, inf_servers=1, inf_gpus=8, ceiling_gpus=6)
    jobs = [job(0, work=36000.0, w=2, family="bert")]  # inelastic: w_min = w_max = 2
    _, d = _first_decision(AfsPolicy(elasticity="elastic"), cfg, jobs)
    assert d.targets == {0: 2}
    cfg4 = small_config(train_servers=1, train_gpus=8, inf_servers=1, inf_gpus=8, ceiling_gpus=4)
    _, d = _first_decision(AfsPolicy(elasticity="all"), cfg4, jobs)
    assert d.targets == {0: 4}  # up to the ceiling inside one profile node
    # running, it shrinks below its request for a newcomer (afs-all) or keeps it (afs)
    jobs = [job(0, work=36000.0, w=5, family="bert"),
            job(1, submit=30.0, work=600.0, w=8, family="bert")]
    for elasticity in ("all", "elastic"):
        sim = make_sim(cfg, jobs)
        pol = AfsPolicy(elasticity=elasticity)
        sim.begin(pol)
        sim.step(pol)
        assert int(sim.workers[0]) == (6 if elasticity == "all" else 5)
        sim.step(pol)  # job 1 arrived
        if elasticity == "all":
            assert 1 <= int(sim.workers[0]) < 5 and int(sim.workers[1]) >= 1
        else:
            assert int(sim.workers[0]) == 5 and int(sim.workers[1]) == 0
        res = make_sim(cfg, jobs).run(AfsPolicy(elasticity=elasticity), on_round=check)
        assert res.jobs_completed == 2


@pytest.mark.parametrize("name", ["afs", "afs-all", "afs-loan", "afs-bounded"])
def test_invariants_hold_every_round(name: str):
    for scen, seed in (("tiny", 1), ("testbed", 2)):
        res = make_episode(scen, seed).simulator().run(make_policy(name), on_round=check)
        assert res.jobs_completed == res.jobs_total
        assert res.invalid_decisions == 0 and res.unplaced_targets == 0


@pytest.mark.parametrize("name", ["afs", "afs-all"])
def test_deterministic(name: str):
    def run() -> dict:
        d = make_episode("testbed", 3).simulator().run(make_policy(name)).to_dict(series=True)
        for k in ("wall_s", "decision_ms_mean", "decision_ms_max"):
            d.pop(k, None)
        return d

    assert run() == run()


def test_unbounded_afs_runs_jobs_past_w_max_on_tiny():
    # free GPUs: some elastic jobs run past w_max (on the true curve), none under afs-bounded
    sim = make_episode("tiny", 0).simulator()
    res = sim.run(make_policy("afs"))
    assert res.jobs_completed == res.jobs_total
    assert sim.curve_jobs, "no job ever ran past w_max"
    sim = make_episode("tiny", 0).simulator()
    sim.run(make_policy("afs-bounded"))
    assert not sim.curve_jobs


# ----------------------------------------------------------------------------------------------
# The fast tournament against the reference loop
# ----------------------------------------------------------------------------------------------
def _compare(sim: Simulator, ref: AfsPolicy, fast: AfsPolicy, rounds: int) -> int:
    """Run ``ref`` on ``sim``; before each of its decisions, ``fast`` must decide the same."""
    ref.reset(0)
    sim.begin(ref)
    n = 0
    while not sim.done and n < rounds:
        if sim.open_round(ref):
            a = ref.decide(sim.view)
            b = fast.decide(sim.view)
            assert (a.targets, a.pools, a.order) == (b.targets, b.pools, b.order), sim.now
            sim.close_round(ref, a)
            n += 1
        else:
            sim.close_round(ref, None)
        if sim.check_stall(1.0):
            break
    return n


_FAMILIES = ["resnet50", "bert", "gnmt16", "cnn", "gan", "rl"]


@st.composite
def _instances(draw):  # type: ignore[no-untyped-def]
    n_train = draw(st.integers(1, 3))
    n_inf = draw(st.integers(0, 3))
    gpus = draw(st.sampled_from([4, 8]))
    cfg = small_config(
        train_servers=n_train, train_gpus=gpus, inf_servers=max(n_inf, 1), inf_gpus=gpus,
        ceiling_gpus=draw(st.sampled_from([4, 8, 16, 64])),
    )
    n = draw(st.integers(2, 40))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 5.0, 90.0, 600.0]))
        g = draw(st.sampled_from([1, 1, 2, 4]))
        g = min(g, gpus)
        w_min = draw(st.integers(1, 2))
        w_max = w_min * draw(st.sampled_from([1, 2, 4]))
        if g * w_min > gpus * n_train:
            w_min = w_max = 1
        elastic = w_max > w_min and draw(st.booleans())
        if not elastic:
            w_max = w_min
        work = draw(st.floats(60.0, 20000.0))
        jobs.append(JobSpec(
            id=i, submit=t, family=draw(st.sampled_from(_FAMILIES)), g=g, w_min=w_min,
            w_max=w_max, elastic=elastic, type_agnostic=draw(st.booleans()), work=work,
            pred_work=work * draw(st.sampled_from([1.0, 0.5, 2.0])), w_req=w_min,
        ))
    util = draw(st.sampled_from([0.0, 0.3, 0.7]))
    return cfg, jobs, util


@settings(max_examples=examples(25))
@given(
    inst=_instances(),
    elasticity=st.sampled_from(["limited", "elastic", "all"]),
    loan=st.booleans(),
    preempt=st.booleans(),
    short=st.sampled_from([0, 10**9]),
)
def test_fast_equals_reference_on_random_small_instances(inst, elasticity, loan, preempt, short):
    cfg, jobs, util = inst
    old = afs_mod._SHORT
    afs_mod._SHORT = short  # 0: every scan vectorised; huge: every scan in plain Python
    try:
        kw = dict(uses_loaning=loan, preempt=preempt, elasticity=elasticity)
        sim = Simulator(cfg, jobs, util_series(util), seed=0)
        _compare(sim, AfsPolicy(fast=False, **kw), AfsPolicy(fast=True, **kw), rounds=30)
    finally:
        afs_mod._SHORT = old


@pytest.mark.slow
@pytest.mark.parametrize("scen,seed,elasticity,loan,hours", [
    ("basic", 0, "elastic", False, 24.0),
    ("ideal", 0, "elastic", False, 12.0),
    ("basic", 1, "all", False, 12.0),
    ("ideal", 1, "elastic", True, 12.0),
    ("basic", 2, "limited", True, 24.0),
])
def test_fast_equals_reference_on_mid_size_episodes(scen, seed, elasticity, loan, hours):
    sim = make_episode(scen, seed).simulator()
    kw = dict(uses_loaning=loan, elasticity=elasticity)
    rounds = int(hours * 3600 / sim.interval)
    assert _compare(sim, AfsPolicy(fast=False, **kw), AfsPolicy(fast=True, **kw), rounds) > 50


# ----------------------------------------------------------------------------------------------
# afs-bounded is the World v1 afs
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loan,preempt", [(False, False), (True, False), (False, True)])
def test_bounded_equals_the_frozen_v1_afs_every_round(loan: bool, preempt: bool):
    for scen, seeds in (("tiny", range(4)), ("testbed", range(3))):
        for seed in seeds:
            sim = make_episode(scen, seed).simulator()
            old = FrozenAfsV1(uses_loaning=loan, preempt=preempt)
            new = AfsPolicy(uses_loaning=loan, preempt=preempt, elasticity="limited")
            sim.begin(old)
            n = 0
            while not sim.done:
                if sim.open_round(old):
                    a, b = old.decide(sim.view), new.decide(sim.view)
                    assert (a.targets, a.pools, a.order) == (b.targets, b.pools, b.order)
                    sim.close_round(old, a)
                    n += 1
                else:
                    sim.close_round(old, None)
            assert n > 10


@pytest.mark.slow
def test_bounded_equals_the_frozen_v1_afs_on_basic():
    for seed in (0, 1):
        a = make_episode("basic", seed).simulator().run(FrozenAfsV1()).to_dict(series=True)
        pol = make_policy("afs-bounded")
        pol.name = "afs-v1-frozen"
        b = make_episode("basic", seed).simulator().run(pol).to_dict(series=True)
        for d in (a, b):
            for k in ("wall_s", "decision_ms_mean", "decision_ms_max"):
                d.pop(k, None)
        assert a == b


def test_free_gpu_model_places_as_the_engine():
    # the fast tournament's trial placement against Scratch.grow, worker by worker
    from aryl_gym.agents.afs import _FreeGpus

    from aryl_gym.sim.placement import Scratch

    rng = np.random.default_rng(0)
    for n_srv in (3, 70):  # plain-list and numpy paths of the engine
        cfg = small_config(train_servers=n_srv, train_gpus=8, inf_servers=1, inf_gpus=8)
        jobs = [job(i, work=1000.0, w=64, w_min=1, elastic=True, w_req=1) for i in range(40)]
        sim = make_sim(cfg, jobs)
        pol = AfsPolicy()
        sim.begin(pol)
        sim.pre_decision(pol)
        trial = Scratch(sim.view, pol.placement)
        free = _FreeGpus(trial)
        for _ in range(200):
            j = int(rng.integers(40))
            k = int(rng.integers(1, 4))
            whole = int(trial.workers[j]) == 0  # a newcomer: all or nothing, as AFS asks
            assert trial.grow(j, TRAIN, k, whole=whole) == free.grow(TRAIN, 1, k, whole)
            assert free.free == trial.srv_free.tolist()
            for g in (1, 2, 4, 8):
                assert free.fits(TRAIN, g) == trial.fits(TRAIN, g)
