"""Pollux (Qiao et al., OSDI '21): goodput model, GA invariants, determinism, rate tables."""

from __future__ import annotations

import csv
import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from aryl_gym.agents import pollux as pollux_mod
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.pollux import (
    P_RESET,
    P_ZERO,
    GAProblem,
    PolluxPolicy,
    bernoulli_cells,
    block_sizes,
    draw_block,
)
from aryl_gym.agents.pollux_model import family_model, load_profile, packed_placement

from aryl_gym.config import ConfigError
from aryl_gym.sim.view import Decision
from aryl_gym.workload.paths import default_data_root
from tests.helpers import ScriptedPolicy, job, make_sim, small_config

ROOT = default_data_root()
PROFILES = ROOT / "traces/pollux-philly/traces" if ROOT else None
needs_traces = pytest.mark.skipif(
    PROFILES is None or not (PROFILES / "cifar10").exists(),
    reason="Pollux profiles not found (../shared/traces/pollux-philly/traces or $ARYL_GYM_DATA)",
)


@needs_traces
def test_goodput_model_matches_hand_numbers_from_cifar10_profile():
    prof = load_profile("cifar10")
    with open(PROFILES / "cifar10" / "placements.csv") as f:
        rows = list(csv.DictReader(f))
    step = {(r["placement"], int(r["local_bsz"])): float(r["step_time"]) for r in rows}
    sync = {(r["placement"], int(r["local_bsz"])): float(r["sync_time"]) for r in rows}
    # 4 replicas on one node at local batch 32: batch 128 = the initial batch, efficiency 1.
    assert prof.init_batch_size == 128
    assert prof.goodput(4, 128) == pytest.approx(128 / step[("4", 32)], rel=1e-9)
    # Batch 256 on 4 replicas: local 64, scale 2; grad stats = mean over the 100 epochs of
    # validation-128.csv; gain = (var + sqr) / (var / 2 + sqr); efficiency = gain / 2.
    with open(PROFILES / "cifar10" / "validation-128.csv") as f:
        val = list(csv.DictReader(f))[:100]
    sqr = np.mean([float(r["grad_sqr"]) for r in val])
    var = np.mean([float(r["grad_var"]) for r in val])
    eff = (var + sqr) / (var / 2 + sqr) / 2
    assert prof.goodput(4, 256) == pytest.approx(256 / step[("4", 64)] * eff, rel=1e-9)
    # Accumulation (Pollux simulator): 1 replica above the initial batch uses >= 1 extra
    # step that skips the all-reduce: batch 256 -> atomic 128, 1 accumulation step.
    assert prof.config_for(1, 256) == (128, 1)
    # local 128 lies between measured 91 and 129: linear interpolation of step and sync.
    st = np.interp(128, [91, 129], [step[("1", 91)], step[("1", 129)]])
    sy = np.interp(128, [91, 129], [sync[("1", 91)], sync[("1", 129)]])
    assert prof.throughput(1, 128, 1) == pytest.approx(256 / (st + (st - sy)), rel=1e-9)


@needs_traces
def test_app_table_is_at_least_one_and_uses_reference_batch():
    prof = load_profile("cifar10")
    t = prof.table(8, 2048)
    assert t[0] == 1.0 and np.all(t >= 1.0)
    assert t[4] == pytest.approx(prof.best_goodput(4)[0] / prof.goodput(4, 2048))


def test_missing_profile_is_a_clear_error(tmp_path):
    from aryl_gym.config import ConfigError

    with pytest.raises(ConfigError, match="Pollux profile for application 'nope'"):
        load_profile("nope", str(tmp_path))


def test_packed_placement_strings():
    assert packed_placement(1) == "1"
    assert packed_placement(6) == "24"
    assert packed_placement(10) == "244"


