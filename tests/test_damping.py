"""Flap damping (``ArylEnv(flap_damping=...)``, aryl_gym.envs.damping): per-job penalties by
hand, masks that refuse a suppressed job's releases, the thrashing agent of test_thrash.py
finishing under it, nothing changed when off, and the deployment plumbing."""

from __future__ import annotations

import math
import re

import gymnasium as gym
import numpy as np
import pytest

from aryl_gym.config import load_scenario
from aryl_gym.envs.damping import DampingParams, FlapDamping, parse_flap_damping
from tests.helpers import play_thrasher


def test_penalty_by_hand():
    """1 per flap, halving every 15 minutes; suppressed above 2, lifted below 0.75."""
    d = FlapDamping(DampingParams(), n_jobs=3)
    d.flap(0, 0.0)
    assert d.value(0, 0.0) == pytest.approx(1.0)
    assert d.value(0, 900.0) == pytest.approx(0.5)
    d.flap(0, 900.0)  # 0.5 + 1
    assert d.value(0, 900.0) == pytest.approx(1.5) and not d.suppressed
    d.flap(0, 900.0)  # 2.5 > 2
    assert d.suppressed == {0} and d.suppressions == 1 and d.flaps == 3
    # 2.5 * 2^(-t / 900) < 0.75  <=>  t > 900 log2(2.5 / 0.75) = 1563.3 s
    t_lift = 900.0 + 900.0 * math.log2(2.5 / 0.75)
    assert d.refresh(t_lift - 1.0) == {0}
    assert d.refresh(t_lift + 1.0) == set()
    assert d.value(1, 5000.0) == 0.0 and 2 not in d.suppressed


def test_only_reversals_flap():
    """A start, then scale-ins over several rounds: no flap. Each change of direction: one."""
    d = FlapDamping(DampingParams(), n_jobs=1)
    for t, direction in ((0.0, 1), (60.0, -1), (120.0, -1), (180.0, -1)):
        d.change(0, direction, t)
    assert d.flaps == 1 and d.value(0, 60.0) == pytest.approx(1.0)  # the first scale-in reversed the start
    d.change(0, 1, 240.0)  # restart: a reversal
    d.change(0, -1, 300.0)  # preempted again: a reversal, 3 flaps within 4 minutes
    assert d.flaps == 3 and d.suppressed == {0}


def test_engagement_by_the_overhead_share_by_hand():
    """Not engaged while the overhead share over the window (half the thrash span: 1 h for
    stall_hours 2) stays at 40%; after a switch to 100%, engaged once the window's share passes
    one half (x minutes at full waste: x + 0.4 (60 - x) > 30 <=> x > 10), and latched."""
    d = FlapDamping(DampingParams(), n_jobs=1, stall_hours=2.0)
    assert d.window_s == 3600.0 and not d.engaged
    d.flap(0, 0.0), d.flap(0, 0.0), d.flap(0, 0.0)
    assert d.suppressed == {0}
    over = alloc = 0.0
    t = 0.0
    while t < 5 * 3600.0:
        t += 60.0
        alloc += 100.0 * 60.0
        over += (40.0 if t <= 3 * 3600.0 else 100.0) * 60.0
        d.penalty[0], d.stamp[0] = 10.0, t  # keep job 0 suppressed
        active = d.active(t, over, alloc)
        if d.engaged:
            break
        assert active == frozenset()
    assert d.engaged and d.engaged_at is not None
    assert 10.0 < (d.engaged_at - 3 * 3600.0) / 60.0 <= 11.0
    assert active == {0}
    assert d.active(t + 60.0, over, alloc + 1e9) == {0}  # latched, whatever the share does
    always = FlapDamping(DampingParams(engage_share=0.0), n_jobs=1)
    assert always.engaged


def test_penalty_is_capped_so_suppression_ends_within_max_suppress():
    p = DampingParams()
    assert p.ceiling == pytest.approx(0.75 * 2.0**4)
    d = FlapDamping(p, n_jobs=1)
    for _ in range(100):
        d.flap(0, 0.0)
    assert d.value(0, 0.0) == pytest.approx(p.ceiling)
    assert d.refresh(p.max_suppress_s - 1.0) == {0}
    assert d.refresh(p.max_suppress_s + 1.0) == set()


