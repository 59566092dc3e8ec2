"""Hostile-user pass (v11) over the command line: ``--out`` naming a folder of the user's, the
reproduce report's command line, resuming a run made before the batch-size check, and the
rollout memory of a recurrent policy. Each case failed before its fix (see the "was:" notes)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from aryl_gym.fileio import OWNER_FILE
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


# ----------------------------------------------------------------------------------------------
# 1. --out naming a non-empty folder that holds no results (a home folder, the current folder)
# ----------------------------------------------------------------------------------------------
def _users_folder(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n")
    (home / "leaderboard.md.txt").write_text("# my own table\n")
    return home


_REFUSED = {
    "leaderboard": ["leaderboard", "--suite", "quick", "--no-progress", "--out"],
    "reproduce": ["reproduce", "--scale", "tiny", "--seeds", "1", "--no-progress", "--out"],
    "seed-study": ["seed-study", "--scenario", "tiny", "--seeds", "0-1", "--out"],
    "calibrate": ["calibrate", "--load-grid", "0.4,0.8", "--scenario", "tiny", "--out"],
    "train-reclaim": ["train-reclaim", "--out"],
}


@pytest.mark.parametrize("command", sorted(_REFUSED))
def test_out_naming_a_users_folder_is_refused_untouched(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: the folder was claimed (.aryl-gym-owner, .lock) and filled with the command's files
    # among the user's (tables, plots, caches; --overwrite moved a results.csv of theirs aside)
    if command == "train-reclaim":
        pytest.importorskip("torch")
    home = _users_folder(tmp_path)
    before = sorted(p.name for p in home.iterdir())
    rc, _, err = _run([*_REFUSED[command], str(home)], capsys)
    assert rc == 2, err
    assert f"--out {home}: the folder is not empty" in err and "notes.txt" in err
    assert "new or empty folder" in err and f"aryl-gym {command}" in err
    assert sorted(p.name for p in home.iterdir()) == before  # no lock file, no marker, nothing moved
    assert (home / "notes.txt").read_text() == "mine\n"


def test_train_out_naming_a_users_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("stable_baselines3")
    home = _users_folder(tmp_path)
    rc, _, err = _run(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "64",
                       "--quiet", "--out", str(home)], capsys)
    assert rc == 2 and "the folder is not empty" in err and "aryl-gym train" in err
    assert sorted(p.name for p in home.iterdir()) == ["leaderboard.md.txt", "notes.txt"]  # no run folder


def test_own_earlier_output_and_empty_folders_are_accepted(tmp_path: Path) -> None:
    """A folder of the command's own (its marker, or what an older version wrote before markers
    existed) and an empty one (or one holding only the lock file) are not refused."""
    from aryl_gym.fileio import check_out_folder

    for command, name in (("leaderboard", "results.csv"), ("leaderboard", "leaderboard.json"),
                          ("reproduce", "reproduction.md"), ("seed-study", "results.csv"),
                          ("train-reclaim", "reclaim-agent.npz")):
        d = tmp_path / f"{command}-{name}"
        d.mkdir()
        # a results.csv counts with the header of ours only (test_review_v11: a user's own one)
        (d / name).write_text("suite,scenario\n" if name == "results.csv" else "x")
        (d / "notes.txt").write_text("x")
        check_out_folder(d, command)
    runs = tmp_path / "runs"
    (runs / "tiny__ppo__0__20260101-000000").mkdir(parents=True)
    for n in ("config.yaml", "commit.txt"):
        (runs / "tiny__ppo__0__20260101-000000" / n).write_text("x")
    (runs / "README").write_text("my runs\n")
    check_out_folder(runs, "train")  # an older train parent folder (no marker)
    owned = tmp_path / "owned"
    owned.mkdir()
    (owned / OWNER_FILE).write_text("calibrate\n")
    (owned / "notes.txt").write_text("x")
    check_out_folder(owned, "calibrate")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".lock").write_text("")
    check_out_folder(empty, "reproduce")
    check_out_folder(tmp_path / "missing", "reproduce")
    parent = tmp_path / "parent"  # runs/ holding only train-reclaim's runs/reclaim-agent-seed0
    (parent / "reclaim-agent-seed0").mkdir(parents=True)
    (parent / "reclaim-agent-seed0" / OWNER_FILE).write_text("train-reclaim\n")
    check_out_folder(parent, "train")
    from aryl_gym.config import ConfigError

    with pytest.raises(ConfigError, match="not empty"):  # a config.json is no train-reclaim run
        d = tmp_path / "cj"
        d.mkdir()
        (d / "config.json").write_text("{}")
        check_out_folder(d, "train-reclaim")


# ----------------------------------------------------------------------------------------------
# 2. the reproduce report's command line names no machine-local folder
# ----------------------------------------------------------------------------------------------
def test_reproduce_report_names_no_local_out_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # was: "aryl-gym reproduce ... --out /tmp/sw-mid" under "Made by" (in docs/reproduction.md too)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "cache"
    argv = ["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "jct-aryl-baseline", "--no-progress"]
    rc, _, err = _run([*argv, "--out", str(out)], capsys)
    assert rc == 0, err
    md = (out / "reproduction.md").read_text()
    assert "Made by (at commit" in md
    assert str(tmp_path) not in md and "/tmp" not in md
    assert "aryl-gym reproduce --scale tiny --seeds 1 --rows jct-aryl-baseline\n" in md
    # a folder under the current one is named relative to it; one elsewhere not at all
    monkeypatch.chdir(tmp_path)
    from aryl_gym.commands.reproduce import portable_out

    assert portable_out(tmp_path / "rel") == "rel" and portable_out(Path("a/b")) == "a/b"
    assert portable_out(Path("../x")) is None and portable_out(Path("/")) is None


# ----------------------------------------------------------------------------------------------
# 3. resuming a run whose saved batch_size the newer check refuses
# ----------------------------------------------------------------------------------------------
def _old_run(tmp_path: Path, batch: int) -> Path:
    """A run folder of a version before the batch-size check: n_steps 32, one env, ``batch``."""
    from aryl_gym.train.config import load_train_config

    cfg = load_train_config("maskable_ppo", "tiny", {"n_envs": 1, "eval": {"freq": 0},
                                                     "hyperparams": {"n_steps": 32, "batch_size": 16}})
    data = cfg.to_dict()
    data["hyperparams"]["batch_size"] = batch
    run = tmp_path / "runs" / "tiny__maskable_ppo__0__20260101-000000"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (run / "commit.txt").write_text("0123456789ab\n")
    ck = run / "checkpoints" / "rl_model_32_steps.zip"
    ck.write_bytes(b"not a zip")
    return ck


def test_resume_of_a_run_made_before_the_batch_check_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: "batch_size: 24 does not divide the rollout ... give a batch_size that divides 32",
    # and --set batch_size=16 was then refused as a change a resumed model ignores: no way on
    pytest.importorskip("stable_baselines3")
    ck = _old_run(tmp_path, 24)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc, _, err = _run(["train", "--resume", str(ck), "--timesteps", "64", "--quiet"], capsys)
    msgs = [str(w.message) for w in caught]
    assert any("batch_size: 24 does not divide" in m and "resumed as saved" in m for m in msgs), msgs
    # past the check: here the (fake) checkpoint itself is what stops the resume
    assert rc == 2 and "batch_size" not in err and "not a complete model .zip" in err


def test_resume_with_other_n_envs_names_the_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("stable_baselines3")
    ck = _old_run(tmp_path, 24)  # with the run's one env: a warning (above); with two, 24 of 64:
    rc, _, err = _run(["train", "--resume", str(ck), "--timesteps", "64", "--n-envs", "2", "--quiet"], capsys)
    assert rc == 2 and "resume it with --n-envs 1 (or leave out --n-envs)" in err


def test_resume_of_a_nan_batch_names_init_from(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from aryl_gym.config import ConfigError
    from aryl_gym.train.config import check_rollout_sizes

    with pytest.raises(ConfigError, match="--init-from run/ck.zip --set batch_size"):
        check_rollout_sizes(PPO, {"n_steps": 8, "batch_size": 1}, 1, resume="run/ck.zip")
    with pytest.raises(ConfigError, match="give a batch_size that divides"):  # a new run: still an error
        check_rollout_sizes(PPO, {"n_steps": 8, "batch_size": 3}, 1)


# ----------------------------------------------------------------------------------------------
# 4. the rollout memory of a recurrent policy counts its LSTM states
# ----------------------------------------------------------------------------------------------
def test_recurrent_rollout_memory_counts_lstm_states() -> None:
    # was: RecurrentPPO's buffer counted as PPO's: its four LSTM state arrays left out
    sb3c = pytest.importorskip("sb3_contrib")
    from gymnasium import spaces
    from stable_baselines3 import PPO

    from aryl_gym.train.runner import rollout_bytes

    obs, act = spaces.Box(0, 1, (8,)), spaces.Discrete(5)
    hp = {"n_steps": 16}
    plain = rollout_bytes(PPO, hp, 2, obs, act)
    assert rollout_bytes(PPO, hp, 2, obs, act, {"lstm_hidden_size": 64}) == plain  # no LSTM: as before
    rec = rollout_bytes(sb3c.RecurrentPPO, hp, 2, obs, act, {"lstm_hidden_size": 64, "n_lstm_layers": 2})
    assert rec == plain + 2 * 16 * 2 * (4 * 4 * 64 * 2)
    default = rollout_bytes(sb3c.RecurrentPPO, hp, 2, obs, act)  # sb3-contrib's 256 units, 1 layer
    assert default == plain + 2 * 16 * 2 * (4 * 4 * 256)


def test_recurrent_memory_check_refuses_on_the_lstm_states(monkeypatch: pytest.MonkeyPatch) -> None:
    sb3c = pytest.importorskip("sb3_contrib")
    from gymnasium import spaces

    from aryl_gym.config import ConfigError
    from aryl_gym.train import runner

    obs, act = spaces.Box(0, 1, (1,)), spaces.Discrete(2)
    hp = {"n_steps": 1000}
    small = runner.rollout_bytes(sb3c.RecurrentPPO, hp, 1, obs, act, {"lstm_hidden_size": 1})
    monkeypatch.setattr(runner, "available_memory", lambda: 2 * small)
    runner.check_rollout_memory(sb3c.RecurrentPPO, hp, 1, obs, act, "cfg", {"lstm_hidden_size": 1})
    with pytest.raises(ConfigError, match="LSTM states"):
        runner.check_rollout_memory(sb3c.RecurrentPPO, hp, 1, obs, act, "cfg", {"lstm_hidden_size": 512})