def test_family_table_never_slows_and_is_one_at_base():
    for fam in ("resnet50", "vgg16", "bert", "gnmt16", "cnn"):
        t = family_model(fam).table(16, 4)
        assert t[0] == 1.0 and t[4] == pytest.approx(1.0, abs=0.01)  # little to gain at base
        assert np.all(t >= 1.0)
    # Larger scale, larger gain from a smaller batch (statistical efficiency).
    t = family_model("resnet50").table(16, 4)
    assert t[16] > t[8] > 1.0


def _random_problem(rng: np.random.Generator, n: int) -> tuple[GAProblem, np.ndarray]:
    g = rng.choice([1, 2, 4], n)
    lo = rng.integers(1, 3, n)
    hi = lo + rng.integers(0, 4, n)
    cap = int(rng.integers(4, 24))
    S = np.concatenate([np.zeros((n, 1)), np.cumsum(rng.random((n, int(hi.max()))), 1)], 1)
    prob0 = GAProblem(list(range(n)), g, lo, hi, np.zeros(n, int), S, np.ones(n), cap, -1.0,
                      np.zeros(n, bool))
    base = prob0.repair(rng.integers(0, hi + 1, size=(1, n)))[0]
    factor = rng.random(n)
    return GAProblem(list(range(n)), g, lo, hi, base, S, factor, cap, -1.0, np.zeros(n, bool)), base


def test_ga_never_worse_than_start_and_respects_capacity():
    rng = np.random.default_rng(1)
    for _ in range(25):
        n = int(rng.integers(1, 12))
        prob, base = _random_problem(rng, n)
        pop = np.tile(base, (20, 1))
        best, fit = prob.search(pop, 15, rng)
        start = prob.objective(base[None, :])[0]
        assert fit[0] >= start - 1e-12
        assert prob.objective(best[:1])[0] == pytest.approx(fit[0])
        assert np.all((best * prob.g).sum(1) <= prob.cap)
        ok = (best == 0) | ((best >= prob.lo) & (best <= prob.hi))
        assert ok.all()


def test_power_mean_by_hand():
    S = np.array([[0.0, 1.0, 2.0], [0.0, 4.0, 4.0]])
    prob = GAProblem([0, 1], np.ones(2, int), np.ones(2, int), np.array([2, 2]),
                     np.array([1, 1]), S, np.array([0.5, 0.5]), 4, -1.0, np.zeros(2, bool))
    # [2, 1]: job 0 changed -> 2 * 0.5 = 1; job 1 unchanged -> 4. Mean_-1 = 2 / (1/1.001 + 1/4.001)
    want = 2 / (1 / 1.001 + 1 / 4.001)
    assert prob.objective(np.array([[2, 1]]))[0] == pytest.approx(want)


def test_pollux_deterministic_per_seed_and_finishes_tiny():
    from aryl_gym.scenario import make_episode

    a = make_episode("tiny", 3).simulator().run(PolluxPolicy(generations=20))
    b = make_episode("tiny", 3).simulator().run(PolluxPolicy(generations=20))
    assert a.jobs_completed == a.jobs_total
    assert a.jcts == b.jcts and a.scaling_events == b.scaling_events
    assert a.unplaced_targets == 0 and a.invalid_decisions == 0


def test_registered_variants():
    assert make_policy("pollux").generations == 100
    assert make_policy("pollux-250").generations == 250
    assert make_policy("pollux").pop_size == 100


def test_speedup_table_scales_progress_by_hand():
    # One job, 2 workers, 1200 units of work; the table says 1.5x at 2 workers.
    cfg = small_config(train_servers=1, train_gpus=4)
    jobs = [job(0, work=1200.0, w=2, w_min=1, elastic=True)]

    def fn(view):
        return Decision(targets={0: 2}, speedup={0: [1.0, 1.0, 1.5]}) if view.now == 0 else Decision()

    res = make_sim(cfg, jobs).run(ScriptedPolicy(fn, uses_loaning=False))
    assert res.jcts == [pytest.approx(1200.0 / (2 * 1.5))]


