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
