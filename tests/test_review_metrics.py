"""Review of the heterogeneous-training, loaning and elastic episode figures (aryl_gym.metrics,
module docstring; docs/model.md "Heterogeneous training"): hand-computed tiny episodes, a
brute-force recomputation of ``hetero_jobs`` / ``hetero_gpu_hours`` from per-round snapshots,
and invariants.

The tiny cluster of every hand case: one 4-GPU V100 server (training) and two 4-GPU T4 servers
(inference), 60 s rounds, inference series sampled every 300 s; with utilisation 0 both T4
servers (8 GPUs) are on loan from t = 0. The job is a resnet50 (T4 speed 0.40 of a V100),
elastic, type-agnostic, hetero, 4..8 workers of 1 GPU, work 1536 V100-worker-seconds; no
first-start overhead, a scale overhead of 10 s, and the mixed rate of the default ``slowest``
model is ``w x min(1.0, 0.40) x 0.8``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aryl_gym.sim import invariants
from aryl_gym.sim.jobs import JobSpec, JobState
from aryl_gym.sim.view import INFER, TRAIN, Decision, PlacementOptions
from tests.helpers import ScriptedPolicy, make_sim, small_config

RUNNING = int(JobState.RUNNING)
H = 3600.0


def _hjob(i: int = 0, work: float = 1536.0, hetero: bool = True, w_min: int = 4, w_max: int = 8,
          submit: float = 0.0) -> JobSpec:
    return JobSpec(
        id=i, submit=submit, family="resnet50", g=1, w_min=w_min, w_max=w_max, elastic=True,
        type_agnostic=True, work=work, pred_work=work, hetero=hetero,
    )


def _cfg(**sim: object):
    return small_config(train_servers=1, train_gpus=4, inf_servers=2, inf_gpus=4, **sim)


def _hetero_policy(fn, event_driven: bool = True) -> ScriptedPolicy:
    pol = ScriptedPolicy(fn, event_driven=event_driven)
    pol.placement = PlacementOptions(True, True, hetero=True)
    return pol


def _start_mixed(v):
    # target 8 preferring V100: 4 base workers on the V100 server, 4 flexible on a loaned T4
    return Decision(targets={0: 8}, pools={0: TRAIN}) if v.queued() else Decision()


def _run(cfg, jobs, util, pol):
    sim = make_sim(cfg, jobs, util)
    res = sim.run(pol, on_round=invariants.InvariantChecker())
    return sim, res


def test_mixed_job_run_to_completion_every_usage_figure():
    sim, res = _run(_cfg(), [_hjob()], 0.0, _hetero_policy(_start_mixed))
    assert sim.ever_mixed[0] and sim.workers[0] == 0  # released at its finish
    # rate 8 x 0.40 x 0.8 = 2.56; 1536 / 2.56 = 600 s, on a round boundary (10 rounds)
    assert res.makespan == pytest.approx(600.0) and res.sim_seconds == pytest.approx(600.0)
    assert res.hetero_jobs == 1
    # 8 GPUs (4 V100 + 4 T4) held while mixed for 600 s
    assert res.hetero_gpu_hours == pytest.approx(8 * 600.0 / H)
    # both T4 servers on loan the whole episode: 8 GPUs x 600 s; the job used 4 of them
    assert res.loaned_gpu_hours_offered == pytest.approx(8 * 600.0 / H)
    assert res.loaned_gpu_hours == res.loaned_gpu_hours_offered
    assert res.loaned_gpu_hours_used == pytest.approx(4 * 600.0 / H)
    # the V100 server busy all the time; combined: (4 V100 + 4 T4 + 0 inference) / 12 GPUs
    assert res.train_util == pytest.approx(1.0) and res.train_util_makespan == pytest.approx(1.0)
    assert res.combined_usage == pytest.approx(8 / 12)
    assert res.combined_usage_hourly == pytest.approx([8 / 12])
    assert res.scaling_events == 0 and res.preemptions == 0 and res.reclaimed_servers == 0


@pytest.mark.parametrize("fast_forward", [True, False])
def test_reclaim_of_the_t4_part_ends_mixing(fast_forward):
    # inference utilisation 0 for the first sample (0..300 s), then 1: both T4 servers are
    # reclaimed at the round at 300 s; the job keeps its 4 V100 workers (>= w_min) and scales in
    util = [0.0] + [1.0] * 100
    sim, res = _run(_cfg(fast_forward=fast_forward), [_hjob()], util, _hetero_policy(_start_mixed))
    # 0..300 s mixed at 2.56: 768 done, 768 left; 10 s scale overhead, then 4 x 1.0 = 4/s:
    # 192 s -> finish at 300 + 10 + 192 = 502 s; the episode ends with its round, at 540 s
    assert sim.finish[0] == pytest.approx(502.0)
    assert res.sim_seconds == pytest.approx(540.0)
    assert res.hetero_jobs == 1 and not sim.mixed[0]
    # mixed only 0..300 s with 8 GPUs; the 202 s on V100 alone are not mixed
    assert res.hetero_gpu_hours == pytest.approx(8 * 300.0 / H)
    assert res.loaned_gpu_hours_offered == pytest.approx(8 * 300.0 / H)
    assert res.loaned_gpu_hours_used == pytest.approx(4 * 300.0 / H)
    assert res.scale_ins == 1 and res.scale_outs == 0 and res.scaling_events == 1
    assert res.preemptions == 0 and res.preemption_ratio == 0.0
    assert res.reclaimed_servers == 2
    # V100: 4 GPUs x 502 s over 4 GPUs x 540 s (arrival window = hour 0 = the whole episode)
    assert res.train_util == pytest.approx(4 * 502.0 / (4 * 540.0))
    assert res.train_util_makespan == pytest.approx(4 * 502.0 / (4 * 540.0))
    # combined: V100 4 x 502 + loaned T4 4 x 300 + inference 1.0 x 8 GPUs x (540 - 300) s,
    # over 12 GPUs x 540 s
    want = (4 * 502.0 + 4 * 300.0 + 8 * 240.0) / (12 * 540.0)
    assert res.combined_usage == pytest.approx(want)
    assert res.combined_usage_hourly == pytest.approx([want])
    # JCT = queuing (0) + running (502, the scale overhead included)
    assert res.avg_run_time == pytest.approx(502.0) and res.avg_jct == pytest.approx(502.0)


def test_scale_out_onto_t4_mid_run_counts_only_the_mixed_span():
    cfg = _cfg()
    sim = make_sim(cfg, [_hjob()], 0.0)

    def decide(v):
        if v.queued():
            return Decision(targets={0: 4}, pools={0: TRAIN})  # V100 only
        if sim.now == 120.0:
            return Decision(targets={0: 6})  # 2 more workers: only T4 room left
        return Decision()

    res = sim.run(_hetero_policy(decide, event_driven=False), on_round=invariants.InvariantChecker())
    # 0..120 s at 4/s: 480 done, 1056 left; then 10 s overhead and 6 x 0.40 x 0.8 = 1.92/s:
    # 550 s -> finish at 680 s (episode end: the round's end, 720 s)
    assert sim.finish[0] == pytest.approx(680.0)
    assert res.scale_outs == 1 and res.scale_ins == 0 and res.scaling_events == 1
    assert res.hetero_jobs == 1
    # 6 GPUs (4 V100 + 2 T4) held from 120 s to 680 s, the scale overhead included
    assert res.hetero_gpu_hours == pytest.approx(6 * 560.0 / H)
    assert res.loaned_gpu_hours_used == pytest.approx(2 * 560.0 / H)
    assert res.loaned_gpu_hours_offered == pytest.approx(8 * 720.0 / H)
    assert res.train_util_makespan == pytest.approx(4 * 680.0 / (4 * 720.0))
    assert res.avg_run_time == pytest.approx(680.0) and res.elastic_run_share == 1.0


def test_truncated_mixed_episode_is_censored_at_the_end():
    # a horizon of 0.1 h = 360 s cuts the job (it would finish at 600 s)
    sim, res = _run(_cfg(horizon_hours=0.1), [_hjob()], 0.0, _hetero_policy(_start_mixed))
    assert res.truncated and res.failed == 1 and res.jobs_unfinished == 1
    assert res.sim_seconds == pytest.approx(360.0)
    # mixed up to the end: 8 GPUs x 360 s; nothing after the end
    assert res.hetero_jobs == 1
    assert res.hetero_gpu_hours == pytest.approx(8 * 360.0 / H)
    assert res.loaned_gpu_hours_used == pytest.approx(4 * 360.0 / H)
    assert res.loaned_gpu_hours_offered == pytest.approx(8 * 360.0 / H)
    # the unfinished job's JCT censored at the end: 360 - 0
    assert res.avg_jct == pytest.approx(360.0) and math.isnan(res.avg_jct_finished)
    assert math.isnan(res.avg_run_time) and math.isnan(res.elastic_run_share)


def test_hetero_job_on_one_pool_and_plain_jobs_are_not_counted():
    # job 0 (hetero) all on T4: 8 workers on the two loaned servers, never on V100
    pol = _hetero_policy(
        lambda v: Decision(targets={0: 8}, pools={0: INFER}) if v.queued() else Decision())
    sim, res = _run(_cfg(), [_hjob()], 0.0, pol)
    # 8 x 0.40 = 3.2/s (no penalty): 1536 / 3.2 = 480 s
    assert sim.finish[0] == pytest.approx(480.0)
    assert res.hetero_jobs == 0 and res.hetero_gpu_hours == 0.0
    assert res.loaned_gpu_hours_used == pytest.approx(8 * 480.0 / H)
    assert res.train_util == 0.0
    # job 1 not marked hetero, same request on V100 first: it cannot mix (the 4 workers that do
    # not fit on V100 move the whole job to T4), so nothing is counted either
    sim, res = _run(_cfg(), [_hjob(hetero=False)], 0.0, _hetero_policy(_start_mixed))
    assert not sim.ever_mixed.any()
    assert res.hetero_jobs == 0 and res.hetero_gpu_hours == 0.0


def test_only_the_mixed_job_counts_next_to_a_plain_job():
    # job 0 mixed (4 V100 + 4 T4) as above; job 1 (not hetero) 4 workers on the other T4
    # server, 4 x 0.40 = 1.6/s, work 960 -> 600 s as well
    jobs = [_hjob(0), _hjob(1, work=960.0, hetero=False, w_min=4, w_max=4)]
    pol = _hetero_policy(lambda v: Decision(
        targets={j: 8 if j == 0 else 4 for j in v.queued()},
        pools={j: TRAIN if j == 0 else INFER for j in v.queued()}, order=[0, 1]))
    sim, res = _run(_cfg(), jobs, 0.0, pol)
    assert list(sim.finish) == pytest.approx([600.0, 600.0])
    assert list(sim.ever_mixed) == [True, False]
    assert res.hetero_jobs == 1
    # only job 0's 8 GPUs x 600 s; job 1's 4 T4 GPUs x 600 s are loaned use, not mixed
    assert res.hetero_gpu_hours == pytest.approx(8 * 600.0 / H)
    assert res.loaned_gpu_hours_used == pytest.approx(8 * 600.0 / H)
    assert res.combined_usage == pytest.approx(12 / 12)


def _random_trace(rng: np.random.Generator, n: int = 8) -> list[JobSpec]:
    subs = np.sort(rng.uniform(0.0, 3000.0, n))
    jobs = []
    for i in range(n):
        w_min = int(rng.integers(1, 4))
        jobs.append(JobSpec(
            id=i, submit=float(subs[i]), family="resnet50", g=1, w_min=w_min,
            w_max=int(rng.integers(w_min, 9)), elastic=True, type_agnostic=True,
            work=float(rng.uniform(500.0, 8000.0)), pred_work=1.0, hetero=bool(rng.random() < 0.7),
        ))
    return jobs


@pytest.mark.parametrize("rate", ["slowest", "sum"])
@pytest.mark.parametrize("seed", [0, 2, 3, 5])
@pytest.mark.parametrize("horizon", [None, 0.8])
def test_hetero_figures_match_brute_force_from_round_snapshots(rate, seed, horizon):
    """Random scripted episodes with mixing, loans, reclaims (utilisation 0 / 0.5 / 1 every
    300 s), scale-ins, scale-outs and preemptions; ``hetero_jobs`` and ``hetero_gpu_hours``
    recomputed from what every round ran (a job is mixed in a round when it runs with
    ``0 < T4 workers < workers``; it holds its GPUs until the round's end or its finish)."""
    rng = np.random.default_rng(seed)
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=3, inf_gpus=4,
                       hetero_rate=rate, horizon_hours=horizon)
    jobs = _random_trace(rng)
    sim = make_sim(cfg, jobs, list(rng.choice([0.0, 0.5, 1.0], size=400)))

    def decide(v):
        targets, pools = {}, {}
        for j in v.queued():
            targets[j] = int(sim.w_max[j])
            pools[j] = TRAIN if rng.random() < 0.7 else INFER
        for j in v.running():
            if rng.random() < 0.3:
                targets[j] = int(rng.integers(sim.w_min[j], sim.w_max[j] + 1))
        return Decision(targets=targets, pools=pools)

    snaps: list[tuple] = []
    begin = sim.begin

    def observed_begin(pol):
        begin(pol)
        sample = sim.acc.sample

        def record(s):
            snaps.append((float(s.now), np.array(s.state), np.array(s.workers),
                          np.array(s.inf_workers), np.array(s.g)))
            sample(s)

        sim.acc.sample = record

    sim.begin = observed_begin  # type: ignore[method-assign]
    res = sim.run(_hetero_policy(decide, event_driven=False), on_round=invariants.InvariantChecker())

    # the chosen seeds exercise what is audited: mixing and reclaims (so the test can fail)
    assert res.hetero_jobs > 0 and res.reclaimed_servers > 0
    end, fin = float(sim.now), np.array(sim.finish)
    mixed_gs = all_gs = 0.0
    ever = np.zeros(sim.n_jobs, dtype=bool)
    for i, (t0, st, w, iw, g) in enumerate(snaps):
        t1 = snaps[i + 1][0] if i + 1 < len(snaps) else end
        mixed = (st == RUNNING) & (iw > 0) & (iw < w)
        ever |= mixed
        for j in np.flatnonzero(st == RUNNING):
            held = max((t1 if math.isnan(fin[j]) else min(t1, fin[j])) - t0, 0.0) * w[j] * g[j]
            all_gs += held
            mixed_gs += held if mixed[j] else 0.0
    assert res.hetero_jobs == int(ever.sum())
    assert np.array_equal(sim.ever_mixed, ever)
    assert res.hetero_gpu_hours == pytest.approx(mixed_gs / H, rel=1e-9, abs=1e-12)
    # invariants: only jobs marked hetero mix; mixed GPU-hours within all GPU-hours used
    hetero = np.array([j.hetero for j in jobs])
    assert not (sim.ever_mixed & ~hetero).any()
    assert res.hetero_jobs <= int(hetero.sum())
    used_h = res.train_util_makespan * cfg.cluster.train_gpus * res.sim_seconds / H + res.loaned_gpu_hours_used
    assert used_h == pytest.approx(all_gs / H, rel=1e-9)
    assert res.hetero_gpu_hours <= used_h * (1 + 1e-12)
    assert (res.hetero_gpu_hours > 0) == (res.hetero_jobs > 0)
    # shares within [0, 1]; loaned use within the offer
    for name in ("train_util", "train_util_makespan", "combined_usage", "preemption_ratio",
                 "max_hourly_queued_share"):
        assert 0.0 <= getattr(res, name) <= 1.0 + 1e-12, name
    assert all(0.0 <= x <= 1.0 + 1e-12 for x in res.combined_usage_hourly)
    assert all(0.0 <= x <= 1.0 for x in res.queued_share_hourly)
    assert res.loaned_gpu_hours_used <= res.loaned_gpu_hours_offered * (1 + 1e-12)
    assert res.scaling_events == res.scale_outs + res.scale_ins
    submitted = np.array([j.submit <= end for j in jobs]) | ~np.isnan(fin)
    assert res.preemption_ratio == pytest.approx((sim.preempt_count[submitted] > 0).mean())
    if not res.truncated:
        # every job finished: avg JCT = queuing (total) + running
        assert res.avg_jct == pytest.approx(res.avg_queue_time_total + res.avg_run_time)
        assert 0.0 <= res.elastic_run_share <= 1.0