@pytest.mark.parametrize(
    "bad, msg",
    [
        ("yes", "flap_damping must be true, false or a mapping"),
        ({"half_life": 60}, "unknown key 'half_life'"),
        ({"half_life_s": -1}, "flap_damping.half_life_s must be a finite number > 0"),
        ({"suppress": float("nan")}, "flap_damping.suppress must be a finite number, got nan"),
        ({"suppress": True}, "flap_damping.suppress must be a finite number, got True"),
        ({"engage_share": 1.5}, "flap_damping.engage_share must be in [0, 1)"),
        ({"reuse": 3.0}, "reuse (3.0) must be below suppress (2.0)"),
    ],
)
def test_bad_settings_are_named(bad, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        parse_flap_damping(bad)
    with pytest.raises(ValueError, match="flap_damping"):
        gym.make("aryl_gym/Aryl-v1", scenario="tiny", flap_damping=bad)


def test_parse_accepts_the_documented_forms():
    assert parse_flap_damping(None) is None and parse_flap_damping(False) is None
    assert parse_flap_damping(True) == DampingParams()
    assert parse_flap_damping({"half_life_s": 60, "suppress": 3}) == DampingParams(half_life_s=60.0, suppress=3.0)


def _thrasher(damping):
    """test_thrash.py's thrashing agent (tests.helpers.play_thrasher) with ``damping``; checks
    at every decision point that a suppressed running window job cannot be released. Returns
    (final info, unwrapped env, decision points where such a release was refused)."""
    env = gym.make("aryl_gym/Aryl-v1", scenario=load_scenario("testbed").replace(
        workload={"load": 1.0}), action_mode="sequential", allow_preempt=True, window=32,
        stall_hours=1.0, flap_damping=damping)
    env.reset(seed=5, options={"episode_seed": 5})
    refused = 0  # decision points where a running window job could not be released

    def check(u, m):
        nonlocal refused
        if u.substep == 0 and u.damped:
            for i, j in enumerate(u.window):
                if int(j) in u.damped and u.sim.state[j] == 2:
                    assert not m[u.k + i]  # a suppressed running job cannot be released
                    refused += 1

    info, _ = play_thrasher(env, 400_000, check)
    return info, env.unwrapped, refused


def test_damping_stops_the_thrashing_agent():
    """The same agent is truncated by the thrash rule without damping and finishes every job
    with the shield engaged from the start: its releases of a flapping job are refused once the
    job is suppressed. Engaged by the thrash signal (the default), the shield engages before
    the rule ends the episode, too late for this agent, which keeps flapping fresh jobs (each
    needs three reversals to be suppressed)."""
    info, u, refused = _thrasher(None)
    assert info["episode_result"].thrashing and "damping" not in info and u.damping_stats is None
    info, u, refused = _thrasher({"engage_share": 0.0})
    res = info["episode_result"]
    assert not res.thrashing and res.jobs_unfinished == 0
    assert info["damping"] == u.damping_stats and info["damping"]["engaged"] == 1
    assert info["damping"]["suppressions"] > 0 and refused > 0 and info["damping"]["refused"] > 0
    info, u, _ = _thrasher(True)
    assert info["damping"]["engaged"] == 1 and u._damping.engaged_at < u.sim.now


@pytest.mark.slow
def test_shipped_agent_cycle_is_broken():
    """ppo-v1-kickstart at load 1.2 on seed 6009 cycles (it preempts two jobs at one decision point and
    restarts them at the next) until the thrash rule ends the episode; deployed with its flap
    damping, it finishes every job."""
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    from aryl_gym.rollout import run_agent

    if not (PRETRAINED_DIR / "ppo-v1-kickstart.zip").exists():
        pytest.skip("ppo-v1-kickstart is not shipped")
    agent = load_agent("ppo-v1-kickstart")
    cfg = load_scenario("testbed").replace(workload={"load": 1.2})
    v1 = "aryl_gym/Aryl-v1"  # the World v1 episode this regression was found on
    raw, _, _ = run_agent(agent, agent.make_env(scenario=cfg, deployed=False, env_id=v1), 6009)
    assert raw.thrashing and raw.jobs_unfinished > 0
    env = agent.make_env(scenario=cfg, env_id=v1)
    res, _, _ = run_agent(agent, env, 6009)
    assert not res.thrashing and res.jobs_unfinished == 0
    assert env.unwrapped.damping_stats["engaged"] == 1 and env.unwrapped.damping_stats["refused"] > 0


def test_targets_mode_refuses_levels_below_a_suppressed_jobs_workers():
    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="targets", allow_preempt=True,
                   flap_damping=True)
    env.reset(seed=0, options={"episode_seed": 0})
    u = env.unwrapped
    for _ in range(200):  # start what fits until a job runs
        if any(u.sim.state[j] == 2 for j in u.window):
            break
        m = u.codec.mask2d(u)
        act = np.array([int(np.flatnonzero(m[i])[-1]) for i in range(u.k)])
        env.step(act)
    i = next(i for i, j in enumerate(u.window) if u.sim.state[j] == 2)
    j = int(u.window[i])
    wk = int(u.sim.workers[j])
    before = u.codec.mask2d(u)[i].copy()
    assert before[0]  # preemption allowed
    u.damped = {j}
    u.codec.begin_round(u)  # recompute the mask with j suppressed
    after = u.codec.mask2d(u)[i]
    assert not after[: min(wk, u.codec.W)].any() and after[min(wk, u.codec.W)]
    assert (after[wk + 1:] == before[wk + 1:]).all()  # growth unchanged


