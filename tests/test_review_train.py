"""Hostile review of ``aryl-gym train``'s run handling: VecNormalize statistics on resume and on
loading a checkpoint, a killed run's last good checkpoint, ``--out`` a run folder, what a resume
may change, and config values that used to fail after the run folder was made. Each test failed
on the code before its fix."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from aryl_gym.config import ConfigError
from tests.test_hostile_v8_train import _cli  # aryl-gym ARGV: exit code and stderr

needs_sb3 = pytest.mark.skipif(
    importlib.util.find_spec("sb3_contrib") is None or importlib.util.find_spec("torch") is None,
    reason="needs the train extra (torch, stable-baselines3, sb3-contrib)")

SMALL = textwrap.dedent("""\
    algo: maskable_ppo
    default:
      env_kwargs: {action_mode: sequential}
      n_envs: 1
      total_timesteps: 64
      policy_kwargs: {net_arch: [8]}
      hyperparams: {n_steps: 32, batch_size: 32, n_epochs: 1}
      checkpoint_freq: 0
      normalize_obs: true
      eval: {freq: 0}
    """)


def _mean(vn: object) -> np.ndarray:
    rms = vn.obs_rms  # type: ignore[attr-defined]
    return np.asarray(rms[sorted(rms)[0]].mean)


@pytest.fixture(scope="module")
def norm_run_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder of a VecNormalize run (no training): checkpoints at 32 and 64 steps, each with
    its own statistics, model.zip + vecnormalize.pkl and best_model.zip + best_vecnormalize.pkl,
    every set of statistics told apart by its mean (32: +1, 64 and final: +2, best: +3)."""
    pytest.importorskip("sb3_contrib")
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import build_model, make_vec_env

    root = tmp_path_factory.mktemp("normrun")
    (root / "small.yaml").write_text(SMALL)
    cfg = load_train_config(root / "small.yaml", "tiny")
    run = root / "runs" / "tiny__maskable_ppo__0__20260101-000000"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (run / "commit.txt").write_text("unknown\n")
    venv = make_vec_env(cfg)
    model = build_model(cfg, venv)
    for steps, shift, names in ((32, 1.0, ["checkpoints/rl_model_32_steps.zip"]),
                                (64, 2.0, ["checkpoints/rl_model_64_steps.zip", "model.zip"]),
                                (64, 3.0, ["best_model.zip"])):
        for rms in venv.obs_rms.values():
            rms.mean = np.zeros_like(rms.mean) + shift
        model.num_timesteps = steps
        for n in names:
            model.save(run / n)
            vn = {"checkpoints/rl_model_32_steps.zip": "checkpoints/rl_model_vecnormalize_32_steps.pkl",
                  "checkpoints/rl_model_64_steps.zip": "checkpoints/rl_model_vecnormalize_64_steps.pkl",
                  "model.zip": "vecnormalize.pkl", "best_model.zip": "best_vecnormalize.pkl"}[n]
            venv.save(str(run / vn))
    venv.close()
    return run


