"""The training fast path (aryl_gym.train.fast): the same policy outputs as sb3-contrib's masked
policy, the vector env's masks, and paired groups that really share traces."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import gymnasium as gym
import torch as th

import aryl_gym  # noqa: F401
from tests.helpers import play_sjf_grant


def _batch(env, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    obss, masks = [], []
    for _ in range(n):
        m = env.unwrapped.action_masks()
        obss.append(obs)
        masks.append(m)
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            obs, _ = env.reset()
    return {k: np.stack([o[k] for o in obss]) for k in obss[0]}, np.stack(masks)


def test_fast_forward_matches_sb3_contrib():
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.fast import FastMaskableMultiInputPolicy

    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=8)
    ref = MaskablePPO("MultiInputPolicy", env, seed=1, device="cpu", policy_kwargs={"net_arch": [16]})
    fast = MaskablePPO(FastMaskableMultiInputPolicy, env, seed=1, device="cpu", policy_kwargs={"net_arch": [16]})
    fast.policy.load_state_dict(ref.policy.state_dict())
    batch, masks = _batch(env, 64)
    obs_t, _ = ref.policy.obs_to_tensor(batch)
    with th.no_grad():
        a_ref, v_ref, lp_ref = ref.policy(obs_t, deterministic=True, action_masks=masks)
        a_fast, v_fast, lp_fast = fast.policy(obs_t, deterministic=True, action_masks=masks)
        np.testing.assert_array_equal(a_fast.numpy(), a_ref.numpy())
        np.testing.assert_allclose(v_fast.numpy(), v_ref.numpy(), rtol=1e-6)
        np.testing.assert_allclose(lp_fast.numpy(), lp_ref.numpy(), rtol=1e-5, atol=1e-6)
        # sampled actions: always allowed; their log-probabilities are sb3-contrib's
        th.manual_seed(0)
        a_s, _, lp_s = fast.policy(obs_t, deterministic=False, action_masks=masks)
        assert masks[np.arange(len(a_s)), a_s.numpy()].all()
        _, lp_eval, _ = ref.policy.evaluate_actions(obs_t, a_s, action_masks=masks)
        np.testing.assert_allclose(lp_s.numpy(), lp_eval.numpy(), rtol=1e-5, atol=1e-6)


def _vec(n: int, group: int, seed: int = 5):
    from stable_baselines3.common.env_util import make_vec_env

    from aryl_gym.train.fast import ArylVecEnv, PairedSeeds

    def make():
        return gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=8)

    paired = PairedSeeds(n, group, seed) if group > 1 else None
    return make_vec_env(make, n_envs=n, seed=seed, vec_env_cls=ArylVecEnv, vec_env_kwargs={"paired": paired})


def test_vec_env_masks_come_from_the_observation():
    venv = _vec(2, 1)
    obs = venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(50):
        masks = venv.env_method("action_masks")
        for i, m in enumerate(masks):
            np.testing.assert_array_equal(m, venv.envs[i].unwrapped.action_masks())
            np.testing.assert_array_equal(m, obs["action_mask"][i] > 0.5)
        obs, _, _, infos = venv.step(np.array([int(rng.choice(np.flatnonzero(m))) for m in masks]))
        assert all(isinstance(i, dict) for i in infos)


def test_paired_groups_share_traces():
    """Envs of one group play the same episodes (same arrivals, sizes and durations), episode
    after episode, while different groups play different ones."""
    from aryl_gym.train.fast import PairedSeeds

    venv = _vec(4, 2)
    venv.reset()
    rng = np.random.default_rng(1)
    seen: dict[int, list[list]] = {i: [] for i in range(4)}

    def record(i: int) -> None:
        ep = venv.envs[i].unwrapped.episode
        seen[i].append([(j.submit, j.g, j.w_min, j.w_max, j.work) for j in ep.jobs] + [ep.seed])

    for i in range(4):
        record(i)
    steps = 0
    while min(len(v) for v in seen.values()) < 3 and steps < 20_000:
        masks = venv.env_method("action_masks")
        # env-specific action choices: the groups' members act differently
        acts = np.array([int(rng.choice(np.flatnonzero(m))) for m in masks])
        _, _, dones, _ = venv.step(acts)
        for i in np.flatnonzero(dones):
            record(int(i))
        steps += 1
    assert min(len(v) for v in seen.values()) >= 3
    for n in range(3):
        assert seen[0][n] == seen[1][n] and seen[2][n] == seen[3][n]
        assert seen[0][n] != seen[2][n]
    assert seen[0][0] != seen[0][1]
    with pytest.raises(ValueError, match="multiple of the group size"):
        PairedSeeds(3, 2)


@pytest.mark.parametrize(
    "load,kwargs,placement",
    [
        (0.4, {}, None),
        (1.4, {}, None),
        # the long episodes (about 3-6 s each): the slow tier
        pytest.param(1.1, {"allow_preempt": True, "window": 32}, None, marks=pytest.mark.slow),
        pytest.param(1.4, {"allow_preempt": True}, {"group_flexible": False}, marks=pytest.mark.slow),
        pytest.param(1.4, {"allow_preempt": True}, {"hetero": True}, marks=pytest.mark.slow),
    ],
)
def test_sequential_mask_shortcuts_equal_dry_runs(load, kwargs, placement):
    """The mask's shortcuts (skipping grants that need more GPUs than are free; answering
    candidates from one dry run of the tentative decision) give exactly the masks that
    dry-running every candidate gives (testbed, random masked actions, loads, preemption,
    placement options)."""
    from aryl_gym.config import load_scenario
    from aryl_gym.envs.allocation import ARYL_PLACEMENT

    cfg = load_scenario("testbed").replace(workload={"load": load})
    if placement:
        kwargs = {**kwargs, "placement": dataclasses.replace(ARYL_PLACEMENT, **placement)}
    env = gym.make("aryl_gym/Aryl-v1", scenario=cfg, action_mode="sequential", **kwargs).unwrapped
    codec = env.codec
    rng = np.random.default_rng(3)
    env.reset(seed=0, options={"episode_seed": 21})
    refused = shortcut_releases = 0
    for _ in range(2500):
        codec._mask = None
        codec.quick_reject = codec.incremental = codec.counting = True
        fast = codec.mask(env).copy()
        codec._mask = None
        codec.quick_reject = codec.incremental = codec.counting = False
        slow = codec.mask(env).copy()
        np.testing.assert_array_equal(fast, slow)
        refused += int(slow[: env.k].sum() < len(env.window))
        shortcut_releases += int(slow[env.k : -1].any())
        # mostly sub-steps (rounds of several grants and releases), sometimes a commit
        allowed = np.flatnonzero(slow[:-1])
        a = int(rng.choice(allowed)) if len(allowed) and rng.random() < 0.8 else codec.commit
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            break
    assert refused > 0 and shortcut_releases > 0  # both kinds of candidates were compared


def test_paired_seed_schedule_with_repeats():
    from aryl_gym.train.fast import PairedSeeds

    p = PairedSeeds(4, 2, seed=9, repeats=2)
    seq = [[p.next_seed(i) for _ in range(4)] for i in range(4)]
    assert seq[0] == seq[1] and seq[2] == seq[3] and seq[0] != seq[2]
    assert seq[0][0] == seq[0][1] and seq[0][2] == seq[0][3] and seq[0][0] != seq[0][2]
    again = PairedSeeds(4, 2, seed=9, repeats=2)
    assert [again.next_seed(0) for _ in range(4)] == seq[0]


def test_trace_mean_reward_sums_to_the_pool_mean_minus_the_agent():
    """Undiscounted, the trace-mean return is (mean total JCT of the pool at reset - the agent's
    total JCT) / scale; a finished run joins the pool of its trace."""
    from aryl_gym.train import paired
    from aryl_gym.train.evaluation import run_reference

    paired._POOLS.clear()
    env = paired.TraceMeanJCTReward(
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential"), "fifo")
    totals, jcts = [], []
    for _ in range(2):
        total, info, term = play_sjf_grant(env)
        assert term
        totals.append(total)
        jcts.append(sum(info["episode_result"].jcts))
    ref = run_reference("fifo", "tiny", 7)
    assert totals[0] == pytest.approx((sum(ref.jcts) - jcts[0]) / 3600.0, rel=1e-9, abs=1e-6)
    # second run: the pool holds fifo's run and the first run
    mean_pool = (sum(ref.jcts) + jcts[0]) / 2
    assert totals[1] == pytest.approx((mean_pool - jcts[1]) / 3600.0, rel=1e-9, abs=1e-6)
    paired._POOLS.clear()


def test_trace_mean_reward_carries_the_jct_weight_and_needs_a_jct_component():
    """was: the baseline's term had weight 1 whatever the env's jct weight."""
    from aryl_gym.train import paired
    from aryl_gym.train.evaluation import run_reference

    paired._POOLS.clear()
    try:
        env = paired.TraceMeanJCTReward(
            gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential", reward={"jct": 2.0}), "fifo")
        total, info, term = play_sjf_grant(env)
        ref = run_reference("fifo", "tiny", 7)
        assert total == pytest.approx(2.0 * (sum(ref.jcts) - sum(info["episode_result"].jcts)) / 3600.0,
                                      rel=1e-9, abs=1e-6)
        with pytest.raises(ValueError, match=r"pair_baseline='trace_mean' makes the jct reward relative .* drop pair_baseline"):
            paired.TraceMeanJCTReward(
                gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential", reward="queue"), "fifo")
    finally:
        paired._POOLS.clear()
