"""``early_end="charge"``: an episode ended by the stall or thrash rule pays for its unfinished jobs.

Without it the ``jct`` reward stops at the rule's end, so a policy that stalls or thrashes early
pays only for the job time accrued so far: a learner from scratch finds that exit within
100k steps (experiments/10-evolution-strategies/README.md). With it a fallback reference policy finishes the
episode on a copy of the simulator and the last step's ``jct`` component pays for that rest.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import ArylEnv, accrued_job_time
from aryl_gym.rollout import env_action_masks

from .helpers import job, make_sim, small_config


def _stalling_episode(early_end: str, **kw):
    """One job of 600 s of work on a small cluster; the agent only ever commits (starts nothing)."""
    env = ArylEnv(scenario=small_config(), jobs=[job(0, 0.0, work=600.0)], action_mode="sequential",
                  stall_hours=0.5, reward_scale=1.0, early_end=early_end, **kw)
    env.reset(seed=0)
    rewards = []
    while True:
        _, r, te, tr, info = env.step(env.codec.commit)
        rewards.append(r)
        if te or tr:
            return env, rewards, te, tr, info


@pytest.mark.parametrize("fallback", ["fifo", "aryl"])
def test_stall_is_charged_the_fallbacks_completion_by_hand(fallback):
    """Reward scale 1 s: the return is minus the job's whole time in the system. The stall rule
    ends the episode at T; the fallback (FIFO by default), taking over, starts the job in that
    round, so it finishes J0 later, J0 being its JCT when the fallback runs the trace from the
    start (started on arrival)."""
    kw = {} if fallback == "fifo" else {"end_fallback": fallback}
    env, rewards, te, tr, info = _stalling_episode("charge", **kw)
    t_end = env.sim.now
    native = make_sim(small_config(), [job(0, 0.0, work=600.0)])
    res = native.run(make_policy(fallback))
    j0 = res.jcts[0]
    assert te and not tr
    ch = info["end_charge"]
    assert ch["rule"] == "stall" and ch["fallback"] == fallback and ch["fallback_finished"]
    assert ch["job_seconds"] == pytest.approx(j0, abs=1e-6)  # accrued after T: the job's J0
    assert sum(rewards) == pytest.approx(-(t_end + j0), abs=1e-6)
    assert info["reward_components"]["jct"] == pytest.approx(rewards[-1])
    # the episode's result is still the agent's: stalled, the job unfinished
    assert info["episode_result"].stalled and info["episode_result"].jobs_unfinished == 1
    assert np.isnan(env.sim.finish[0])


def test_truncate_is_the_default_and_pays_only_the_time_so_far():
    env, rewards, te, tr, info = _stalling_episode("truncate")
    assert tr and not te and "end_charge" not in info
    assert sum(rewards) == pytest.approx(-env.sim.now, abs=1e-6)
    assert ArylEnv(scenario="tiny").early_end == "truncate"


def _random_episode(early_end: str, seed: int = 5, **kw):
    env = gym.make("aryl_gym/Aryl-v1", scenario="testbed", action_mode="sequential", allow_preempt=True,
                   window=32, observation="v1", stall_hours=2, reward_scale=36000.0, early_end=early_end, **kw)
    env.reset(seed=seed, options={"episode_seed": seed})
    rng = np.random.default_rng(0)
    rewards = []
    while True:
        a = int(rng.choice(np.flatnonzero(env_action_masks(env))))
        _, r, te, tr, info = env.step(a)
        rewards.append(r)
        if te or tr:
            return env.unwrapped, rewards, te, tr, info


def test_thrash_charge_closes_the_account_and_only_the_last_step_changes():
    """Random actions on testbed end by the thrash rule. The charged episode is the truncated
    one step for step except the last reward, and its return is minus (the job time accrued by
    the end + what the fallback accrues after it) / scale."""
    u, rc, te, tr, info = _random_episode("charge")
    u2, rt, te2, tr2, info2 = _random_episode("truncate")
    assert te and not tr and tr2 and not te2
    assert info["episode_result"].thrashing and info2["episode_result"].thrashing
    assert rc[:-1] == rt[:-1]
    ch = info["end_charge"]
    assert ch["rule"] == "thrash" and ch["fallback_finished"] and ch["job_seconds"] > 0
    assert rc[-1] == pytest.approx(rt[-1] - ch["job_seconds"] / 36000.0, rel=1e-12, abs=1e-9)
    a_end = accrued_job_time(u.sim, u.sim.now)
    assert sum(rc) == pytest.approx(-(a_end + ch["job_seconds"]) / 36000.0, rel=1e-9)
    # the fallback's copy finished every job, jobs still to arrive included: its accrued time
    # after the end is at least the remaining lower bound of every unfinished job
    assert ch["end_time"] > u.sim.now
    assert info["episode_result"].to_dict() == info2["episode_result"].to_dict()


def test_charge_is_deterministic_and_follows_the_fallback():
    _, r1, *_ , i1 = _random_episode("charge")
    _, r2, *_ , i2 = _random_episode("charge")
    assert r1 == r2 and i1["end_charge"] == i2["end_charge"]
    assert i1["end_charge"]["fallback"] == "fifo"  # the default
    _, r3, *_ , i3 = _random_episode("charge", end_fallback="aryl")
    assert i3["end_charge"]["fallback"] == "aryl"
    assert i3["end_charge"]["job_seconds"] != i1["end_charge"]["job_seconds"]


def test_max_steps_and_horizon_are_not_charged():
    env = ArylEnv(scenario="testbed", action_mode="sequential", max_steps=20, early_end="charge")
    env.reset(seed=0)
    for _ in range(20):
        _, _, te, tr, info = env.step(env.codec.commit)
        if te or tr:
            break
    assert tr and not te and "end_charge" not in info


def test_trace_mean_reward_credits_the_pool_on_a_charged_end():
    """With the charge, a stalling agent's trace-mean return is (the pool's total JCT - the
    completed schedule's) / scale: the end counts as terminal, so the baseline's rest is
    credited, and the unfinished run does not join the pool."""
    from aryl_gym.train import paired

    paired._POOLS.clear()
    inner = ArylEnv(scenario=small_config(), jobs=[job(0, 0.0, work=600.0)], action_mode="sequential",
                    stall_hours=0.5, early_end="charge")
    env = paired.TraceMeanJCTReward(inner, "aryl")
    env.reset(seed=0, options={"episode_seed": 3})
    total = 0.0
    while True:
        _, r, te, tr, info = env.step(inner.codec.commit)
        total += r
        if te or tr:
            break
    assert te
    j_aryl = make_sim(small_config(), [job(0, 0.0, work=600.0)]).run(make_policy("aryl")).jcts[0]
    completed = inner.sim.now + info["end_charge"]["job_seconds"]
    assert total == pytest.approx((j_aryl - completed) / 3600.0, abs=1e-9)
    (_, runs), = paired._POOLS.values()
    assert len(runs) == 1  # only the reference's run
    paired._POOLS.clear()


@pytest.mark.parametrize("kw, text", [
    ({"early_end": "stop"}, "early_end must be one of truncate, charge"),
    ({"early_end": None}, "early_end must be one of"),
    ({"early_end": "charge", "end_fallback": "random"}, "end_fallback must be a reference policy"),
    ({"early_end": "charge", "end_fallback": "ppo-v1"}, "end_fallback 'ppo-v1'"),
    ({"early_end": "charge", "end_fallback": 3}, "end_fallback must be a reference policy"),
    ({"early_end": "charge", "end_fallback": "no-such-policy"}, "end_fallback 'no-such-policy'"),
])
def test_bad_early_end_options(kw, text):
    with pytest.raises(ValueError, match=text):
        ArylEnv(scenario="tiny", **kw)


@pytest.mark.slow
def test_the_from_scratch_config_trains_with_charged_ends(tmp_path):
    """``maskable_ppo_scratch``: its envs charge early ends and carry the flap damping shield,
    engaged from the start (training and evaluation alike), and a short run on ``tiny`` trains
    and saves."""
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.envs import make_single_env
    from aryl_gym.train.runner import train

    cfg = load_train_config("maskable_ppo_scratch", "testbed")
    assert cfg.env_kwargs["early_end"] == "charge" and cfg.env_kwargs["allow_preempt"]
    assert cfg.env_kwargs["flap_damping"] == {"engage_share": 0.0}
    assert cfg.bc.policy is None and cfg.teacher.policy is None and cfg.dagger.rounds == 0
    for evaluation in (False, True):
        env = make_single_env(cfg, evaluation=evaluation).unwrapped
        assert env.early_end == "charge" and env.flap_damping.engage_share == 0.0
    tiny = load_train_config("maskable_ppo_scratch", "tiny", {"total_timesteps": 1024, "eval": {"freq": 0},
                                                            "checkpoint_freq": 0})
    res = train(tiny, out=tmp_path / "runs", verbose=0)
    assert (res.run_dir / "model.zip").exists()


def _commit_when_allowed(env: ArylEnv):
    """The stalling agent of _stalling_episode, made to obey the mask: it commits whenever the
    mask allows it, else takes the first allowed action."""
    steps = 0
    while True:
        m = env.action_masks()
        a = env.codec.commit if m[env.codec.commit] else int(np.flatnonzero(m)[0])
        _, _, te, tr, info = env.step(a)
        steps += 1
        if te or tr:
            return info, te, tr, steps
        assert steps < 10_000


def test_stall_guard_makes_the_stalling_agent_start_the_job():
    """By hand: one job of 600 s on an empty small cluster, nothing else to arrive. Without the
    guard the commit-only agent stalls (the rule ends it, the job unfinished); with it, the
    first mask refuses the commit and allows only the job's grant, and the job runs from 0 to
    600 s."""
    kw = dict(scenario=small_config(), jobs=[job(0, 0.0, work=600.0)], action_mode="sequential",
              stall_hours=0.5)
    env = ArylEnv(**kw)
    env.reset(seed=0)
    info, *_ = _commit_when_allowed(env)
    assert info["episode_result"].stalled and info["episode_result"].jobs_unfinished == 1
    env = ArylEnv(stall_guard=True, **kw)
    env.reset(seed=0)
    m = env.action_masks()
    assert not m[env.codec.commit] and list(np.flatnonzero(m)) == [0]
    info, te, tr, _ = _commit_when_allowed(env)
    res = info["episode_result"]
    assert te and not tr and not res.stalled and res.jobs_unfinished == 0
    assert env.sim.finish[0] == pytest.approx(600.0)


def test_stall_guard_acts_only_in_the_stall_condition():
    """A job still to arrive (the second, at 1 h) or one already running lifts the guard: the
    agent may wait. Once the first job runs, the commit is allowed again."""
    kw = dict(scenario=small_config(), action_mode="sequential", stall_hours=6.0, stall_guard=True)
    env = ArylEnv(jobs=[job(0, 0.0, work=600.0), job(1, 3600.0, work=600.0)], **kw)
    env.reset(seed=0)
    assert env.action_masks()[env.codec.commit]  # job 1 is still to arrive
    env = ArylEnv(jobs=[job(0, 0.0, work=7200.0), job(1, 0.0, work=600.0, g=4)], **kw)
    env.reset(seed=0)
    assert not env.action_masks()[env.codec.commit]
    env.step(0)  # a tentative grant of the first window job
    assert env.action_masks()[env.codec.commit]


@pytest.mark.parametrize("kw, text", [
    ({"stall_guard": "yes"}, "stall_guard must be True or False"),
    ({"stall_guard": True, "action_mode": "targets"}, "stall_guard acts on the sequential"),
    ({"preempt_guard": 1.5}, "preempt_guard must be True or False"),
    ({"preempt_guard": True, "action_mode": "priority"}, "preempt_guard acts on the sequential"),
])
def test_bad_stall_guard(kw, text):
    with pytest.raises(ValueError, match=text):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", **kw)


def _at_second_decision(second_w: int, **kw):
    """A 4-GPU job started at 0 on 8 training GPUs (no loans); a second job of ``second_w``
    workers of 4 GPUs arrives at 60 s. Returns the env at the decision point the arrival opens, and the
    window slot of the running job."""
    env = ArylEnv(scenario=small_config(), jobs=[job(0, 0.0, work=7200.0, g=4), job(1, 60.0, work=600.0, g=4, w=second_w)],
                  action_mode="sequential", allow_preempt=True, uses_loaning=False, **kw)
    env.reset(seed=0)
    env.step(0)  # grant the first job
    env.step(env.codec.commit)
    assert env.sim.now == 60.0 and env.sim.n_running == 1 and env.sim.n_queued == 1
    slot = list(env.window).index(0)
    return env, slot


def test_preempt_guard_refuses_preemptions_no_waiting_job_needs():
    """By hand: the second job (4 GPUs) fits the free 4 GPUs, so preempting the first serves
    nobody: allowed without the guard, refused with it. A second job of 8 GPUs cannot start
    while the first runs: the guard allows the preemption."""
    env, slot = _at_second_decision(1)
    assert env.action_masks()[env.k + slot]
    env, slot = _at_second_decision(1, preempt_guard=True)
    m = env.action_masks()
    assert not m[env.k + slot] and m[list(env.window).index(1)] and m[env.codec.commit]
    env, slot = _at_second_decision(2, preempt_guard=True)
    assert env.action_masks()[env.k + slot]


def test_preempt_guard_keeps_scale_ins():
    """An elastic job above its minimum may still give a worker back: only releases to 0
    workers are guarded."""
    env = ArylEnv(scenario=small_config(), jobs=[job(0, 0.0, work=7200.0, w=4, w_min=1, elastic=True),
                                                 job(1, 60.0, work=600.0)],
                  action_mode="sequential", allow_preempt=True, uses_loaning=False, preempt_guard=True)
    env.reset(seed=0)
    for _ in range(3):  # grant 1 worker, then grow it to 3
        env.step(0)
    env.step(env.codec.commit)
    slot = list(env.window).index(0)
    assert env.sim.now == 60.0 and env.codec.tent[slot] == 3
    assert env.action_masks()[env.k + slot]  # 3 -> 2: a scale-in
