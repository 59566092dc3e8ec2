"""Hostile-user pass over ``aryl-gym train`` (v8): rollout and mini-batch sizes, and what
``--resume`` can and cannot change. Each test failed on the code before its fix."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from aryl_gym.cli import main
from aryl_gym.config import ConfigError
from aryl_gym.train.config import algo_class, check_rollout_sizes, load_train_config

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "configs" / "algos" / "ppo.yaml"

SMALL = textwrap.dedent("""\
    algo: maskable_ppo
    default:
      env_kwargs: {action_mode: sequential}
      n_envs: 1
      total_timesteps: 64
      policy_kwargs: {net_arch: [8]}
      hyperparams: {n_steps: 32, batch_size: 32, n_epochs: 1}
      checkpoint_freq: 0
      eval: {freq: 0}
    """)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``aryl-gym ARGV``: exit code and stderr."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    return rc, capsys.readouterr().err


def _dirs(p: Path) -> list[Path]:
    return sorted(d for d in p.iterdir() if d.is_dir()) if p.exists() else []


# -- batch_size against the rollout ----------------------------------------------------------------
@pytest.mark.parametrize("hp, n_envs, match", [
    # was: trained on with mini-batches of 32 (the rollout), not 64, without a word
    ({"n_steps": 32, "batch_size": 64}, 1, r"batch_size: 64 is larger than the rollout n_steps \* n_envs "
                                           r"= 32 \* 1 = 32 .*e\.g\. 32"),
    # was: a last mini-batch of one step: NaN advantages, a torch error mid-run
    ({"n_steps": 65, "batch_size": 64}, 1, r"batch_size: 64 does not divide .* = 65 .*mini-batch of 1.*e\.g\. 13"),
    ({"n_steps": 64, "batch_size": 1}, 1, r"batch_size: 1 is one step per mini-batch"),
    ({"n_steps": 1, "batch_size": 1}, 1, r"n_steps \* n_envs = 1 \* 1 = 1 step per rollout"),
    ({"n_steps": 128, "batch_size": 256}, 3, r"batch_size: 256 does not divide .* = 128 \* 3 = 384.*e\.g\. 192"),
])
def test_batch_size_must_fit_the_rollout(hp: dict[str, Any], n_envs: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_rollout_sizes(algo_class("maskable_ppo"), hp, n_envs, "cfg")


@pytest.mark.parametrize("algo, hp, n_envs", [
    ("maskable_ppo", {"n_steps": 256, "batch_size": 128}, 3),
    ("maskable_ppo", {"n_steps": 2.56e2, "batch_size": 1.28e2}, 1),  # whole floats, as YAML reads 2.56e2
    ("maskable_ppo", {}, 1),  # the algorithm's own defaults (2048, 64)
    ("ppo", {"n_steps": 64, "batch_size": 1, "normalize_advantage": False}, 1),
    ("a2c", {"n_steps": 5}, 1),  # no mini-batches
])
def test_batch_sizes_that_fit_are_accepted(algo: str, hp: dict[str, Any], n_envs: int) -> None:
    check_rollout_sizes(algo_class(algo), hp, n_envs, "cfg")


def test_batch_size_larger_than_the_rollout_fails_before_a_run_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "small.yaml"
    cfg.write_text(SMALL)
    out = tmp_path / "runs"
    rc, err = _cli(["train", "--config", str(cfg), "--scenario", "tiny", "--quiet", "--out", str(out),
                    "--set", "batch_size=64"], capsys)
    assert rc == 2 and "batch_size: 64 is larger than the rollout" in err
    assert "Traceback" not in err and not _dirs(out)


# -- --resume ---------------------------------------------------------------------------------------
@pytest.fixture()
def saved_run(tmp_path: Path) -> Path:
    """A run folder (config.yaml + model.zip, no training) of SMALL on tiny."""
    # runner imports torch and stable-baselines3: only the tests that save a model need them
    from aryl_gym.train.runner import build_model, make_vec_env

    (tmp_path / "small.yaml").write_text(SMALL)
    cfg = load_train_config(tmp_path / "small.yaml", "tiny")
    run = tmp_path / "runs" / "tiny__maskable_ppo__0__20260101-000000"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    venv = make_vec_env(cfg)
    build_model(cfg, venv).save(run / "model.zip")
    venv.close()
    return run


@pytest.mark.parametrize("extra, match", [
    # was: trained on at the saved rate (MaskablePPO's default) while config.yaml was rewritten to say 0.5
    (["--set", "learning_rate=0.5"], r"hyperparams\.learning_rate 0\.5 \(the run has it unset\).*--init-from"),
    # was: a TypeError traceback from SB3's load (MaskablePPO's policy given PPO's arguments)
    (["--config", str(PPO), "--scenario", "tiny", "--set", "n_steps=32", "--set", "batch_size=32"],
     r"holds a MaskableMultiInputActorCriticPolicy, but this config trains ppo"),
    # was: SB3's "Observation spaces do not match" traceback
    (["--env", "window=8"], r"observation space differs from this config's env"),
])
def test_resume_refuses_what_the_checkpoint_cannot_take(extra: list[str], match: str, saved_run: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    before = (saved_run / "config.yaml").read_text()
    rc, err = _cli(["train", "--resume", str(saved_run / "model.zip"), "--timesteps", "512", "--quiet",
                    "--n-envs", "1", *extra], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(match, err), err
    # nothing written: the run's config is as it was, no args-resume file, no other run folder
    assert (saved_run / "config.yaml").read_text() == before
    assert sorted(p.name for p in saved_run.iterdir()) == ["config.yaml", "model.zip"]
    assert _dirs(saved_run.parent) == [saved_run]


def test_bare_checkpoint_of_another_algorithm_is_refused(saved_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.zip"
    bare.write_bytes((saved_run / "model.zip").read_bytes())
    out = tmp_path / "out"
    rc, err = _cli(["train", "--resume", str(bare), "--config", str(PPO), "--scenario", "tiny", "--quiet",
                    "--n-envs", "1", "--timesteps", "512", "--set", "n_steps=32", "--set", "batch_size=32",
                    "--out", str(out)], capsys)
    assert rc == 2 and "but this config trains ppo" in err and not _dirs(out)


# -- policy and policy_kwargs ------------------------------------------------------------------------
@pytest.mark.parametrize("section, match", [
    # was: SB3's TypeError traceback ("unexpected keyword argument 'foo'"), after the run folder
    ("  policy_kwargs: {net_arch: [8], foo: 1}", r"policy_kwargs \{.*'foo': 1\}: MaskableMultiInputActorCriticPolicy "
                                                  r"rejects them: .*unexpected keyword argument 'foo'"),
    # was: torch's TypeError traceback deep in the network's construction
    ("  policy_kwargs: {net_arch: abc}", r"policy_kwargs \{'net_arch': 'abc'\}: .* rejects them"),
    # was: "Policy NoSuchPolicy unknown", after the run folder was made
    ("  policy: NoSuchPolicy", r"policy 'NoSuchPolicy': not a policy of MaskablePPO; choose one of .*MultiInputPolicy"),
    # was: a clear message, but after the run folder was made
    ("  policy_kwargs: {activation_fn: bogus}", r"activation_fn 'bogus' unknown"),
])
def test_bad_policy_settings_fail_before_a_run_folder(section: str, match: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(SMALL.replace("  policy_kwargs: {net_arch: [8]}\n", "") + section + "\n")
    out = tmp_path / "runs"
    rc, err = _cli(["train", "--config", str(cfg), "--scenario", "tiny", "--quiet", "--out", str(out)], capsys)
    assert rc == 2 and "Traceback" not in err and re.search(match, err), err
    assert not _dirs(out)


# -- evaluate ------------------------------------------------------------------------------------------
def test_evaluate_a_model_whose_config_names_another_algo(saved_run: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a TypeError traceback from SB3 (PPO building the MaskablePPO zip's policy)."""
    conf = saved_run / "config.yaml"
    conf.write_text(conf.read_text().replace("algo: maskable_ppo", "algo: ppo", 1))
    rc, err = _cli(["evaluate", "--agent", str(saved_run / "model.zip"), "--scenario", "tiny", "--seeds", "1000",
                    "--no-progress"], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert "cannot load" in err and "says algo: ppo" in err and "restore the config" in err


# -- evaluation seeds ------------------------------------------------------------------------------------
def test_eval_seeds_among_the_training_seeds_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: accepted; env 0's first training episode and the evaluation played the same trace."""
    # runner imports torch and stable-baselines3: only the tests that need them
    from aryl_gym.train.runner import preflight

    cfg = tmp_path / "small.yaml"
    cfg.write_text(SMALL)
    out = tmp_path / "runs"
    rc, err = _cli(["train", "--config", str(cfg), "--scenario", "tiny", "--quiet", "--out", str(out),
                    "--seed", "7", "--eval-freq", "32", "--eval-seeds", "5-7"], capsys)
    assert rc == 2 and "eval.seeds 7 is also a training seed (--seed 7 with n_envs 1 trains on seeds 7-7" in err and not _dirs(out)
    preflight(load_train_config(cfg, "tiny", {"seed": 7, "eval": {"freq": 32, "seeds": [8, 9]}}))
    preflight(load_train_config(cfg, "tiny", {"seed": 7, "eval": {"freq": 0, "seeds": [7]}}))  # no evaluation