def test_bad_speedup_table_is_reported_not_applied():
    cfg = small_config(train_servers=1, train_gpus=4)
    sim = make_sim(cfg, [job(0, work=600.0)])
    pol = ScriptedPolicy(lambda v: Decision(targets={0: 1}, speedup={0: [1.0, float("nan")]}),
                         uses_loaning=False)
    sim.begin(pol)
    sim.pre_decision(pol)
    rep = sim.apply(pol.decide(sim.view))
    assert 0 in rep.invalid and sim.rate[0] == pytest.approx(1.0)


def test_scaling_counts_match_placement_reports():
    from aryl_gym.scenario import make_episode

    sim = make_episode("tiny", 0).simulator()
    pol = PolluxPolicy(generations=20)
    pol.reset(sim.seed)
    sim.begin(pol)
    outs = ins = 0
    while not sim.done:
        info = sim.step(pol)
        outs += len(info.report.scaled_out)
        ins += len(info.report.scaled_in)
    assert int(sim.scale_out_count.sum()) == outs  # no loaning: no reclaim scale-ins
    assert int(sim.scale_in_count.sum()) == ins


# ------------------------------------------------------------------------------------------------
# The vectorised GA gives exactly the straightforward formulation's result
# ------------------------------------------------------------------------------------------------
def _reference_search(prob: GAProblem, pop, generations, rng):
    """One generation at a time, every rule applied literally to whole (P, n) arrays with dense
    masks built from the same draws (the pre-table, pre-sparse implementation)."""
    lo, hi, base, g, cap, ir = prob.lo, prob.hi, prob.base, prob.g, prob.cap, prob.inel_run
    offs = np.arange(len(prob.jobs)) * prob.S.shape[1]

    def objective(x):
        s = np.take(prob.S.reshape(-1), x + offs)
        s = np.where(x != base, s * prob.factor, s)
        return x.shape[1] / np.add.reduce(1.0 / (s + 1e-3), axis=1)

    def repair(x):
        x = np.minimum(x, hi)
        x[x < lo] = 0
        x[:, ir] = np.where(x[:, ir] > 0, base[ir], 0)
        cum = np.cumsum(x * g, axis=1)
        if cum[:, -1].max() > cap:
            np.minimum(cum, cap, out=cum)
            cum[:, 1:] -= cum[:, :-1].copy()
            x = cum // g
            x[x < lo] = 0
            x[:, ir] = np.where(x[:, ir] == base[ir], x[:, ir], 0)
        return x

    P, n = pop.shape
    fit = objective(pop)
    span, cols, half = (hi + 1).astype(np.float64), np.arange(n), P // 2
    draws = []
    for G in block_sizes(generations, P, n):
        block = draw_block(rng, G, P, n, prob.p_inc)
        draws += [block.generation(t, P, n) for t in range(G)]
    for d in draws:
        a = d.tournament
        win = np.where(fit[a[:, 0]] >= fit[a[:, 1]], a[:, 0], a[:, 1])
        p1, p2 = pop[win[:half]], pop[win[half:]]
        mask = cols < d.points[:, None]
        kids = np.concatenate([np.where(mask, p1, p2), np.where(mask, p2, p1)])
        reset, zero = np.zeros(P * n, bool), np.zeros(P * n, bool)
        reset[d.reset_cells] = True
        zero[d.zero_cells] = True
        inc, u = np.zeros(P * n, bool), np.zeros(P * n)
        inc[d.inc_cells] = True
        u[d.inc_cells] = d.inc_u
        reset, zero, inc, u = (m.reshape(P, n) for m in (reset, zero, inc, u))
        kids = np.where(reset, base, kids)
        kids[zero] = 0
        kids[inc] = (kids + (u * (span - kids)).astype(np.int64))[inc]
        kids = repair(kids)
        allp, allf = np.concatenate([pop, kids]), np.concatenate([fit, objective(kids)])
        idx = np.argsort(-allf, kind="stable")[:P]
        pop, fit = allp[idx], allf[idx]
    return pop, fit


