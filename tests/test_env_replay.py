"""Reference policies through the env: exact replay in sequential mode, the predict adapters,
the docs example, demonstrations, and a MaskablePPO smoke run (issue 5; SPEC 3, 6)."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from aryl_gym.agents import make_policy, policy_names

import aryl_gym  # noqa: F401
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.predict import HeuristicPredictor, policy_env_kwargs
from aryl_gym.scenario import make_episode

ROOT = Path(__file__).resolve().parents[1]
#: fields that measure wall time or name the policy; everything else must match exactly
TIMING = {"wall_s", "decision_ms_mean", "decision_ms_max", "policy"}


def _through_env(policy: str, scenario: str, seed: int, mode: str = "sequential", window: int = 128):
    env = ArylEnv(scenario=scenario, action_mode=mode, window=window, **policy_env_kwargs(policy))
    agent = HeuristicPredictor(policy, env)
    obs, _ = env.reset(options={"episode_seed": seed})
    while True:
        action, _ = agent.predict(obs)
        obs, _, te, tr, info = env.step(action)
        if te or tr:
            return info["episode_result"], agent


def _native(policy: str, scenario: str, seed: int):
    return make_episode(scenario, seed).simulator().run(make_policy(policy))


CASES = [("fifo", "tiny", 0), ("sjf", "tiny", 1), ("fifo", "testbed", 0), ("sjf", "testbed", 0)]
if "aryl" in policy_names():
    CASES += [("aryl", "tiny", 0), ("aryl", "tiny", 1), ("aryl", "testbed", 0)]


@pytest.mark.parametrize("policy,scenario,seed", CASES)
def test_sequential_replay_equals_native_episode(policy, scenario, seed):
    via_env, agent = _through_env(policy, scenario, seed)
    native = _native(policy, scenario, seed)
    assert agent.skipped == 0
    a = via_env.to_dict(series=True)
    b = native.to_dict(series=True)
    diff = {k: (a[k], b[k]) for k in b if k not in TIMING and a[k] != b[k]}
    assert not diff, diff
    assert via_env.jobs_completed == via_env.jobs_total


@pytest.mark.parametrize("mode", ["targets", "priority"])
def test_predict_adapters_in_other_modes_finish_episodes(mode):
    res, _ = _through_env("fifo", "tiny", 0, mode=mode, window=16)
    assert res.jobs_completed == res.jobs_total


def test_predict_with_batched_observation_and_evaluate_policy():
    from stable_baselines3.common.evaluation import evaluate_policy

    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=32)
    agent = HeuristicPredictor("sjf", env)
    obs, _ = env.reset(seed=0)
    batched = {k: v[None] for k, v in obs.items()}
    a, state = agent.predict(batched, episode_start=np.array([True]))
    assert np.shape(a) == (1,) and state is None
    with pytest.raises(ValueError, match="batch of 2"):
        agent.predict({k: np.stack([v, v]) for k, v in obs.items()})
    mean, _ = evaluate_policy(agent, env, n_eval_episodes=1, warn=False)
    assert mean < 0


def test_docs_example_runs():
    text = (ROOT / "docs" / "env.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks, "docs/env.md must contain a python example"
    for code in blocks:
        exec(compile(code, "docs/env.md", "exec"), {"__name__": "docs_example"})


def test_demos_command(tmp_path):
    from aryl_gym.cli import main

    out = tmp_path / "demos.npz"
    rc = main(["demos", "--scenario", "tiny", "--policy", "fifo", "--episodes", "2", "--out", str(out)])
    assert rc in (0, None)
    d = np.load(out)
    n = len(d["actions"])
    assert n > 0 and d["masks"].shape[0] == n and d["obs_jobs"].shape[0] == n
    # every recorded action was allowed by the recorded mask
    assert d["masks"][np.arange(n), d["actions"]].all()
    assert set(np.unique(d["episode"])) == {0, 1}
    assert d["terminated"].sum() == 2


def test_maskable_ppo_smoke():
    torch = pytest.importorskip("torch")
    sb3c = pytest.importorskip("sb3_contrib")
    torch.set_num_threads(1)
    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=8)
    model = sb3c.MaskablePPO(
        "MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu",
        policy_kwargs={"net_arch": [32]},
    )
    model.learn(256)
    obs, _ = env.reset(seed=0)
    a, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(a)]
