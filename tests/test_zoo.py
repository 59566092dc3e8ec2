"""rl-baselines3-zoo: the shipped config, ``python -m aryl_gym.train.zoo`` and zoo folders as
leaderboard agents (issue 16)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("sb3_contrib", reason="needs the train extra")
pytest.importorskip("rl_zoo3", reason="needs the zoo extra (pip install 'aryl-gym[zoo]')")

from aryl_gym.config import configs_dir  # noqa: E402

CONF = configs_dir() / "algos" / "rl_zoo3.yml"
ZOO_KEYS = {"n_envs", "n_timesteps", "policy", "normalize", "env_kwargs", "policy_kwargs"}


def _conf() -> dict[str, Any]:
    return yaml.safe_load(CONF.read_text())


#: the env id is the config's one section (the zoo's layout): the only place to change it
ENV_ID = next(iter(_conf()))


def test_config_layout() -> None:
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    import aryl_gym  # noqa: F401

    conf = _conf()
    assert list(conf) == [ENV_ID] and ENV_ID in gym.envs.registry
    sec = conf[ENV_ID]
    accepted = set(inspect.signature(MaskablePPO.__init__).parameters)
    assert set(sec) - ZOO_KEYS <= accepted, set(sec) - ZOO_KEYS - accepted
    assert sec["policy"] == "MultiInputPolicy"
    gym.make(ENV_ID, **sec["env_kwargs"]).close()  # the env kwargs are valid


def test_register_ppo_mask() -> None:
    from rl_zoo3 import hyperparams_opt, utils
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.zoo import register_ppo_mask

    register_ppo_mask(masked_eval=False)
    assert utils.ALGOS["ppo_mask"] is MaskablePPO
    assert hyperparams_opt.HYPERPARAMS_SAMPLER["ppo_mask"] is hyperparams_opt.sample_ppo_params


def _fake_zoo_run(root: Path, run: int = 1, best: bool = True) -> Path:
    """A zoo folder as rl_zoo3 writes it, holding an untrained MaskablePPO."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    import aryl_gym  # noqa: F401

    env_name = ENV_ID.replace("/", "-")
    exp = root / "ppo_mask" / f"{env_name}_{run}"
    params = exp / env_name
    params.mkdir(parents=True)
    kwargs = {"scenario": "tiny", "action_mode": "sequential"}
    env = gym.make(ENV_ID, **kwargs)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, seed=run, device="cpu")
    model.save(exp / ("best_model.zip" if best else f"{env_name}.zip"))
    model.save(exp / "rl_model_64_steps.zip")
    env.close()
    args = OrderedDict([("algo", "ppo_mask"), ("env", ENV_ID), ("env_kwargs", kwargs), ("seed", run)])
    (params / "args.yml").write_text(yaml.dump(args))  # tagged OrderedDict, as the zoo writes it
    (params / "config.yml").write_text(yaml.dump(OrderedDict([("env_kwargs", kwargs), ("n_envs", 1)])))
    return exp


def test_zoo_folder_resolution(tmp_path: Path) -> None:
    from aryl_gym.agents.learned import find_zoo_experiment, load_agent, resolve_zoo_folder

    from aryl_gym.config import ConfigError

    e1 = _fake_zoo_run(tmp_path, 1, best=True)
    e2 = _fake_zoo_run(tmp_path, 2, best=False)
    assert find_zoo_experiment(e1) == e1
    assert find_zoo_experiment(tmp_path / "ppo_mask") == e2  # the latest run
    assert find_zoo_experiment(tmp_path) == e2  # a log root with one algorithm
    assert find_zoo_experiment(tmp_path / "ppo_mask" / e1.name / e1.name.rsplit("_", 1)[0]) is None
    model, cfg, vn = resolve_zoo_folder(e1)
    assert model.name == "best_model.zip" and vn is None
    assert cfg["algo"] == "maskable_ppo" and cfg["env_id"] == ENV_ID
    assert cfg["scenario"] == "tiny" and cfg["env_kwargs"] == {"action_mode": "sequential"}
    model, _, _ = resolve_zoo_folder(e2)
    assert model.name == f"{ENV_ID.replace('/', '-')}.zip"  # no best model: the final one
    (model).unlink()
    assert resolve_zoo_folder(e2)[0].name == "rl_model_64_steps.zip"  # then the last checkpoint
    agent = load_agent(str(e1))
    assert type(agent.model).__name__ == "MaskablePPO" and agent.masked
    env = agent.make_env(scenario="tiny")
    obs, _ = env.reset(seed=0)
    action, _ = agent.predict(obs, action_masks=env.unwrapped.action_masks())
    assert env.unwrapped.action_masks()[int(action)]
    env.close()
    (tmp_path / "other" / "ppo_mask").mkdir(parents=True)
    with pytest.raises(ConfigError, match="not an rl-zoo3 log folder"):
        resolve_zoo_folder(tmp_path / "other")


@pytest.mark.slow
def test_zoo_train_then_leaderboard(tmp_path: Path) -> None:
    """About 2,000 steps of ppo_mask through rl_zoo3.train, then the run on a leaderboard."""
    logs = tmp_path / "logs"
    cmd = [
        sys.executable, "-m", "aryl_gym.train.zoo", "--algo", "ppo_mask", "--env", ENV_ID,
        "--gym-packages", "aryl_gym", "-conf", str(CONF), "-f", str(logs), "-n", "2000",
        "--seed", "0", "--num-threads", "1", "--verbose", "0",
        "--env-kwargs", "scenario:'tiny'", "action_mode:'sequential'",
        "--eval-freq", "1000", "--eval-episodes", "1", "--save-freq", "1000",
    ]
    subprocess.run(cmd, check=True, cwd=tmp_path, stdout=subprocess.DEVNULL)
    env_name = ENV_ID.replace("/", "-")
    exp = logs / "ppo_mask" / f"{env_name}_1"
    for f in ("best_model.zip", f"{env_name}.zip", "rl_model_2000_steps.zip", f"{env_name}/args.yml"):
        assert (exp / f).exists(), f
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "zoo", "scenarios": ["tiny"], "seeds": [0], "baseline": "fifo", "env": ENV_ID,
        "policies": ["fifo"],
    }))
    from aryl_gym.cli import main as cli_main

    out = tmp_path / "lb"
    rc = cli_main(["leaderboard", "--suite", str(suite), "--out", str(out), "--workers", "1",
                   "--no-progress", "--no-plots", "--no-tensorboard", "--agent", f"zoo={logs / 'ppo_mask'}"])
    assert rc == 0
    data = json.loads((out / "leaderboard.json").read_text())
    names = {e["policy"]: e for e in data["scenarios"]["tiny"]["entrants"]}
    assert "zoo" in names and names["zoo"]["kind"] == "agent", data["skipped"]
    assert names["zoo"]["metrics"]["jobs_completed"]["mean"] > 0
