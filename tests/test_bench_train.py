"""The training-throughput benchmark's variants are the configs they claim to measure."""

import pytest

pytest.importorskip("sb3_contrib")

from aryl_gym.benchmarks.train import VARIANTS, _config  # noqa: E402
from aryl_gym.train.config import load_train_config  # noqa: E402


def test_v1_variants_are_the_shipped_recipe_rl_phase():
    shipped = load_train_config("maskable_ppo_set", "testbed", {})
    for name in ("v1", "v1-teacher"):
        cfg = _config(name)
        assert cfg.policy == shipped.policy == "MaskableSetPolicy"
        assert cfg.env_kwargs == shipped.env_kwargs and cfg.n_envs == shipped.n_envs
        assert cfg.pair_group == shipped.pair_group and cfg.pair_baseline == shipped.pair_baseline
        assert cfg.hyperparams == shipped.hyperparams
        assert cfg.critic_warmup_steps == 0  # steady state, the actor trains
    assert _config("v1").teacher.policy is None
    t = _config("v1-teacher").teacher
    assert t.policy == shipped.teacher.policy and t.epochs == shipped.teacher.epochs and t.demo_share == 0


def test_fast_variants_keep_the_rollout_size_and_unknown_names_fail():
    for name in ("fast", "fast-8", "fast-8-bg"):
        cfg = _config(name)
        assert cfg.n_envs * cfg.hyperparams["n_steps"] == 4096
    assert set(VARIANTS) >= {"sb3", "fast-8-bg", "v1", "v1-teacher"}
    with pytest.raises(ValueError, match="choose from"):
        _config("fast-16")


def test_v1_scratch_variant_is_the_shipped_ppo_v1_recipe():
    shipped = load_train_config("maskable_ppo_scratch", "testbed", {})
    cfg = _config("v1-scratch")
    assert cfg.env_kwargs == shipped.env_kwargs and cfg.env_kwargs["flap_damping"] == {"engage_share": 0.0}
    assert cfg.hyperparams == shipped.hyperparams and cfg.n_envs == shipped.n_envs == 8
    assert cfg.pair_baseline == shipped.pair_baseline and cfg.worlds == shipped.worlds
    assert cfg.total_timesteps != shipped.total_timesteps and cfg.checkpoint_freq == 0