def _ref_case(seed: int, tight: bool = False):
    rs = np.random.default_rng(100 + seed)
    n = int(rs.integers(3, 25))
    g = rs.choice([1, 1, 2, 4], n) if seed % 2 == 0 else np.ones(n, int)
    hi = rs.integers(1, 9, n)
    lo = np.where(rs.random(n) < 0.3, hi, np.maximum(1, hi // 3))
    base = np.where(rs.random(n) < 0.5, rs.integers(0, 9, n), 0)
    base = np.where(base >= lo, np.minimum(base, hi), 0)
    ir = (lo == hi) & (base > 0)
    S = np.concatenate([np.zeros((n, 1)), np.cumsum(rs.random((n, hi.max())), axis=1)], axis=1)
    factor = rs.random(n)
    # tight: the starting allocation is over capacity (capacity shrank), repair must still run
    cap = max(1, int((base * g).sum()) // 2) if tight else int(rs.integers(8, 64))
    p_inc = (None, 0.3, 1.0)[seed % 3]  # 1 / n, upstream's rate in a roomy cluster, every job
    prob = GAProblem(list(range(n)), g, lo, hi, base, S, factor, cap, -1.0, ir, p_inc)
    start = prob.repair(rs.integers(0, 9, (40, n)))
    start[0] = base
    if tight:  # a starting row that repair step 1 would change (above its job's range)
        start[1] = np.minimum(base + 1, 8)
    return prob, start


try:
    import numba  # noqa: F401 (the fast extra: agents/pollux_kernel.py compiles the GA loop)

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the install
    HAVE_NUMBA = False
# the compiled kernels run only where numba is installed and ARYL_GYM_NO_NUMBA does not turn
# them off (agents/pollux_kernel.compiled)
_NUMBA_OFF = os.environ.get("ARYL_GYM_NO_NUMBA", "") not in ("", "0")
needs_numba = pytest.mark.skipif(
    not HAVE_NUMBA or _NUMBA_OFF,
    reason="numba not installed (pip install -e '.[fast]')" if not HAVE_NUMBA else "ARYL_GYM_NO_NUMBA is set",
)
BACKENDS = ["numpy", pytest.param("numba", marks=needs_numba)]


def _backend(monkeypatch, backend: str) -> None:
    """Run the GA's generations with numpy or with the compiled kernel."""
    from aryl_gym.agents.pollux_kernel import ENV_DISABLE

    monkeypatch.setenv(ENV_DISABLE, "1" if backend == "numpy" else "0")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("tight", [False, True])
def test_fast_ga_is_bit_identical_to_reference(seed, tight, backend, monkeypatch):
    _backend(monkeypatch, backend)
    prob, start = _ref_case(seed, tight)
    if seed % 4 == 1:  # several draw blocks per search (4 generations each, then the rest)
        monkeypatch.setattr(pollux_mod, "BLOCK_CELLS", 4 * start.size)
        assert block_sizes(17, *start.shape) == [4, 4, 4, 4, 1]
    r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
    got = prob.search(start.copy(), 17, r1)
    want = _reference_search(prob, start.copy(), 17, r2)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert r1.random() == r2.random()  # same draws consumed
    rep = prob.repair(start[2:])
    assert np.array_equal(prob.repair(rep), rep)  # repaired stays repaired


def _big_case(case: int):
    """A round of 5-300 jobs (past numpy's 128-item summation leaf), population 100."""
    rs = np.random.default_rng(700 + case)
    n, P = int(rs.integers(5, 300)), 100
    g = rs.choice([1, 2, 4, 8], n) if case % 2 else np.ones(n, np.int64)
    hi = rs.integers(1, 17, n)
    lo = np.where(rs.random(n) < 0.3, hi, np.maximum(1, hi // 3))
    base = np.where(rs.random(n) < 0.5, rs.integers(0, 17, n), 0)
    base = np.where(base >= lo, np.minimum(base, hi), 0)
    S = np.concatenate([np.zeros((n, 1)), np.cumsum(rs.random((n, hi.max())), axis=1)], axis=1)
    ir = (lo == hi) & (base > 0)
    prob = GAProblem(list(range(n)), g, lo, hi, base, S, rs.random(n), int(rs.integers(16, 2000)),
                     -1.0, ir, (None, 0.3, 1.0, 2.0)[case % 4])
    start = prob.repair(rs.integers(0, 17, (P, n)))
    start[0] = base
    if case % 3 == 0:  # a row that repair step 1 would change: the whole-repair path
        start[1] = np.minimum(base + 1, 16)
    return prob, start


@needs_numba
@pytest.mark.parametrize("case", range(8))
def test_compiled_ga_equals_numpy_search(case, monkeypatch):
    """The compiled generation loop gives the numpy search's population and fitness to the last
    bit, and consumes the same draws."""
    prob, start = _big_case(case)
    assert prob._kernel() is not None
    out = {}
    for backend in ("numpy", "numba"):
        _backend(monkeypatch, backend)
        rng = np.random.default_rng(case)
        out[backend] = (*prob.search(start.copy(), 30, rng), rng.random())
    (p1, f1, r1), (p2, f2, r2) = out["numpy"], out["numba"]
    assert np.array_equal(p1, p2) and np.array_equal(f1, f2) and r1 == r2


@needs_numba
def test_kernel_is_used_only_where_it_is_the_same_rule(monkeypatch):
    _backend(monkeypatch, "numba")
    prob, _ = _ref_case(0)
    assert prob._kernel() is not None
    other_p = GAProblem(prob.jobs, prob.g, prob.lo, prob.hi, prob.base, prob.S, prob.factor,
                        prob.cap, -2.0, prob.inel_run)
    assert other_p._kernel() is None  # numba's power and numpy's may differ in the last bit
    cnt = _CountingProblem(prob.jobs, prob.g, prob.lo, prob.hi, prob.base, prob.S, prob.factor,
                           prob.cap, prob.p, prob.inel_run)
    assert cnt._kernel() is None  # a subclass that changes the cut runs its own rule
    _backend(monkeypatch, "numpy")
    assert prob._kernel() is None


class _StubRng:
    """A generator whose exponentials are all 0 (every gap is one cell): ``bernoulli_cells``
    then needs many chunks to pass ``N``, the path a real stream almost never takes."""

    def standard_exponential(self, m: int) -> np.ndarray:
        return np.zeros(m)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_cells_is_the_same_with_either_backend(backend, monkeypatch):
    """The compiled gap pass (pollux_kernel.gap_positions) lists the numpy expression's cells,
    over one chunk and over many, and leaves the stream where numpy leaves it."""
    _backend(monkeypatch, "numpy")
    cases = [(N, p) for N in (1, 7, 128, 5_000, 300_001) for p in (1e-4, 0.01, 0.1, 0.5, 0.97)]
    want = []
    for k, (N, p) in enumerate(cases):
        rng = np.random.default_rng(k)
        want.append((bernoulli_cells(rng, N, p), rng.random()))
    _backend(monkeypatch, backend)
    for k, (N, p) in enumerate(cases):
        rng = np.random.default_rng(k)
        got = bernoulli_cells(rng, N, p)
        assert np.array_equal(got, want[k][0]) and rng.random() == want[k][1], (N, p)
        assert got.size == 0 or (got[0] >= 0 and got[-1] < N and np.all(np.diff(got) > 0))
    # many chunks (every gap one cell): every cell, in order
    assert bernoulli_cells(_StubRng(), 1_000, 0.01).tolist() == list(range(1_000))


def test_kernel_pairwise_sum_is_numpys_row_sum():
    """numpy sums a contiguous float64 row pairwise; the kernel's sum is the same bits (below 8
    items, up to the 128-item leaf, and split trees above it)."""
    from aryl_gym.agents.pollux_kernel import pairwise_sum

    rng = np.random.default_rng(3)
    x = np.array([0.1, 0.2, 0.3])
    assert pairwise_sum(x, 0, 3) == (0.1 + 0.2) + 0.3
    assert pairwise_sum(x, 1, 2) == 0.2 + 0.3 and pairwise_sum(x, 0, 0) == 0.0
    rows = 0
    for n in [*range(1, 300), 511, 1024, 2049, 5003]:
        a = 1.0 / (rng.random((2, n)) * 50 + 1e-3)
        want = a.sum(axis=1)
        rows += sum(pairwise_sum(a[r], 0, n) != want[r] for r in range(2))
        assert pairwise_sum(a.reshape(-1), n, n) == want[1]  # an offset into a longer array
    assert rows == 0
    # a naive left-to-right sum differs on some of these rows: the test can fail
    a = 1.0 / (rng.random((50, 200)) * 50 + 1e-3)
    naive = np.array([float(sum(r.tolist())) for r in a])
    assert (naive != a.sum(axis=1)).any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_pollux_episode_is_the_same_with_either_ga_loop(backend, monkeypatch):
    from aryl_gym.scenario import make_episode

    _backend(monkeypatch, "numpy")
    want = make_episode("tiny", 5).simulator().run(PolluxPolicy(generations=30))
    _backend(monkeypatch, backend)
    got = make_episode("tiny", 5).simulator().run(PolluxPolicy(generations=30))
    assert got.jcts == want.jcts and got.scaling_events == want.scaling_events


class _CountingProblem(GAProblem):
    """Counts the children the capacity step cut, to show the cases reach that path."""

    cut_rows = 0

    def _cut(self, x, tot=None):
        tot = (x * self.g).sum(axis=1)
        self.cut_rows += int((tot > self.cap).sum())
        return super()._cut(x, tot)


class _NoCutProblem(GAProblem):
    """A wrong capacity step: the row is left whole instead of cut (a planted bug)."""

    def _cut(self, x, tot=None):
        return x


def test_reference_cases_reach_the_capacity_cut():
    # valid starts (sparse repair) and invalid ones (full repair), unit and mixed GPUs/worker
    for seed, tight in ((0, False), (1, False), (2, True), (3, True)):
        prob, start = _ref_case(seed, tight)
        cnt = _CountingProblem(prob.jobs, prob.g, prob.lo, prob.hi, prob.base, prob.S,
                               prob.factor, prob.cap, prob.p, prob.inel_run)
        cnt.search(start.copy(), 17, np.random.default_rng(seed))
        assert cnt.cut_rows > 0


def test_reference_comparison_catches_a_wrong_rule():
    """The bit-identity check has teeth: a GA with one rule broken no longer matches."""
    for seed in range(4):
        prob, start = _ref_case(seed, tight=True)
        want = _reference_search(prob, start.copy(), 17, np.random.default_rng(seed))
        bad = _NoCutProblem(prob.jobs, prob.g, prob.lo, prob.hi, prob.base, prob.S,
                            prob.factor, prob.cap, prob.p, prob.inel_run)
        got = bad.search(start.copy(), 17, np.random.default_rng(seed))
        assert not (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]))


def test_dense_draw_block_is_the_same_draws():
    """``draw_block(dense=True)`` at ``p_inc >= 1`` leaves out the list of raised cells (every
    cell) and nothing else: the same uniforms, and the same stream consumed."""
    for p_inc in (1.0, 3.5):
        r1, r2 = np.random.default_rng(11), np.random.default_rng(11)
        a, b = draw_block(r1, 5, 6, 7, p_inc), draw_block(r2, 5, 6, 7, p_inc, dense=True)
        assert np.array_equal(a.inc_cells, np.arange(5 * 6 * 7)) and b.inc_cells.size == 0
        assert np.array_equal(a.inc_u, b.inc_u) and not b.inc_at.any()
        for f in ("tournament", "points", "reset_cells", "zero_cells", "reset_at", "zero_at"):
            assert np.array_equal(getattr(a, f), getattr(b, f))
        assert r1.random() == r2.random()
    # below 1 the flag changes nothing
    a = draw_block(np.random.default_rng(3), 5, 6, 7, 0.4)
    b = draw_block(np.random.default_rng(3), 5, 6, 7, 0.4, dense=True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_generation_draws_follow_the_mutation_law():
    """Sparse draws have the per-cell law of independent uniform trials: reset 0.1, zero 0.01,
    raise 1/n, independently of each other and of the cell's place; uniform raised values."""
    rng = np.random.default_rng(5)
    P, n, G = 40, 25, 400
    counts = {k: np.zeros(P * n) for k in ("reset", "zero", "inc")}
    both = 0.0
    us = []
    assert sum(block_sizes(G, P, n)) == G
    blocks = [draw_block(rng, k, P, n) for k in (G // 4, G // 4, G // 2)]
    for d in (b.generation(t, P, n) for b in blocks for t in range(len(b.tournament))):
        assert d.tournament.shape == (P, 2) and 0 <= d.tournament.min() <= d.tournament.max() < P
        assert d.points.shape == (P // 2,) and 0 <= d.points.min() <= d.points.max() < n
        for k, cells in (("reset", d.reset_cells), ("zero", d.zero_cells), ("inc", d.inc_cells)):
            assert cells.size == 0 or (cells.min() >= 0 and cells.max() < P * n)
            assert np.all(np.diff(cells) > 0)
            counts[k][cells] += 1
        both += np.intersect1d(d.reset_cells, d.inc_cells).size
        us.append(d.inc_u)
    N = P * n * G
    for k, p in (("reset", P_RESET), ("zero", P_ZERO), ("inc", 1 / n)):
        c = counts[k]
        assert abs(c.sum() - N * p) < 5 * np.sqrt(N * p * (1 - p))
        # every child and every job is hit at the same rate
        for per in (c.reshape(P, n).sum(1), c.reshape(P, n).sum(0)):
            m = c.sum() / per.size
            assert np.all(np.abs(per - m) < 6 * np.sqrt(m) + 3)
    assert abs(both - N * P_RESET / n) < 5 * np.sqrt(N * P_RESET / n)  # independent
    u = np.concatenate(us)
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / u.size)
    assert bernoulli_cells(rng, 10, 1.0).tolist() == list(range(10))
    assert bernoulli_cells(rng, 10, 0.0).size == 0 and bernoulli_cells(rng, 0, 0.5).size == 0
    # gaps: P(first success at cell k) = (1 - p)^k p
    first = np.array([bernoulli_cells(rng, 50, 0.2)[:1] for _ in range(4000)], dtype=object)
    k0 = np.array([f[0] if len(f) else 99 for f in first])
    for k in range(4):
        want = 0.8**k * 0.2 * 4000
        assert abs((k0 == k).sum() - want) < 5 * np.sqrt(want)


def test_exploration_cap_doubles_replicas_per_reallocation():
    """Upstream JobInfo.max_replicas = max(2 x most replicas profiled, 1): 1, 2, 4, 8 ..."""
    cfg = small_config(train_servers=4, train_gpus=4, inf_servers=0)
    # bert (large PGNS): the fitted model sees growth pay off
    sim = make_sim(cfg, [job(0, work=1e6, w=16, w_min=1, elastic=True, family="bert")])
    pol = PolluxPolicy(generations=30, tune=False)
    pol.reset(sim.seed)
    sim.begin(pol)
    seen = []
    while len(seen) < 5:
        sim.step(pol)
        seen.append(int(sim.workers[0]))
    assert seen[0] == 1
    assert all(b <= max(2 * a, 1) for a, b in itertools.pairwise(seen))
    assert seen[-1] > 4  # it does grow
    unc = PolluxPolicy(generations=30, tune=False, explore=False)
    sim2 = make_sim(cfg, [job(0, work=1e6, w=16, w_min=1, elastic=True)])
    unc.reset(sim2.seed)
    sim2.begin(unc)
    sim2.step(unc)
    assert int(sim2.workers[0]) > 2  # without the cap it may jump at once


def test_bench_rows_share_keys_and_sample_extrapolates():
    import math

    from aryl_gym.benchmarks.pollux import bench_pollux, bench_pollux_kernel, bench_pollux_sample
    from aryl_gym.scenario import make_episode

    full = bench_pollux(runs=(("tiny", "pollux"),), sample=False)
    row = bench_pollux_sample("tiny", "pollux", rounds=6)
    kernel = bench_pollux_kernel(n=30, generations=5)
    assert list(full[0]) == list(row) == list(kernel)  # one table
    assert kernel["active_jobs"] == 30 and kernel["cpu_ms_per_round"] > 0
    assert full[0]["rounds"] > 6 and full[0]["jobs"] == 30 and full[0]["cpu_s"] > 0
    assert row["rounds"] == 6 and row["run"] == "first 6 rounds"
    assert 0 < row["decision_rounds"] <= 3  # decisions counted in the second half only
    cfg = make_episode("tiny", 0).config
    total = math.ceil(cfg.workload.duration_hours * 3600 / cfg.sim.interval)
    assert row["episode_cpu_s_est"] == pytest.approx(row["cpu_ms_per_round"] * total / 1e3)


def _read_numeric_csv_by_hand(path: Path) -> dict[str, np.ndarray]:
    """The per-cell ``float()`` reader the profiles had before pyarrow: the reference."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        cols: list[list[float]] = [[] for _ in header]
        for row in reader:
            if row:
                for i, v in enumerate(row):
                    cols[i].append(float(v))
    return {h: np.asarray(c, dtype=np.float64) for h, c in zip(header, cols)}


@needs_traces
def test_profile_reader_equals_the_float_reader_on_every_shipped_profile():
    from aryl_gym.workload.traces_pollux import _read_numeric_csv

    files = sorted(PROFILES.glob("*/*.csv"))
    assert len(files) >= 6 * 3
    for f in files:
        got, want = _read_numeric_csv(f), _read_numeric_csv_by_hand(f)
        assert list(got) == list(want), f
        for k in want:  # bit for bit
            assert got[k].dtype == np.float64 and np.array_equal(got[k], want[k]), (f, k)


@pytest.mark.parametrize("text, match", [
    ("a,b\n1,2\n\n3,x\n", r"x.csv:4: column 'b': not a number: 'x'"),      # a blank line counted
    ("a,b\n1,2\n3\n4,y\n", r"x.csv:3: 1 fields, header has 2"),            # the first problem wins
    ("a,b\n1,z\n3,4,5\n", r"x.csv:2: column 'b': not a number: 'z'"),
    ("a,b\nq,r\n", r"x.csv:2: column 'a': not a number: 'q'"),               # left to right in a row
    ("a,b\n1,\n", r"x.csv:2: column 'b': not a number: ''"),
    ("", r"x.csv: empty profile file"),
    ("\n1,2\n", r"x.csv: empty profile file"),
    ("a,a\n1,2\n", r"x.csv:1: column 'a' appears twice in the header"),
])
def test_profile_reader_names_the_bad_cell(tmp_path: Path, text: str, match: str):
    from aryl_gym.workload.traces_pollux import _read_numeric_csv

    (tmp_path / "x.csv").write_text(text)
    with pytest.raises(ConfigError, match=match):
        _read_numeric_csv(tmp_path / "x.csv")


def test_profile_reader_reads_what_float_reads(tmp_path: Path):
    from aryl_gym.workload.traces_pollux import _read_numeric_csv

    (tmp_path / "x.csv").write_text("a,b\n1, 2.5 \n\n-3e2,.5\n+4,inf\n")
    got = _read_numeric_csv(tmp_path / "x.csv")
    assert got["a"].tolist() == [1.0, -300.0, 4.0] and got["b"].tolist() == [2.5, 0.5, float("inf")]
    assert _read_numeric_csv(tmp_path / "x.csv").keys() == {"a", "b"}
    with pytest.raises(ConfigError, match="Pollux profile file not found"):
        _read_numeric_csv(tmp_path / "nope.csv")
