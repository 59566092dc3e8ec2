"""The permutation-invariant policy (aryl_gym.train.setpolicy): any window, equivariant slot
scores, an invariant value, and MaskablePPO training and loading."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import gymnasium as gym
import torch as th
from sb3_contrib import MaskablePPO

import aryl_gym  # noqa: F401
from aryl_gym.train.setpolicy import MaskableSetPolicy


def _env(k: int, obs: str = "v0"):
    return gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=k, observation=obs)


def _obs_batch(env, n: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    o, _ = env.reset(seed=seed)
    out = []
    for _ in range(n):
        out.append(o)
        m = env.unwrapped.action_masks()
        o, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            o, _ = env.reset()
    return {k: np.stack([x[k] for x in out]) for k in out[0]}


@pytest.mark.parametrize("obs_version", ["v0", "v1"])
def test_one_set_of_weights_serves_any_window(obs_version):
    small = MaskablePPO(MaskableSetPolicy, _env(8, obs_version), seed=0, device="cpu",
                        policy_kwargs={"features_extractor_kwargs": {"embed_dim": 16}})
    big_env = _env(24, obs_version)
    big = MaskablePPO(MaskableSetPolicy, big_env, seed=1, device="cpu",
                      policy_kwargs={"features_extractor_kwargs": {"embed_dim": 16}})
    sd = small.policy.state_dict()
    assert {k: v.shape for k, v in sd.items()} == {k: v.shape for k, v in big.policy.state_dict().items()}
    big.policy.load_state_dict(sd)  # the K=8 weights, used with K=24
    batch = _obs_batch(big_env)
    masks = batch["action_mask"] > 0.5
    obs_t, _ = big.policy.obs_to_tensor(batch)
    with th.no_grad():
        a, v, lp = big.policy(obs_t, deterministic=True, action_masks=masks)
    assert a.shape == (32,) and masks[np.arange(32), a.numpy()].all()
    assert th.isfinite(v).all() and th.isfinite(lp).all()


def test_permuting_the_window_permutes_the_scores_and_keeps_the_value():
    env = _env(8)
    model = MaskablePPO(MaskableSetPolicy, env, seed=0, device="cpu")
    batch = _obs_batch(env, 16, seed=2)
    k = 8
    perm = np.random.default_rng(0).permutation(k)
    pb = dict(batch)
    pb["jobs"] = batch["jobs"][:, perm]
    m = batch["action_mask"]
    pb["action_mask"] = np.concatenate([m[:, :k][:, perm], m[:, k:2 * k][:, perm], m[:, 2 * k:]], axis=1)
    pol = model.policy
    with th.no_grad():
        f1 = pol.extract_features(pol.obs_to_tensor(batch)[0])
        f2 = pol.extract_features(pol.obs_to_tensor(pb)[0])
        l1, l2 = pol.action_net(f1), pol.action_net(f2)
        v1 = pol.value_net(pol.mlp_extractor.forward_critic(f1))
        v2 = pol.value_net(pol.mlp_extractor.forward_critic(f2))
    th.testing.assert_close(l2[:, :k], l1[:, :k][:, perm], rtol=1e-5, atol=1e-5)
    th.testing.assert_close(l2[:, k:2 * k], l1[:, k:2 * k][:, perm], rtol=1e-5, atol=1e-5)
    th.testing.assert_close(l2[:, -1], l1[:, -1], rtol=1e-5, atol=1e-5)
    th.testing.assert_close(v1, v2, rtol=1e-5, atol=1e-5)


def test_trains_saves_and_loads(tmp_path):
    env = _env(8, "v1")
    model = MaskablePPO(MaskableSetPolicy, env, seed=0, device="cpu", n_steps=64, batch_size=32, n_epochs=1,
                        policy_kwargs={"features_extractor_kwargs": {"embed_dim": 8}})
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    model.learn(128)
    after = model.policy.state_dict()
    assert any(not th.equal(before[k], after[k]) for k in before if "action_net" in k)
    model.save(tmp_path / "m.zip")
    again = MaskablePPO.load(tmp_path / "m.zip", device="cpu")
    assert isinstance(again.policy, MaskableSetPolicy)
    for k, v in after.items():
        th.testing.assert_close(again.policy.state_dict()[k], v)


@pytest.mark.parametrize("name", ["ppo-v1", "ppo-v1-kickstart"])
def test_shipped_v1_agents_load_by_name_and_act_with_masks(name):
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    if not (PRETRAINED_DIR / f"{name}.zip").exists():
        pytest.skip(f"{name} is not shipped (see docs/training.md, 'The shipped agents and their recipes')")
    agent = load_agent(name)
    assert isinstance(agent.model.policy, MaskableSetPolicy)
    env = agent.make_env()
    obs, _ = env.reset(seed=0, options={"episode_seed": 2000})
    for _ in range(300):
        mask = env.unwrapped.action_masks()
        a, _ = agent.predict(obs)
        assert mask[int(a)]
        obs, _, te, tr, _ = env.step(a)
        if te or tr:
            break


@pytest.mark.parametrize("policy", ["MaskableSetPolicy", "FastMaskableMultiInputPolicy"])
def test_critic_warmup_freezes_the_actor_then_releases_it(policy):
    from stable_baselines3.common.callbacks import CallbackList

    from aryl_gym.train.callbacks import CriticWarmup
    from aryl_gym.train.runner import resolve_policy

    env = _env(8)
    model = MaskablePPO(resolve_policy(policy), env, seed=0, device="cpu", n_steps=64, batch_size=32,
                        n_epochs=2, policy_kwargs={} if policy == "MaskableSetPolicy" else {"net_arch": [16]})
    cb = CriticWarmup(128)
    p0 = {k: v.clone() for k, v in model.policy.state_dict().items()}
    model.learn(128, callback=CallbackList([cb]))
    p1 = {k: v.clone() for k, v in model.policy.state_dict().items()}
    changed = {k for k in p0 if not th.equal(p0[k], p1[k])}
    assert changed and all("value_net" in k or ".vf." in k for k in changed)
    model.learn(256, callback=CallbackList([cb]), reset_num_timesteps=False)
    assert all(p.requires_grad for p in model.policy.parameters())
    p2 = model.policy.state_dict()
    assert any(not th.equal(p1[k], p2[k]) for k in p1 if "action_net" in k or "policy_net" in k)