@pytest.fixture()
def norm_run(norm_run_base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "runs" / norm_run_base.name
    shutil.copytree(norm_run_base, run)
    (tmp_path / "runs" / ".aryl-gym-owner").write_text("train\n")
    return run


# -- loading a model of a VecNormalize run (agents/learned.py) ---------------------------------
@needs_sb3
def test_a_checkpoint_loads_with_its_own_vecnormalize_statistics(norm_run: Path) -> None:
    """Was: ``load_agent(RUN/checkpoints/rl_model_N_steps.zip)`` looked for
    ``rl_model_N_steps_vecnormalize.pkl`` (SB3 writes ``rl_model_vecnormalize_N_steps.pkl``),
    found none and acted on raw observations without a word."""
    from agents.learned import load_agent

    agent = load_agent(norm_run / "checkpoints" / "rl_model_32_steps.zip")
    assert agent.obs_norm is not None
    assert np.all(_mean(agent.obs_norm) == 1.0)


@needs_sb3
def test_best_model_zip_loads_with_the_best_statistics(norm_run: Path) -> None:
    """Was: ``RUN/best_model.zip`` given as a file took ``vecnormalize.pkl`` (the final model's
    statistics) instead of ``best_vecnormalize.pkl``."""
    from agents.learned import load_agent

    agent = load_agent(norm_run / "best_model.zip")
    assert np.all(_mean(agent.obs_norm) == 3.0)
    assert np.all(_mean(load_agent(norm_run / "model.zip").obs_norm) == 2.0)  # unchanged


@needs_sb3
def test_a_normalising_model_without_its_statistics_is_refused(norm_run: Path) -> None:
    from agents.learned import load_agent

    (norm_run / "checkpoints" / "rl_model_vecnormalize_32_steps.pkl").unlink()
    with pytest.raises(ConfigError, match=r"normalises observations .* no VecNormalize statistics"):
        load_agent(norm_run / "checkpoints" / "rl_model_32_steps.zip")


@needs_sb3
def test_damaged_vecnormalize_statistics_are_named_on_load(norm_run: Path) -> None:
    """Was: the unpickler's own message ("invalid literal for int() ...") naming no file."""
    from agents.learned import load_agent

    (norm_run / "vecnormalize.pkl").write_text("garbage\n")
    with pytest.raises(ConfigError, match=r"vecnormalize\.pkl: the agent's VecNormalize statistics cannot be read"):
        load_agent(norm_run / "model.zip")


# -- resume ---------------------------------------------------------------------------------------
@needs_sb3
@pytest.mark.parametrize("damage", ["missing", "garbage", "cut"])
def test_resume_without_readable_vecnormalize_statistics_is_refused(
        damage: str, norm_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: missing, the run resumed with fresh statistics (observations scaled unlike those the
    policy was trained on), without a word; damaged, an unpickling traceback naming no file."""
    pkl = norm_run / "checkpoints" / "rl_model_vecnormalize_32_steps.pkl"
    if damage == "missing":
        pkl.unlink()
    elif damage == "garbage":
        pkl.write_text("garbage\n")
    else:
        pkl.write_bytes(pkl.read_bytes()[:100])
    (norm_run / "model.zip").unlink()  # the checkpoint at 64 is the latest state
    before = sorted(p.name for p in norm_run.rglob("*"))
    rc, err = _cli(["train", "--resume", str(norm_run / "checkpoints" / "rl_model_32_steps.zip"),
                    "--timesteps", "96", "--quiet"], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert "rl_model_vecnormalize_32_steps.pkl" in err
    assert ("are missing" in err and "rl_model_64_steps.zip has its statistics" in err) if damage == "missing" \
        else "cannot be read" in err
    assert sorted(p.name for p in norm_run.rglob("*")) == before
    assert sorted(p.name for p in norm_run.parent.iterdir()) == [".aryl-gym-owner", norm_run.name]


@needs_sb3
def test_last_good_checkpoint_of_a_killed_run_resumes_in_its_folder(norm_run: Path) -> None:
    """A kill during a checkpoint's save leaves a cut zip at a later step count. Was: counted as
    the run's later state, so resuming the last good checkpoint forked a new run folder, saying
    the run "went on to" steps it never saved."""
    from aryl_gym.train.runner import later_state, resume_plan

    (norm_run / "model.zip").unlink()
    (norm_run / "best_model.zip").unlink()
    ck64 = norm_run / "checkpoints" / "rl_model_64_steps.zip"
    ck64.write_bytes(ck64.read_bytes()[:3000])  # cut mid-save
    ck32 = norm_run / "checkpoints" / "rl_model_32_steps.zip"
    assert later_state(norm_run, 32) == []
    assert resume_plan(ck32, 200) == (norm_run, 32)


@needs_sb3
@pytest.mark.parametrize("extra, match", [
    (["--env", "reward_scale=100"], r"env_kwargs .*'reward_scale': 100.* \(the run has .*drop the change \(--env, or leave out --config"),
    (["--seed", "7"], r"seed 7 \(the run has 0\).*--init-from"),
    (["--eval-seeds", "2000-2002"], r"eval\.seeds \[2000, 2001, 2002\] \(the run has \[1000, 1001, 1002\]\)"),
])
def test_resume_keeps_the_runs_world_and_evaluation(extra: list[str], match: str, norm_run: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Was: accepted, and the run's config.yaml rewritten to claim the new setting for the whole
    run; new evaluation seeds were compared with the best score read back from eval.csv."""
    import re

    for p in ("model.zip", "vecnormalize.pkl", "best_model.zip", "best_vecnormalize.pkl"):
        (norm_run / p).unlink()
    before = (norm_run / "config.yaml").read_text()
    rc, err = _cli(["train", "--resume", str(norm_run / "checkpoints" / "rl_model_64_steps.zip"),
                    "--timesteps", "96", "--quiet", *extra], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert re.search(match, err), err
    assert (norm_run / "config.yaml").read_text() == before
    assert not list(norm_run.glob("args*.json"))


# -- --out ----------------------------------------------------------------------------------------
@needs_sb3
def test_out_pointing_at_a_run_folder_is_refused(norm_run: Path, tmp_path: Path) -> None:
    """Was: accepted (the run's tb/ passed for a run of examples/ppo_mask.py), the new run made
    inside the old one and the old run claimed as a folder of runs."""
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import new_run_dir

    (tmp_path / "small.yaml").write_text(SMALL)
    cfg = load_train_config(tmp_path / "small.yaml", "tiny")
    (norm_run / "tb").mkdir()
    (norm_run / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    before = sorted(p.name for p in norm_run.iterdir())
    with pytest.raises(ConfigError, match=r"is a training run folder itself .*--out .*runs\)"):
        new_run_dir(cfg, norm_run)
    assert sorted(p.name for p in norm_run.iterdir()) == before
    with pytest.raises(ConfigError, match=r"is a file, not a folder"):
        new_run_dir(cfg, norm_run / "config.yaml")


# -- config values that failed after the run folder was made -------------------------------------
def test_log_interval_zero_is_refused(tmp_path: Path) -> None:
    """Was: accepted; SB3's ``iteration % log_interval`` raised ZeroDivisionError mid-run."""
    from aryl_gym.train.config import load_train_config

    p = tmp_path / "a.yaml"
    p.write_text(SMALL + "  log_interval: 0\n")
    with pytest.raises(ConfigError, match=r"default\.log_interval must be >= 1, got 0"):
        load_train_config(p, "tiny")


@needs_sb3
def test_buffer_kwargs_are_checked() -> None:
    """Was: accepted; the buffer's constructor raised TypeError ("unexpected keyword argument
    'foo'", or "multiple values" for n_envs) after the run folder was made."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import DQN

    from aryl_gym.train.config import check_hyperparams

    for kw in ({"foo": 1}, {"n_envs": 2}):
        with pytest.raises(ConfigError, match=r"rollout_buffer_kwargs\.(foo|n_envs): not a setting"):
            check_hyperparams(MaskablePPO, {"rollout_buffer_kwargs": kw})
    check_hyperparams(MaskablePPO, {"rollout_buffer_kwargs": {}})
    check_hyperparams(DQN, {"replay_buffer_kwargs": {"handle_timeout_termination": False}})
    with pytest.raises(ConfigError, match=r"replay_buffer_kwargs\.foo"):
        check_hyperparams(DQN, {"replay_buffer_kwargs": {"foo": 1}})


@needs_sb3
def test_dqn_n_step_returns_on_the_dict_observation_are_refused(tmp_path: Path) -> None:
    """Was: SB3's "N-step returns are not supported for Dict observation spaces yet"
    AssertionError, a traceback after the run folder was made."""
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import preflight

    p = tmp_path / "dqn.yaml"
    p.write_text("algo: dqn\ndefault:\n  n_envs: 1\n  eval: {freq: 0}\n"
                 "  env_kwargs: {action_mode: sequential}\n  hyperparams: {n_steps: 3}\n")
    with pytest.raises(ConfigError, match=r"n_steps: 3: DQN's n-step returns need a flat observation"):
        preflight(load_train_config(p, "tiny"))
    p.write_text(p.read_text().replace("{n_steps: 3}", "{n_steps: 1}"))
    preflight(load_train_config(p, "tiny"))


@needs_sb3
def test_a_huge_batch_size_is_refused_at_once() -> None:
    """Was: the suggested batch_size was searched by trying every number up to the rollout: seconds
    to minutes for n_steps of 1e8 to 1e9."""
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.config import check_rollout_sizes

    tic = time.perf_counter()
    with pytest.raises(ConfigError, match=r"e\.g\. 100000000\)"):
        check_rollout_sizes(MaskablePPO, {"n_steps": 10**8, "batch_size": 10**8 + 1}, 1)
    with pytest.raises(ConfigError, match=r"e\.g\. 50000000\)"):
        check_rollout_sizes(MaskablePPO, {"n_steps": 10**8, "batch_size": 10**8 - 1}, 1)
    assert time.perf_counter() - tic < 1.0


# -- --init-from ------------------------------------------------------------------------------------
@needs_sb3
def test_init_from_another_network_fails_before_a_run_folder(
        norm_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a ConfigError after the run folder (config.yaml, commit.txt, tb/) was made, with
    torch's size-mismatch list of a dozen lines."""
    import re

    (tmp_path / "plain.yaml").write_text(SMALL.replace("normalize_obs: true", "normalize_obs: false")
                                         .replace("total_timesteps: 64", "total_timesteps: 32"))
    out = tmp_path / "out"
    argv = ["train", "--config", str(tmp_path / "plain.yaml"), "--scenario", "tiny", "--out", str(out),
            "--init-from", str(norm_run / "model.zip"), "--quiet"]
    rc, err = _cli([*argv, "--env", "window=8"], capsys)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert re.search(r"mlp_extractor\.policy_net\.0\.weight has shape \(8, \d+\) there, \(8, \d+\) here", err), err
    assert not out.exists() or not [p for p in out.iterdir() if p.is_dir()]
    rc, err = _cli(argv, capsys)  # the same network: a run
    assert rc == 0, err


@needs_sb3
def test_resume_does_not_need_the_file_the_run_started_from(norm_run: Path, tmp_path: Path) -> None:
    """A run started with ``--init-from X`` records X; its resume continues from the checkpoint.
    Was: refused ("init_from X: file not found") once X was moved or deleted."""
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import preflight

    cfg = load_train_config(_small(tmp_path), "tiny")
    cfg = cfg.replace(init_from=str(tmp_path / "gone" / "warm_start.zip"))
    with pytest.raises(ConfigError, match="file not found"):
        preflight(cfg)  # a new run does need it
    preflight(cfg, resume=norm_run / "checkpoints" / "rl_model_32_steps.zip")


def _small(tmp_path: Path) -> Path:
    (tmp_path / "small.yaml").write_text(SMALL)
    return tmp_path / "small.yaml"
