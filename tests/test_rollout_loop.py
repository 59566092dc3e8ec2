"""The one rollout loop (aryl_gym.rollout.play) and its per-step callback: every recorder of
steps (demos, behaviour cloning, DAgger, check_equality) goes through it."""

from __future__ import annotations

import numpy as np

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.predict import HeuristicPredictor, policy_env_kwargs
from aryl_gym.rollout import ActAgent, Step, play, run_agent


def _env():
    return ArylEnv(scenario="tiny", action_mode="sequential", window=16, **policy_env_kwargs("aryl"))


def test_on_step_sees_every_step_with_its_masks_and_the_run_is_unchanged():
    env = _env()
    steps: list[Step] = []
    ro = play(HeuristicPredictor("aryl", env), env, seed=0, options={"episode_seed": 0},
              on_step=steps.append, masks=True)
    assert len(steps) == ro.steps and [s.index for s in steps] == list(range(ro.steps))
    assert all(s.mask is not None and s.mask.dtype == bool and s.mask[int(s.action)] for s in steps)
    assert sum(float(s.reward) for s in steps) == ro.total_reward
    assert steps[-1].terminated == ro.terminated and steps[-1].info is not None
    for a, b in zip(steps, steps[1:]):
        assert a.next_obs is b.obs
    # the callback changes nothing: the same episode as without it
    env2 = _env()
    res, total, n = run_agent(HeuristicPredictor("aryl", env2), env2, 0)
    assert (total, n) == (ro.total_reward, ro.steps)
    assert res.avg_jct == ro.info["episode_result"].avg_jct


def test_act_agent_adapts_plain_functions():
    env = _env()
    seen: list[int] = []
    rng = np.random.default_rng(0)

    def masked(obs, mask):
        seen.append(int(mask.sum()))
        return int(rng.choice(np.flatnonzero(mask)))

    ro = play(ActAgent(env, masked, masks=True), env, seed=1, max_steps=25)
    assert ro.steps == 25 == len(seen) and min(seen) >= 1
    ro = play(ActAgent(env, lambda e, obs: int(e.action_masks().nonzero()[0][-1])), env, seed=1, max_steps=5)
    assert ro.steps == 5
