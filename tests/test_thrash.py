"""The thrash rule (Simulator.check_thrash): a policy that restarts jobs faster than they pay
their relaunch overheads ends its episode, marked thrashing, instead of running forever."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest

from aryl_gym.config import load_scenario
from aryl_gym.sim.engine import THRASH_SHARE
from aryl_gym.sim.view import TRAIN, Decision
from tests.helpers import ScriptedPolicy, job, make_sim, play_thrasher, small_config


def _flip(view) -> Decision:
    """Preempt every running job; start every queued one (those preempted a round ago)."""
    targets = {j: 0 for j in view.running()}
    for j in view.queued():
        targets[j] = int(view.jobs[j].w_min)
    return Decision(targets=targets, pools={j: TRAIN for j in targets if targets[j]})


def _keep(view) -> Decision:
    """Start queued jobs; never preempt."""
    return Decision(targets={j: int(view.jobs[j].w_min) for j in view.queued()},
                    pools={j: TRAIN for j in view.queued()})


def _sim(horizon: float | None = None):
    cfg = small_config(default_relaunch_overhead_s=120.0, first_start_overhead_s=0.0,
                       horizon_hours=horizon)
    # two one-GPU jobs of 5 hours on 8 training GPUs: both always fit
    return make_sim(cfg, [job(0, work=5 * 3600.0), job(1, submit=60.0, work=5 * 3600.0)])


def test_thrashing_policy_ends_early_and_is_marked():
    sim = _sim()
    res = sim.run(ScriptedPolicy(_flip, uses_loaning=False), stall_hours=1.0)
    assert res.thrashing and sim.thrashing
    assert res.truncated and res.jobs_unfinished == 2
    # the rule looks back one hour (at most an eighth more): it fires soon after the first hour
    assert 1.0 <= sim.now / 3600.0 <= 1.0 + 1.0 / 8.0 + 2 * 60.0 / 3600.0
    assert sim.overhead_gs > THRASH_SHARE * sim.alloc_gs


def test_rule_off_runs_to_the_horizon():
    sim = _sim(horizon=3.0)
    res = sim.run(ScriptedPolicy(_flip, uses_loaning=False), stall_hours=math.inf)
    assert not res.thrashing
    assert sim.now == pytest.approx(3 * 3600.0)


def test_sane_policy_is_untouched():
    sim = _sim()
    res = sim.run(ScriptedPolicy(_keep, uses_loaning=False), stall_hours=1.0)
    assert not res.thrashing and not res.truncated and res.jobs_unfinished == 0
    assert sim.overhead_gs == 0.0  # no first-start overhead, never preempted


@pytest.mark.slow
def test_allocated_gpu_time_matches_the_accounting():
    """alloc_gs is every allocated GPU-second (the accounting's busy training and loaned GPU
    time), overhead_gs at most that."""
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    cfg = load_scenario("testbed").replace(workload={"load": 1.2})
    for name in ("aryl-preempt", "pollux"):
        sim = make_episode(cfg, 3).simulator()
        res = sim.run(make_policy(name))
        assert not res.thrashing
        busy = sim.acc.train_busy_gs + sim.acc.loan_used_gs
        assert sim.alloc_gs == pytest.approx(busy, rel=1e-9)
        assert 0.0 < sim.overhead_gs < 0.05 * sim.alloc_gs


def test_window_by_hand():
    """40% waste never fires; after a switch to 100% waste the share over the last two hours
    (plus at most a quarter hour) passes one half after 20-23 minutes."""
    sim = _sim()
    t = 0.0
    fired_at = None
    while t < 14 * 3600.0:
        t += 60.0
        sim.now = t
        sim.acc.train_busy_gs += 100.0 * 60.0  # allocated GPU time (alloc_gs reads the accounting)
        sim.overhead_gs += (40.0 if t <= 10 * 3600.0 else 100.0) * 60.0
        if sim.check_thrash(2.0):
            fired_at = t
            break
    assert fired_at is not None
    minutes = (fired_at - 10 * 3600.0) / 60.0
    # window L in [120, 135] minutes, x minutes at full waste: x + 0.4 (L - x) > 0.5 L <=> x > L / 6
    assert 20.0 < minutes <= 23.0
    assert sim.check_thrash(2.0)  # stays set


def test_env_truncates_a_thrashing_agent():
    """Through the env: an agent that preempts every running job at every decision point and
    regrants it at the next is truncated by the rule, with the flag in the episode result."""
    env = gym.make("aryl_gym/Aryl-v1", scenario=load_scenario("testbed").replace(
        workload={"load": 1.0}), action_mode="sequential", allow_preempt=True, window=32,
        stall_hours=1.0)
    env.reset(seed=5, options={"episode_seed": 5})
    info, trunc = play_thrasher(env, 200_000)
    res = info["episode_result"]
    assert trunc and res.thrashing and res.jobs_unfinished > 0


def test_avg_jct_counts_unfinished_jobs_censored_at_the_end():
    """avg_jct (and the median, p95 and slowdown) count every submitted job, an unfinished one up
    to the episode's end (by hand: jobs submitted at 0 and 60 s, neither finishes, the episode
    ends at now); avg_jct_finished covers the finished jobs only; failed marks the episode; all
    equal the plain figures when every job finished."""
    from aryl_gym.metrics import lower_bounds

    sim = _sim()
    res = sim.run(ScriptedPolicy(_flip, uses_loaning=False), stall_hours=1.0)
    assert res.jobs_completed == 0 and math.isnan(res.avg_jct_finished) and res.failed == 1
    want = [sim.now - 0.0, sim.now - 60.0]
    assert res.avg_jct == pytest.approx(sum(want) / 2)
    assert res.median_jct == pytest.approx(sum(want) / 2)
    assert res.p95_jct == pytest.approx(want[0] - 0.05 * 60.0)  # numpy's linear interpolation
    # a 3-hour horizon: the 1-hour job finishes, the 5-hour one is cut at 3 h
    cfg = small_config(first_start_overhead_s=0.0, horizon_hours=3.0)
    sim = make_sim(cfg, [job(0, work=3600.0), job(1, submit=60.0, work=5 * 3600.0)])
    res = sim.run(ScriptedPolicy(_keep, uses_loaning=False), stall_hours=math.inf)
    assert res.jobs_completed == 1 and res.truncated and res.failed == 1
    assert res.avg_jct_finished == pytest.approx(3600.0)
    assert res.avg_jct == pytest.approx((3600.0 + (3 * 3600.0 - 60.0)) / 2)
    lb = lower_bounds(sim)
    assert res.mean_slowdown == pytest.approx((3600.0 / lb[0] + (3 * 3600.0 - 60.0) / lb[1]) / 2)
    sim = _sim()
    res = sim.run(ScriptedPolicy(_keep, uses_loaning=False), stall_hours=1.0)
    assert res.jobs_unfinished == 0 and res.failed == 0 and res.avg_jct_finished == res.avg_jct


def test_evaluate_warns_about_unfinished_episodes(monkeypatch, capsys):
    """aryl-gym evaluate never reports an unfinished episode's avg JCT silently: a warning names
    the seeds and why they ended, and the table counts them."""
    import dataclasses

    import aryl_gym.train.evaluation as ev
    from aryl_gym.cli import main as cli_main

    real = ev.run_reference

    def fake(name, scen, seed, data_root=None):
        res = real(name, scen, seed, data_root)
        if name == "sjf" and seed == 1:  # as if the thrash rule had ended it
            res = dataclasses.replace(res, jobs_unfinished=3, thrashing=True, truncated=True)
        return res

    monkeypatch.setattr(ev, "run_reference", fake)
    assert cli_main(["evaluate", "--agent", "sjf", "--scenario", "tiny", "--seeds", "0-1",
                     "--against", "fifo", "--table", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING sjf left jobs unfinished on 1 of 2 seed(s): 1 (thrashing, 3 jobs)" in err
    assert "fifo left" not in err
    assert "failed eps" in out and "1/2" in out and "0/2" in out



def _burst_after_quiet(sustained: bool) -> bool:
    """Two idle hours, then one 1-GPU job: 1 min running, 250 s of relaunch overhead (one
    restart), running again; whether the rule (2-hour window) fires within 4 hours."""
    sim = _sim()
    for minute in range(1, 4 * 60):
        t = minute * 60.0
        if t <= 2 * 3600.0:
            a, w = 0.0, 0.0
        elif t <= 2 * 3600.0 + 60.0:
            a, w = 1.0, 0.0
        elif t <= 2 * 3600.0 + 60.0 + 250.0:
            a, w = 1.0, 1.0
        else:
            a, w = 1.0, 0.0
        sim.now = t
        sim.acc.train_busy_gs += a * 60.0
        sim.overhead_gs += w * 60.0
        if sim.check_thrash(2.0, sustained=sustained):
            return True
    return False


def test_sustained_spares_a_burst_after_a_quiet_stretch():
    """The share alone reads one restart after two idle hours (250 of about 310 GPU-s) as
    thrashing; the sustained rule asks both halves of the window, and the first is empty."""
    assert _burst_after_quiet(False) and not _burst_after_quiet(True)


def test_sustained_still_ends_a_policy_that_never_pays_its_overheads():
    """Every allocated GPU-second is overhead from the start: both halves pass, and the rule
    fires as soon as the window is full (two hours after the first mark, at 1 min), as without
    the option."""
    for sustained in (False, True):
        sim = _sim()
        fired_at = None
        for minute in range(1, 6 * 60):
            sim.now = minute * 60.0
            sim.acc.train_busy_gs += 60.0
            sim.overhead_gs += 60.0
            if sim.check_thrash(2.0, sustained=sustained):
                fired_at = sim.now
                break
        assert fired_at == 2 * 3600.0 + 60.0


def test_sustained_fires_later_on_a_switch_to_full_waste():
    """test_window_by_hand's switch from 40% to 100% waste at 10 h: the share alone fires after
    20-23 minutes; the sustained rule waits until the older part of the window passes one half
    too. With x minutes of full waste, the newer part H2 and the older part H1 (each 60 to 75
    minutes: marks every quarter hour), the older part holds x - H2 of them, and passes once
    x - H2 > H1 / 6: between 70 and 90 minutes."""
    def fire_minute(sustained: bool) -> float:
        sim = _sim()
        t = 0.0
        while t < 14 * 3600.0:
            t += 60.0
            sim.now = t
            sim.acc.train_busy_gs += 100.0 * 60.0
            sim.overhead_gs += (40.0 if t <= 10 * 3600.0 else 100.0) * 60.0
            if sim.check_thrash(2.0, sustained=sustained):
                return (t - 10 * 3600.0) / 60.0
        raise AssertionError("never fired")

    assert 20.0 < fire_minute(False) <= 23.0
    assert 70.0 < fire_minute(True) <= 90.0


@pytest.mark.parametrize("bad", ["yes", 2, None])
def test_thrash_sustained_option_is_checked(bad):
    with pytest.raises(ValueError, match="thrash_sustained"):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", thrash_sustained=bad)


def test_thrash_sustained_through_the_env():
    """The thrashing agent of test_env_truncates_a_thrashing_agent thrashes for good: with the
    option it is still ended by the rule, no earlier than without it."""
    kw = dict(scenario=load_scenario("testbed").replace(workload={"load": 1.0}),
              action_mode="sequential", allow_preempt=True, window=32, stall_hours=1.0)
    ends = []
    for sustained in (False, True):
        env = gym.make("aryl_gym/Aryl-v2", thrash_sustained=sustained, **kw)
        assert env.unwrapped.thrash_sustained is sustained
        env.reset(seed=5, options={"episode_seed": 5})
        info, trunc = play_thrasher(env, 200_000)
        assert trunc and info["episode_result"].thrashing
        ends.append(env.unwrapped.sim.now)
    assert ends[1] >= ends[0]
