"""Hostile-user pass over the less-travelled env surfaces: the two-agent view
(``aryl_gym.envs.multiagent``), the multi-objective view (``aryl_gym.envs.mo``), flap damping
(``aryl_gym.envs.damping``), rendering, the predictors (``aryl_gym.envs.predict``) and the
allocation env's constructor checks. Each test failed on the code before the fix it names."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import MAX_INVALID_STREAK, ArylEnv
from aryl_gym.envs.damping import DampingParams, parse_flap_damping
from aryl_gym.envs.mo import ArylMOEnv
from aryl_gym.envs.multiagent import ALLOCATION, RECLAIM, ArylParallelEnv
from aryl_gym.envs.predict import HeuristicPredictor, ReclaimPredictor
from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.reclaim_snapshots import synthetic_snapshots
from tests.helpers import play_thrasher, tiny_loan_scenario

# ----------------------------------------------------------------------------------------------
# the two-agent view
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reward", ["", {}, 0, False, []])
def test_two_agent_falsy_reclaim_reward_is_an_error(reward: Any):
    """was: ``reclaim_reward or RECLAIM_REWARD``, so "", {}, 0, False or [] gave the default
    weights without a word (Aryl-v2 and ArylReclaim-v2 refuse "" and {})."""
    with pytest.raises(ValueError, match="reclaim_reward"):
        ArylParallelEnv(scenario="tiny", reclaim_reward=reward)
    # None is the documented default
    env = ArylParallelEnv(scenario="tiny", reclaim_reward=None)
    assert env.reclaim_weights["jct"] == 1.0 and env.reclaim_weights["preemption"] == 1.0


def test_two_agent_reward_errors_name_the_reclaim_arguments():
    """was: the message said ``reward`` / ``invalid_penalty``, the allocation agent's arguments."""
    with pytest.raises(ValueError, match=r"^reclaim_reward .*'jtc'"):
        ArylParallelEnv(scenario="tiny", reclaim_reward="jtc")
    with pytest.raises(ValueError, match=r"^reclaim_invalid_penalty .*-1"):
        ArylParallelEnv(scenario="tiny", reclaim_invalid_penalty=-1)


@pytest.mark.parametrize("actions", [0, None, [0], (ALLOCATION, 0)])
def test_two_agent_step_takes_a_dict(actions: Any):
    """was: "'int' object is not iterable", or a list read as agent names ("unknown agent 0")."""
    env = ArylParallelEnv(scenario="tiny", action_mode="sequential", window=8)
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"dict \{agent: action\}.*env.active"):
        env.step(actions)


def test_two_agent_invalid_pick_streak_ends_with_an_episode_result():
    """was: an episode truncated by the reclaim agent's MAX_INVALID_STREAK invalid picks had no
    ``episode_result`` in either agent's last info (docs: each last info holds it)."""
    env = ArylParallelEnv(scenario=tiny_loan_scenario(16.0), action_mode="sequential", window=16)
    obs, _ = env.reset(seed=3)
    while env.active != RECLAIM:
        obs, *_ = env.step({ALLOCATION: int(np.flatnonzero(obs[ALLOCATION]["action_mask"])[0])})
    bad = int(np.flatnonzero(~env.action_masks(RECLAIM))[0])
    n, te, tr = 0, {RECLAIM: False}, {RECLAIM: False}
    while not (te[RECLAIM] or tr[RECLAIM]) and n <= MAX_INVALID_STREAK:
        _, _, te, tr, infos = env.step({RECLAIM: bad})
        n += 1
    assert n == MAX_INVALID_STREAK and tr[RECLAIM] and tr[ALLOCATION] and not te[RECLAIM]
    assert infos[RECLAIM]["invalid_streak"] == MAX_INVALID_STREAK
    for agent in (ALLOCATION, RECLAIM):
        res = infos[agent]["episode_result"]
        assert res.truncated and res.jobs_unfinished > 0
        assert infos[agent]["episode_metrics"] == res.to_dict()
    assert env.agents == []


