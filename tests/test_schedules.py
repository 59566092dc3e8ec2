"""Linear schedules written as text in an algorithm config (``learning_rate: lin_3.0e-4``)."""

from __future__ import annotations

import pickle

import pytest

from aryl_gym.config import ConfigError
from aryl_gym.train.schedules import LinearSchedule, parse_schedule, resolve_schedules
from tests.test_train import STUB_ID, _write_cfg


def test_linear_schedule_by_hand():
    s = parse_schedule("learning_rate", "lin_3.0e-4")
    assert s == LinearSchedule(3.0e-4)
    assert s(1.0) == pytest.approx(3.0e-4)
    assert s(0.25) == pytest.approx(0.75e-4)
    assert s(0.0) == 0.0
    assert pickle.loads(pickle.dumps(s)) == s
    assert parse_schedule("clip_range", "lin_0.2")(0.5) == pytest.approx(0.1)
    # numbers and other values pass through unchanged
    assert parse_schedule("learning_rate", 1e-3) == 1e-3
    assert parse_schedule("device", "cpu") == "cpu"
    assert resolve_schedules({"learning_rate": "lin_1e-3", "n_steps": 64}) == {
        "learning_rate": LinearSchedule(1e-3), "n_steps": 64}


@pytest.mark.parametrize("key, value, match", [
    ("learning_rate", "lin_", "not a linear schedule"),
    ("learning_rate", "lin_abc", "not a linear schedule"),
    ("learning_rate", "lin_-1e-4", "not a linear schedule"),
    ("learning_rate", "lin_0", "not a linear schedule"),
    ("learning_rate", "lin_nan", "not a linear schedule"),
    ("clip_range", "lin_inf", "not a linear schedule"),
    ("ent_coef", "lin_0.01", "only learning_rate, clip_range, clip_range_vf take a schedule"),
])
def test_bad_schedules_name_the_fix(key, value, match):
    with pytest.raises(ConfigError, match=match):
        parse_schedule(key, value)
    from stable_baselines3 import PPO

    from aryl_gym.train.config import check_hyperparams

    with pytest.raises(ConfigError, match=match):
        check_hyperparams(PPO, {key: value})


def test_training_decays_the_learning_rate_to_zero(tmp_path):
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import build_model, make_vec_env

    p = _write_cfg(tmp_path, STUB_ID)
    p.write_text(p.read_text().replace("{n_steps: 128,", "{learning_rate: lin_1.0e-3, n_steps: 128,"))
    cfg = load_train_config(p, "tiny")
    assert cfg.hyperparams["learning_rate"] == "lin_1.0e-3"
    model = build_model(cfg, make_vec_env(cfg))
    assert model.lr_schedule(1.0) == pytest.approx(1e-3)
    from stable_baselines3.common.callbacks import BaseCallback

    seen: list[float] = []

    class Rates(BaseCallback):
        def _on_rollout_start(self) -> None:  # after the previous update
            seen.append(self.model.policy.optimizer.param_groups[0]["lr"])

        def _on_step(self) -> bool:
            return True

    model.learn(768, callback=Rates())
    # rollouts of 2 x 128 = 256 steps; SB3 sets the rate from progress_remaining before each
    # update: 1e-3 * (1 - 256/768) after the first, 1e-3 * (1 - 512/768) after the second
    assert seen[1:] == pytest.approx([1e-3 * 2 / 3, 1e-3 / 3])
    assert model.policy.optimizer.param_groups[0]["lr"] == 0.0  # the last update, at the end


def test_linear_schedule_equals_rl_zoo3s():
    """The same numbers as rl-baselines3-zoo's ``linear_schedule`` for the same text."""
    utils = pytest.importorskip("rl_zoo3.utils")
    for text in ("lin_3.0e-4", "lin_0.2", "lin_1e-3", "lin_7.5"):
        ours = parse_schedule("learning_rate", text)
        theirs = utils.linear_schedule(text.split("_")[1])  # rl_zoo3's own parsing of lin_X
        for p in (1.0, 0.75, 0.5, 1 / 3, 0.1, 0.0):
            assert ours(p) == theirs(p)


def test_a_pickled_schedule_loads_without_rl_zoo3(tmp_path):
    """Why the schedule is ours: a saved model carries it by reference to its class, and it
    must load where the zoo extra is absent."""
    import subprocess
    import sys

    (tmp_path / "s.pkl").write_bytes(pickle.dumps(parse_schedule("learning_rate", "lin_3.0e-4")))
    code = (
        "import pickle, sys\n"
        "sys.modules['rl_zoo3'] = None  # as if the zoo extra were not installed\n"
        f"s = pickle.loads(open({str(tmp_path / 's.pkl')!r}, 'rb').read())\n"
        "assert s(0.5) == 1.5e-4\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