def test_off_by_default_and_inert_for_an_agent_that_never_releases():
    """An agent that never releases plays the same episode with and without damping."""
    def play(damping):
        env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential",
                       allow_preempt=True, flap_damping=damping)
        env.reset(seed=1, options={"episode_seed": 1})
        u = env.unwrapped
        k = u.k
        while True:
            m = u.action_masks()
            g = np.flatnonzero(m[:k])
            _, _, term, trunc, info = env.step(int(g[0]) if len(g) else 2 * k)
            if term or trunc:
                return info["episode_result"].to_dict(), u

    plain, u0 = play(None)
    damped, u1 = play(True)
    assert u0.flap_damping is None
    assert u1.damping_stats == {"flaps": 0, "suppressions": 0, "engaged": 0, "refused": 0}
    plain.pop("wall_s", None), damped.pop("wall_s", None)
    assert plain == damped


def test_deploy_env_kwargs_stay_out_of_the_runs_own_envs():
    """A training config's deploy_env_kwargs are saved with it but never reach the run's own
    envs (training, DAgger rollouts, the evaluations that select the best model): the run
    judges the raw policy. A value that is not a mapping is a config error."""
    from aryl_gym.errors import ConfigError
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.dagger import rollout_config
    from aryl_gym.train.envs import make_single_env

    cfg = load_train_config("maskable_ppo_set", "testbed", {"deploy_env_kwargs": {"flap_damping": True}})
    assert cfg.to_dict()["deploy_env_kwargs"] == {"flap_damping": True}
    for c, evaluation, want in ((cfg, True, False), (cfg, False, False), (rollout_config(cfg), False, False)):
        env = make_single_env(c, evaluation=evaluation)
        try:
            # a training env is a WorldSampler: the attribute is its current inner env's
            assert (env.unwrapped.flap_damping is not None) == want
        finally:
            env.close()
    with pytest.raises(ConfigError, match="deploy_env_kwargs"):
        load_train_config("maskable_ppo_set", "testbed", {"deploy_env_kwargs": [1, 2]})


@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_shipped_ppo_v1_acts_with_damping_unless_undeployed():
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    if not (PRETRAINED_DIR / "ppo-v1-kickstart.zip").exists():
        pytest.skip("ppo-v1-kickstart is not shipped")
    agent = load_agent("ppo-v1-kickstart")
    assert agent.config["deploy_env_kwargs"] == {"flap_damping": True}
    assert agent.make_env().unwrapped.flap_damping == DampingParams()
    assert agent.make_env(deployed=False).unwrapped.flap_damping is None
    assert agent.make_env(flap_damping=False).unwrapped.flap_damping is None


@pytest.mark.parametrize("name, recipe", [("ppo-v1", "maskable_ppo_scratch"),
                                          ("ppo-v1-kickstart", "maskable_ppo_set")])
def test_shipped_v1_configs_are_their_recipes(name, recipe):
    """agents/pretrained/NAME.yaml is its resolved recipe (RECIPE, testbed, seed 0), so the one
    training command and the shipped config agree (env_kwargs and deploy_env_kwargs included:
    ppo-v1 trains and acts with the shield engaged from the start, ppo-v1-kickstart is deployed
    with it)."""
    import yaml
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    from aryl_gym.train.config import load_train_config

    path = PRETRAINED_DIR / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"{name} is not shipped")
    shipped = yaml.safe_load(path.read_text())
    recipe_now = load_train_config(recipe, "testbed").to_dict()
    # the agents were trained on World v1; the recipes now train on the current world
    assert shipped.pop("env_id") == "aryl_gym/Aryl-v1"
    assert recipe_now.pop("env_id") == "aryl_gym/Aryl-v2"
    assert shipped == recipe_now
    assert load_agent(name).make_env(scenario="tiny").unwrapped.flap_damping is not None


def test_evaluate_says_the_agent_acted_with_its_shield(capsys):
    from aryl_gym.agents.learned import PRETRAINED_DIR

    from aryl_gym.cli import main as cli_main

    if not (PRETRAINED_DIR / "ppo-v1-kickstart.zip").exists():
        pytest.skip("ppo-v1-kickstart is not shipped")
    assert cli_main(["evaluate", "--agent", "ppo-v1-kickstart", "--scenario", "tiny", "--seeds", "0",
                     "--against", "fifo", "--table", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "ppo-v1-kickstart acted with its deploy_env_kwargs {'flap_damping': True}" in err
    assert "shield engaged on 0 of 1 seed(s)" in err