# ----------------------------------------------------------------------------------------------
# the multi-objective view
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("objectives", ["jct+", "+jct", "jct++preemption", "jct+ +preemption"])
def test_objectives_with_an_empty_name_are_an_error(objectives: str):
    """was: empty names were dropped ("jct+" was ("jct",)); ``reward="jct+"`` is refused."""
    with pytest.raises(ValueError, match="component names joined by"):
        ArylMOEnv(scenario="tiny", objectives=objectives)
    assert ArylMOEnv(scenario="tiny", objectives=" jct + preemption ").objectives == ("jct", "preemption")


@pytest.mark.parametrize("vector, weights, what", [
    (np.array([-1.0, 0.0, 0.0]), np.array([np.nan, 0.0, 0.0]), "weights must be finite"),
    (np.array([-1.0, 0.0, 0.0]), [1.0, 0.0, np.inf], "weights must be finite"),
    (np.array([-1.0, 0.0, np.nan]), None, "vector must be finite"),
    (np.array([-1.0, 0.0, 0.0]), [True, False, False], "weights must hold numbers"),
    (["-1", "0", "0"], None, "vector must hold numbers"),
])
def test_scalarize_refuses_nan_and_non_numbers(vector: Any, weights: Any, what: str):
    """was: a NaN weight gave NaN (an infinite one -inf), a NaN entry under a zero weight was
    skipped, strings were parsed and bools taken as 0/1, all without a word."""
    env = ArylMOEnv(scenario="tiny")
    with pytest.raises(ValueError, match=what):
        env.scalarize(vector, weights)
    assert env.scalarize(np.array([-1.0, -2.0, 0.5], dtype=np.float32)) == -1.0
    assert env.scalarize([-1.0, -2.0, 0.5], np.array([1, 2, 4])) == -3.0


# ----------------------------------------------------------------------------------------------
# flap damping
# ----------------------------------------------------------------------------------------------


def _thrash(damping: Any) -> dict[str, int]:
    env = gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential", allow_preempt=True,
                   window=16, flap_damping=damping)
    env.reset(seed=5)
    info, _ = play_thrasher(env, 20_000)
    return info["damping"]


@pytest.mark.parametrize("settings", [{"max_suppress_s": 1e6}, {"half_life_s": 1.0}, {"half_life_s": 1e-300}])
def test_damping_penalty_cap_beyond_floating_point_is_infinite(settings: dict[str, float]):
    """was: ``reuse * 2 ** (max_suppress_s / half_life_s)`` raised OverflowError at the first
    flap, mid-episode (any max_suppress_s above ~1,024 half-lives, e.g. 1e6 s)."""
    p = parse_flap_damping(settings)
    assert p is not None and p.ceiling == math.inf
    assert DampingParams().ceiling == 12.0  # the defaults' cap is unchanged


def test_damping_with_an_unreachable_cap_plays_as_an_uncapped_shield():
    """The thrashing agent with an 11-day max_suppress_s (cap beyond floating point) plays to the
    end; its penalties never reach the default cap either, so the counts are the defaults'."""
    stats = _thrash({"engage_share": 0.0, "max_suppress_s": 1e6})
    assert stats == _thrash({"engage_share": 0.0})
    assert stats["suppressions"] > 0


@pytest.mark.parametrize("settings", [
    {"half_life_s": 3600.0, "max_suppress_s": 900.0},
    {"max_suppress_s": 1.0},
    {"suppress": 20.0},
])
def test_damping_that_can_never_suppress_is_an_error(settings: dict[str, float]):
    """was: accepted; the cap held every penalty at or below ``suppress``, so no job was ever
    suppressed and the shield did nothing (2,954 flaps, 0 suppressions for the thrasher)."""
    with pytest.raises(ValueError, match="no job is ever suppressed"):
        parse_flap_damping(settings)
    with pytest.raises(ValueError, match="no job is ever suppressed"):
        ArylEnv(scenario="tiny", action_mode="sequential", allow_preempt=True, flap_damping=settings)


