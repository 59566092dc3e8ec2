"""Discounting by simulated time (timegae.py): the GAE against SB3's and by hand,
the elapsed times stored with the right steps, configs and saved models."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer
from timegae import TimeGAERolloutBuffer, time_gae

from aryl_gym.config import ConfigError
from aryl_gym.train.config import load_train_config


def _filled(cls, rng, n_steps=7, n_envs=3, gamma=0.9, lam=0.8):
    buf = cls(n_steps, spaces.Box(-1, 1, (2,)), spaces.Discrete(3), gamma=gamma, gae_lambda=lam,
              n_envs=n_envs)
    buf.reset()
    for _ in range(n_steps):
        buf.add(rng.normal(size=(n_envs, 2)).astype(np.float32), rng.integers(0, 3, (n_envs, 1)),
                rng.normal(size=n_envs).astype(np.float32), (rng.random(n_envs) < 0.2).astype(np.float32),
                th.as_tensor(rng.normal(size=n_envs).astype(np.float32)),
                th.as_tensor(rng.normal(size=n_envs).astype(np.float32)), action_masks=np.ones((n_envs, 3)))
    return buf


def test_constant_time_discount_is_sb3_gae_with_that_gamma():
    """Every step covering dt with exp(-dt / h) = gamma gives exactly SB3's GAE with gamma."""
    gamma, h = 0.9, 3600.0
    ref = _filled(MaskableRolloutBuffer, np.random.default_rng(0), gamma=gamma)
    buf = _filled(TimeGAERolloutBuffer, np.random.default_rng(0), gamma=0.5)  # its gamma unused
    buf.horizon_s = h
    buf.elapsed[:] = -h * math.log(gamma)
    last, dones = th.as_tensor(np.array([0.3, -1.0, 2.0], np.float32)), np.array([0, 1, 0])
    ref.compute_returns_and_advantage(last, dones)
    buf.compute_returns_and_advantage(last, dones)
    np.testing.assert_allclose(buf.advantages, ref.advantages, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(buf.returns, ref.returns, rtol=1e-5, atol=1e-6)


def test_sub_steps_are_not_discounted_by_hand():
    """One env, three steps: a sub-step (dt 0), a commit covering one horizon, a sub-step."""
    buf = _filled(TimeGAERolloutBuffer, np.random.default_rng(1), n_steps=3, n_envs=1, lam=0.5)
    buf.episode_starts[:] = 0
    buf.rewards[:, 0] = [1.0, 2.0, 4.0]
    buf.values[:, 0] = [0.5, 0.25, 1.0]
    elapsed = np.array([[0.0], [100.0], [0.0]])
    time_gae(buf, th.tensor([2.0]), np.array([0]), elapsed, 100.0)
    e = math.exp(-1.0)
    d2 = 4.0 + 1.0 * 2.0 - 1.0  # last step: discount 1, bootstrap 2.0
    d1 = 2.0 + e * 1.0 - 0.25
    d0 = 1.0 + 1.0 * 0.25 - 0.5
    a2 = d2
    a1 = d1 + e * 0.5 * a2
    a0 = d0 + 1.0 * 0.5 * a1
    np.testing.assert_allclose(buf.advantages[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(buf.returns[:, 0], np.array([a0, a1, a2]) + buf.values[:, 0], rtol=1e-6)


def _tiny(tmp_path, **over):

    horizon = over.pop("time_horizon_hours", 6.0)
    cls = "TimeTeacherMaskablePPO" if over.get("teacher") else "TimeMaskablePPO"
    base = {"total_timesteps": 1024, "checkpoint_freq": 0, "critic_warmup_steps": 0,
            "eval": {"freq": 0}, "bc": {"policy": None}, "model_class": f"timegae:{cls}"}
    base.update(over)
    cfg = load_train_config("maskable_ppo_set", "tiny", base)
    return cfg.replace(hyperparams={**cfg.hyperparams, "time_horizon_hours": horizon})


def test_elapsed_times_belong_to_their_steps_and_models_save_plain(tmp_path):
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import configure
    from timegae import TimeMaskablePPO

    from aryl_gym.train.runner import build_model, make_vec_env

    cfg = _tiny(tmp_path)
    venv = make_vec_env(cfg)
    model = build_model(cfg, venv)
    assert isinstance(model, TimeMaskablePPO) and model.time_horizon_s == 6 * 3600.0
    model.set_logger(configure(str(tmp_path), []))
    model._setup_learn(1024, None)
    seen: list[np.ndarray] = []
    step = venv.step_wait

    def spy():
        out = step()
        seen.append(np.array([i["elapsed"] for i in out[3]]))
        return out

    venv.step_wait = spy
    cb = CallbackList([])
    cb.init_callback(model)
    model.collect_rollouts(model.env, cb, model.rollout_buffer, model.n_steps)
    buf = model.rollout_buffer
    np.testing.assert_array_equal(buf.elapsed, np.stack(seen))
    assert (buf.elapsed == 0).any() and (buf.elapsed > 0).any()  # sub-steps and commits
    path = tmp_path / "m.zip"
    model.save(path)
    assert type(MaskablePPO.load(path, device="cpu")) is MaskablePPO
    again = TimeMaskablePPO.load(path, device="cpu")
    assert again.time_horizon_s == 6 * 3600.0


def test_teacher_and_time_discount_combine_and_bad_horizons_fail(tmp_path):
    from timegae import TimeMaskablePPO, TimeTeacherMaskablePPO

    from aryl_gym.train.runner import model_class

    cfg = _tiny(tmp_path, teacher={"policy": "aryl"})
    assert model_class(cfg) is TimeTeacherMaskablePPO
    assert model_class(_tiny(tmp_path)) is TimeMaskablePPO
    for bad in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="time_horizon_hours"):
            TimeMaskablePPO("MlpPolicy", "CartPole-v1", time_horizon_hours=bad)
    with pytest.raises(ConfigError, match="model_class"):
        _tiny(tmp_path, model_class="timegae.TimeMaskablePPO")  # not module:Class
