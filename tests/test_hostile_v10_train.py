"""Hostile pass on the training preflight (rollout sizes and memory), the algorithm files'
section warning and the demonstrations check: false refusals of legitimate setups."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from aryl_gym.config import list_scenarios  # noqa: E402
from aryl_gym.train.config import check_rollout_sizes, load_train_config  # noqa: E402


def _dqn_yaml(tmp_path: Path) -> Path:
    p = tmp_path / "dqn.yaml"
    p.write_text("algo: dqn\ndefault:\n  n_envs: 2\n  total_timesteps: 128\n  eval: {freq: 0}\n"
                 "  env_kwargs: {action_mode: sequential}\n")
    return p


def test_dqn_defaults_are_not_a_rollout() -> None:
    """DQN's n_steps is the n-step return (1 by default) and its batch_size a replay-buffer
    sample: was refused as 'batch_size 32 is larger than the rollout n_steps * n_envs = 1 * 2'."""
    from stable_baselines3 import DQN

    check_rollout_sizes(DQN, {}, 2)
    check_rollout_sizes(DQN, {"n_steps": 3, "batch_size": 64}, 1)


def test_dqn_rollout_memory_is_not_counted() -> None:
    """The rollout memory estimate is for on-policy rollouts; DQN has none (was: n_steps x n_envs
    steps counted as one)."""
    from gymnasium import spaces
    from stable_baselines3 import DQN

    from aryl_gym.train.runner import rollout_bytes

    obs = spaces.Box(0, 1, (8,))
    assert rollout_bytes(DQN, {"n_steps": 3}, 4, obs, spaces.Discrete(5)) is None


def test_dqn_config_passes_preflight(tmp_path: Path) -> None:
    from aryl_gym.train.runner import preflight

    cfg = load_train_config(_dqn_yaml(tmp_path), "tiny")
    preflight(cfg)  # was: a ConfigError about batch_size and the rollout


@pytest.mark.parametrize("mode", ["targets", "priority"])
def test_minari_records_window_actions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """``aryl-gym demos --format minari --action-mode targets`` (or priority): was 'cannot reshape
    array of size 16 into shape ()' after the episodes ran; now the dataset holds one action row
    per step, as the .npz format does, and passes the --bc-demos check."""
    pytest.importorskip("minari")
    import numpy as np

    from aryl_gym.offline import write_dataset
    from aryl_gym.train.bc import check_demos, load_demos

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    ds_id = f"aryl_gym/tiny/{mode}-v0"
    write_dataset(ds_id, "tiny", "aryl", 1, 0, action_mode=mode, window=16)
    _obs, actions, _masks = load_demos(f"minari:{ds_id}")
    assert actions.ndim == 2 and actions.shape[1] == 16
    assert actions.dtype == (np.int64 if mode == "targets" else np.float32)
    assert check_demos(f"minari:{ds_id}") == len(actions)


def test_shipped_algo_files_load_without_section_warnings() -> None:
    """Guard: every shipped algorithm file, on every shipped scenario, loads without a warning
    about its sections."""
    root = Path(__file__).resolve().parents[1] / "configs" / "algos"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for p in sorted(root.glob("*.yaml")):
            for scen in list_scenarios():
                load_train_config(p, scen)


# -- an algorithm that cannot act in the mode's action space: named as such ----------------------
@pytest.mark.parametrize("algo, mode", [("dqn", "targets"), ("maskable_ppo", "priority"), ("dqn", "priority")])
def test_an_action_mode_the_algo_cannot_act_in_is_named(algo: str, mode: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Was: SB3's policy failed on the space ("'MultiDiscrete' object has no attribute 'n'",
    "not implemented for action space of type Box"), reported as a fault of policy_kwargs."""
    from tests.test_hostile_v2 import _run

    cfg = tmp_path / "algo.yaml"
    cfg.write_text(f"algo: {algo}\ndefault:\n  env_kwargs: {{action_mode: {mode}}}\n  n_envs: 1\n"
                   "  total_timesteps: 64\n  checkpoint_freq: 0\n  eval: {freq: 0}\n")
    out = tmp_path / "runs"
    rc, _, err = _run(["train", "--config", str(cfg), "--scenario", "tiny", "--out", str(out), "--quiet"], capsys)
    assert rc == 2, err[-400:]
    assert f"action_mode '{mode}'" in err and "policy_kwargs" not in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow  # builds every algorithm on every action mode (torch)
def test_action_space_table_is_sb3s() -> None:
    """ACTION_SPACES says what each SB3 class's constructor accepts."""
    pytest.importorskip("sb3_contrib")
    import gymnasium as gym

    from aryl_gym.train.config import ACTION_SPACES, MODE_SPACES, algo_class

    for mode, space in MODE_SPACES.items():
        env = gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode=mode)
        for algo, ok in ACTION_SPACES.items():
            cls = algo_class(algo)
            policy = "MultiInputLstmPolicy" if algo == "recurrent_ppo" else "MultiInputPolicy"
            try:
                cls(policy, env, device="cpu")
                built = True
            except AssertionError as exc:
                assert "only supports" in str(exc) or "support" in str(exc), str(exc)
                built = False
            assert built == (space in ok), (algo, mode)
        env.close()


def test_teacher_runs_get_the_rollout_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: with a teacher the model class is TeacherMaskablePPO, whose constructor passes
    ``**kwargs`` on, so the batch-size and rollout-memory checks saw no ``n_steps`` and skipped
    the run (one-step minibatches then gave NaN mid-run)."""
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import preflight
    from tests.test_hostile_v2 import _run

    cfg = tmp_path / "algo.yaml"
    cfg.write_text("algo: maskable_ppo\ndefault:\n  env_kwargs: {action_mode: sequential}\n  n_envs: 1\n"
                   "  total_timesteps: 64\n  hyperparams: {n_steps: 16, batch_size: 64, n_epochs: 1}\n"
                   "  teacher: {policy: aryl-preempt}\n  checkpoint_freq: 0\n  eval: {freq: 0}\n")
    out = tmp_path / "runs"
    rc, _, err = _run(["train", "--config", str(cfg), "--scenario", "tiny", "--out", str(out), "--quiet"], capsys)
    assert rc == 2 and "batch_size" in err, err[-400:]
    assert not out.exists() or not any(out.iterdir())
    # the shipped teacher recipe still passes
    preflight(load_train_config("maskable_ppo_set", scenario="testbed"))
