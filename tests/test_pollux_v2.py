"""Pollux as published (issue 32 item 5): 60 s rounds, upstream's replica range and mutation
rate, a goodput model fitted from what the policy observes, Aryl+TunedJobs on every job."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents.base import make_policy
from aryl_gym.agents.pollux import PolluxPolicy

from tests.helpers import job, make_sim, small_config


class _Counting(PolluxPolicy):
    """Pollux that records the clock of every decision it is asked for."""

    def reset(self, seed=None):
        super().reset(seed)
        self.calls: list[float] = []

    def decide(self, view):
        self.calls.append(view.now)
        return super().decide(view)


def test_pollux_decides_every_60s_round_even_when_the_scenario_round_is_300s():
    cfg = small_config(train_servers=2, train_gpus=4, inf_servers=0, interval=300.0)
    jobs = [job(0, work=3000.0, w=2, w_min=1, elastic=True), job(1, submit=400.0, work=900.0)]
    sim = make_sim(cfg, jobs)
    pol = _Counting(generations=5)
    pol.reset(sim.seed)
    assert pol.decision_interval_s == 60.0 and pol.event_driven is False
    sim.begin(pol)
    assert sim.interval == 60.0
    ends = []
    while not sim.done:
        info = sim.step(pol)
        ends.append(info.t_end - info.t_start)
    # every round is 60 s long (no fast-forward) and every round asked Pollux for a decision
    assert all(d == pytest.approx(60.0) for d in ends)
    assert pol.calls == [60.0 * k for k in range(len(ends))]
    for name in ("pollux", "pollux-250"):
        p = make_policy(name)
        assert p.decision_interval_s == 60.0 and not p.event_driven


def _range_case(policy: PolluxPolicy, ceiling: int = 256):
    """An inelastic cnn job (4 workers) and an elastic bert job (1 GPU workers, batch limit
    384 // 4 = 96 replicas) on 8 x 8 GPUs, with the parallelism ceiling raised to ``ceiling``."""
    cfg = small_config(train_servers=8, train_gpus=8, inf_servers=0, ceiling_gpus=ceiling)
    jobs = [job(0, work=1e5, w=4, w_min=4), job(1, work=1e5, w=4, w_min=1, elastic=True,
                                               family="bert")]
    sim = make_sim(cfg, jobs)
    policy.reset(sim.seed)
    sim.begin(policy)
    return sim


def _ranges(policy, sim):
    prob = policy.problem(sim.view)
    order = np.argsort(prob.jobs)
    return prob.lo[order].tolist(), prob.hi[order].tolist(), prob.inel_run[order].tolist()


def test_replica_range_is_upstreams_for_every_job():
    pol = PolluxPolicy(generations=2)
    sim = _range_case(pol)
    # never run: upstream's exploration cap max(2 x 0, 1) = 1 for both, inelastic or not
    assert _ranges(pol, sim)[:2] == ([1, 1], [1, 1])
    pol._max_seen = {0: 3, 1: 100}
    # 2 x 3 = 6; min(2 x 100, ceiling 256 // 1, batch limit 384 // 4 = 96) = 96
    assert _ranges(pol, sim)[:2] == ([1, 1], [6, 96])
    free = PolluxPolicy(generations=2, explore=False)
    sim = _range_case(free)
    # ceiling 256 GPUs: the batch limits bind (cnn -> cifar10: 4096 // 32 = 128; bert 96)
    assert _ranges(free, sim)[:2] == ([1, 1], [128, 96])
    # at the default ceiling (64 GPUs) the ceiling binds: 64 // g
    sim = _range_case(free, ceiling=64)
    assert _ranges(free, sim)[:2] == ([1, 1], [64, 64])


def test_pollux_elastic_keeps_inelastic_requests():
    pol = make_policy("pollux-elastic")
    assert pol.elasticity == "elastic"
    pol.explore = False
    sim = _range_case(pol)
    lo, hi, _ = _ranges(pol, sim)
    assert lo == [4, 1] and hi == [4, 96]  # inelastic: its request; elastic: up to the limits


def test_raise_probability_is_upstreams_rate_per_job():
    from aryl_gym.agents.pollux import raise_probability

    # about one raise per node with room: nodes / jobs per job, capped at 1, floor 1 / jobs
    assert raise_probability(100, 64) == pytest.approx(0.64)
    assert raise_probability(10, 64) == 1.0
    assert raise_probability(450, 0) == pytest.approx(1 / 450)
    assert raise_probability(0, 5) == 1.0


def test_raised_cells_follow_the_per_job_rate_statistically():
    from aryl_gym.agents.pollux import draw_block

    rng = np.random.default_rng(11)
    P, n, G, p = 20, 50, 200, 0.16  # 8 nodes with room, 50 jobs
    d = draw_block(rng, G, P, n, p)
    N = G * P * n
    k = d.inc_cells.size
    assert abs(k - N * p) < 5 * np.sqrt(N * p * (1 - p))
    per_child = np.bincount((d.inc_cells // n) % P, minlength=P) / G  # raises per child per gen
    assert per_child.mean() == pytest.approx(n * p, rel=0.02)  # = nodes with room (8)


def test_policy_counts_nodes_with_room():
    # 4 servers of 4 GPUs, one 4-worker job running on one server: 3 servers have room
    cfg = small_config(train_servers=4, train_gpus=4, inf_servers=0)
    jobs = [job(i, work=1e5, w=4, w_min=4) for i in range(6)]
    sim = make_sim(cfg, jobs)
    pol = PolluxPolicy(generations=1)
    pol.reset(sim.seed)
    sim.begin(pol)
    assert pol.problem(sim.view).p_inc == pytest.approx(4 / 6)  # empty cluster: 4 nodes
    pol._max_seen = {0: 4}
    sim.step(pol)  # Pollux places something; count what has room now
    room = int((sim.srv_free[:4] > 0).sum())
    assert pol.problem(sim.view).p_inc == pytest.approx(min(1.0, max(room, 1) / 6))
    assert PolluxPolicy(upstream_mutation=False).problem(sim.view).p_inc == pytest.approx(1 / 6)


# ------------------------------------------------------------------------------------------------
# What Pollux observes, and the model it fits
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("app", ["imagenet", "cifar10", "deepspeech2"])
def test_fit_recovers_known_parameters_from_noiseless_samples(app):
    from aryl_gym.agents.pollux_fit import fit_perf_params, predict_times

    from aryl_gym.sim.goodput import APP_CURVES

    c = APP_CURVES[app]
    true = np.array([c.alpha_c, c.beta_c, c.alpha_n, c.beta_n, c.alpha_r, c.beta_r, c.gamma])
    n = np.repeat([1.0, 2, 3, 4, 8, 16, 32], 2)
    u = np.tile([c.min_local, c.max_local], 7)
    comp, step = predict_times(true, n, u)
    net = np.array([c.step_time(a, b)[1] if a > 1 else 0.0 for a, b in zip(n, u)])
    got = fit_perf_params(n, u, comp, step, net)
    assert got == pytest.approx(true, rel=1e-3)


def test_fit_follows_upstreams_rules_for_what_samples_cannot_tell():
    from aryl_gym.agents.pollux_fit import fit_perf_params

    # one sample on one GPU: alpha_c is half the compute time, no network terms (optimistic)
    x = fit_perf_params([1], [32], [0.2], [0.2], [0.0])
    assert x[0] == pytest.approx(0.1) and x[0] + x[1] * 32 == pytest.approx(0.2)
    assert np.all(x[2:6] < 1e-7)
    # intra-node samples only: inter-node terms at least 1.1x the intra-node ones
    x = fit_perf_params([2, 4], [32, 32], [0.2, 0.2], [0.25, 0.3], [0.1, 0.14])
    assert x[4] == pytest.approx(0.1) and x[5] == pytest.approx(0.02)
    assert x[2] == pytest.approx(0.11) and x[3] == pytest.approx(0.022)


def _one_job_running(family="cnn", w=4, batch=None):
    from aryl_gym.sim.view import Decision
    from tests.helpers import ScriptedPolicy

    cfg = small_config(train_servers=4, train_gpus=4, inf_servers=0)
    sim = make_sim(cfg, [job(0, work=2e4, w=w, w_min=1, elastic=True, family=family)])

    def fn(view):
        return Decision(targets={0: w}, batch=batch) if view.now == 0 else Decision()

    pol = ScriptedPolicy(fn, uses_loaning=False)
    pol.reset(0)
    sim.begin(pol)
    return sim, pol


def test_measure_reports_the_true_rate_and_nothing_for_queued_jobs():
    sim, pol = _one_job_running(batch={0: 1.5})
    assert sim.view.measure(0) is None  # queued
    sim.step(pol)
    m = sim.view.measure(0)
    c = sim.job_curve(0)
    assert m.workers == 4 and m.batch == 1.5 and m.rate == pytest.approx(sim.rate[0])
    assert m.local_batch == pytest.approx(1.5 * c.u_ref) and m.pgns == pytest.approx(
        c.curve.phi(sim.progress(0)))
    # the reported step time reproduces the true rate: samples/s = kappa x rate
    kappa = c.curve.throughput(c.w_req * c.g, c.u_ref) / c.w_req
    B = m.gpus * m.local_batch
    t_opt = m.step_time + m.compute_time * m.accum_steps
    assert B / t_opt * m.efficiency == pytest.approx(kappa * m.rate)
    assert 0 < m.sync_time < m.step_time and m.compute_time < m.step_time
    before = sim.rate.copy()
    sim.view.measure(0)
    assert np.array_equal(before, sim.rate)  # read-only


def test_reported_pgns_grows_with_progress():
    sim, pol = _one_job_running(family="cnn", w=4)
    seen = []
    while not sim.done:
        sim.step(pol)
        m = sim.view.measure(0)
        if m is not None:
            seen.append((m.progress, m.pgns))
    p, phi = np.array(seen).T
    assert np.all(np.diff(phi) >= 0) and phi[-1] > 10 * phi[0]  # cifar10: 72 -> ~38,000


def test_pollux_fits_a_model_and_tunes_the_batch_within_limits():
    cfg = small_config(train_servers=4, train_gpus=4, inf_servers=0)
    sim = make_sim(cfg, [job(0, work=1e6, w=8, w_min=1, elastic=True, family="cnn"),
                         job(1, work=1e6, w=2, w_min=2, family="bert")])
    pol = PolluxPolicy(generations=20)
    pol.reset(sim.seed)
    sim.begin(pol)
    for _ in range(6):
        sim.step(pol)
    for j in (0, 1):  # inelastic or not, every job is modelled and tuned
        mod = pol._models[j]
        assert mod.params is not None and len(mod.samples) >= 1
        lo, hi = sim.job_curve(j).lam_range(int(sim.workers[j]))
        lam = sim.batch_lam.get(j, 1.0)
        assert lam == 1.0 or lo - 1e-9 <= lam <= hi + 1e-9
    assert sim.batch_lam  # something was tuned


@pytest.mark.slow
def test_pollux_same_seed_same_episode():
    from aryl_gym.scenario import make_episode

    a = make_episode("tiny", 1).simulator().run(make_policy("pollux"))
    b = make_episode("tiny", 1).simulator().run(make_policy("pollux"))
    assert a.jobs_completed == a.jobs_total
    assert a.jcts == b.jcts and a.scaling_events == b.scaling_events