# ----------------------------------------------------------------------------------------------
# constructor checks and rendering
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("trace", ["", 5, ["a.csv"], b"a.csv"])
def test_trace_argument_must_be_a_path(trace: Any):
    """was: accepted; ``trace=""`` (with a trace_format) played the generated workload without a
    word, and 5 failed at reset as a missing file '<data root>/5'."""
    with pytest.raises(ValueError, match="trace must be a trace file path"):
        ArylEnv(scenario="tiny", trace=trace, trace_format="philly")


@pytest.mark.parametrize("root", [5, ["data"], 1.5])
def test_data_root_must_be_a_path(root: Any):
    """was: accepted and passed on to the trace and series loaders."""
    with pytest.raises(ValueError, match="data_root must be a folder path"):
        ArylEnv(scenario="tiny", data_root=root)


def test_scenario_given_twice_is_an_error():
    """was: the keyword won: ``ArylEnv("tiny", scenario="testbed")`` played testbed."""
    with pytest.raises(TypeError, match="scenario given twice"):
        ArylEnv("tiny", scenario="testbed")
    with pytest.raises(TypeError, match="scenario given twice"):
        ArylMOEnv("tiny", scenario="testbed")
    assert ArylEnv("testbed").config.name == ArylEnv(scenario="testbed").config.name


def test_render_before_reset_and_bad_render_mode():
    """was: ``render()`` before ``reset()`` returned None for a render mode that promises a text
    or an image (the raw env and the two-agent view; gym.make's order check raised), and a bad
    render_mode's message did not say what was given."""
    for mode in ("ansi", "rgb_array"):
        with pytest.raises(RuntimeError, match="reset"):
            ArylEnv(scenario="tiny", render_mode=mode).render()
        with pytest.raises(RuntimeError, match="reset"):
            ArylParallelEnv(scenario="tiny", render_mode=mode).render()
    assert ArylEnv(scenario="tiny").render() is None  # no render mode: nothing to render
    env = ArylParallelEnv(scenario="tiny", render_mode="ansi")
    env.reset(seed=0)
    assert "queued=" in env.render()
    with pytest.raises(ValueError, match="got 'human'"):
        ArylEnv(scenario="tiny", render_mode="human")


# ----------------------------------------------------------------------------------------------
# the predictors
# ----------------------------------------------------------------------------------------------


def test_heuristic_predictor_bad_env_policy_and_order():
    """was: AttributeErrors ('NoneType' object has no attribute 'seed' before reset, 'reclaim'
    for policy=None, 'set_reclaim' for the two-agent view itself)."""
    env = ArylEnv(scenario="tiny", action_mode="sequential")
    agent = HeuristicPredictor("aryl", env)
    with pytest.raises(RuntimeError, match="reset"):
        agent.predict(None)
    with pytest.raises(ValueError, match="policy must be"):
        HeuristicPredictor(None, env)
    two = ArylParallelEnv(scenario="tiny", action_mode="sequential")
    with pytest.raises(ValueError, match="env.alloc"):
        HeuristicPredictor("aryl", two)
    obs, _ = env.reset(seed=0)
    assert env.action_masks()[agent.predict(obs)[0]]
    HeuristicPredictor("aryl", two.alloc, use_policy_reclaim=False)  # the documented form


def test_reclaim_predictor_bad_env_and_order():
    """was: env=None, an allocation env and the reclaim env's snapshot mode were accepted and
    failed at the first act() with AttributeErrors, as did act() before the reclaim env's reset."""
    for env in (None, ArylEnv(scenario="tiny"),
                ArylReclaimEnv(snapshots=synthetic_snapshots(2, 4, 6, seed=1), max_servers=8)):
        with pytest.raises(ValueError, match="reclaim agent's actions"):
            ReclaimPredictor("aryl", env)
    for env in (ArylReclaimEnv(scenario=tiny_loan_scenario()), ArylParallelEnv(scenario="tiny")):
        rec = ReclaimPredictor("aryl", env)
        with pytest.raises(RuntimeError, match="reset"):
            rec.predict()
    env = ArylReclaimEnv(scenario=tiny_loan_scenario())
    env.reset(seed=5)
    rec = ReclaimPredictor("aryl", gym.wrappers.PassiveEnvChecker(env))
    assert env.need > 0 and env.action_masks()[rec.predict()[0]]
