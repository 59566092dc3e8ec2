"""Hostile-user pass (v9): ``demos --episodes`` bounds, damaged rewards in demonstrations,
nested Minari dataset ids, ``examples/ppo_mask.py``'s run folder, ``train``'s rollout memory and
misspelled scenario sections of an algorithm file. Each test failed on the code before its fix
(see the "was:" comments)."""

from __future__ import annotations

import argparse
import io
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.config import ConfigError
from tests import test_hostile_v8_offline as _v8_offline
from tests.test_hostile_v2 import _run
from tests.test_hostile_v8_offline import _script as _ppo_script
from tests.test_hostile_v8_train import SMALL

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "ppo_mask.py"

SMALL_ALGO = SMALL  # a short maskable_ppo run (test_hostile_v8_train)


minari_root = _v8_offline.minari_root  # the fixture: a temporary MINARI_DATASETS_PATH
_cli = _run  # aryl-gym ARGV: exit code, stdout, stderr (test_hostile_v2)


def _no_recording(*a: object, **k: object) -> None:
    raise AssertionError("episodes were recorded")


# ---------------------------------------------------------------------------------------------
# 1. demos --episodes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["npz", "minari"])
def test_demos_refuses_a_huge_episode_count_up_front(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """was: --episodes 1e12 started recording, keeping every step in memory, for ever."""
    import aryl_gym.commands.demos as demos
    import aryl_gym.offline as offline

    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    monkeypatch.setattr(demos, "record", _no_recording)
    monkeypatch.setattr(offline, "record_episodes", _no_recording)
    out = ["--out", str(tmp_path / "d.npz")] if fmt == "npz" else ["--minari-path", str(tmp_path / "m")]
    rc, _, err = _cli(["demos", "--scenario", "tiny", "--format", fmt, "--episodes", "1e12", *out], capsys)
    assert rc == 2 and "--episodes" in err and "at most 100,000 per run" in err
    assert not (tmp_path / "d.npz").exists() and not (tmp_path / "m").exists()


def test_demos_episode_bound_is_the_seed_bound_and_can_be_lifted(monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym.commands._common import MAX_SEEDS
    from aryl_gym.commands.demos import episodes_arg

    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    assert episodes_arg(str(MAX_SEEDS)) == MAX_SEEDS
    with pytest.raises(argparse.ArgumentTypeError, match="ARYL_GYM_ALLOW_HUGE=1"):
        episodes_arg(str(MAX_SEEDS + 1))
    monkeypatch.setenv("ARYL_GYM_ALLOW_HUGE", "1")
    assert episodes_arg("1e12") == 10**12


# ---------------------------------------------------------------------------------------------
# 2. discounted_returns: damaged rewards
# ---------------------------------------------------------------------------------------------
def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _demos(path: Path, rewards: bytes | None = None, n: int = 10, n_ends: int | None = None,
           reward_values: np.ndarray | None = None) -> Path:
    """A demonstrations ``.npz`` whose observations and actions are sound (``load_demos`` reads
    it), with the given ``rewards`` member (raw bytes) or values."""
    r = reward_values if reward_values is not None else np.ones(n, np.float32)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("obs_x.npy", _npy(np.zeros((n, 3), np.float32)))
        z.writestr("actions.npy", _npy(np.zeros(n, np.int64)))
        z.writestr("rewards.npy", rewards if rewards is not None else _npy(r))
        z.writestr("dones.npy", _npy(np.zeros(n if n_ends is None else n_ends, bool)))
    return path


@pytest.mark.parametrize("case, says", [
    ("cut", "damaged or unreadable .npz"),  # was: numpy's "EOF: reading array data"
    ("ends", "episode ends"),               # was: IndexError: index 9 is out of bounds
    ("text", "not numbers"),                # was: could not convert string to float
    ("nan", "not a finite number"),         # was: NaN returns, then a NaN value head
    ("gone", "file not found"),             # was: FileNotFoundError's bare path
])
def test_discounted_returns_of_damaged_demonstrations_name_the_file(case: str, says: str, tmp_path: Path) -> None:
    from aryl_gym.train.bc import discounted_returns, load_demos

    p = tmp_path / f"{case}.npz"
    if case == "cut":
        _demos(p, rewards=_npy(np.ones(10, np.float32))[:-12])
        load_demos(p)  # the observations and actions load: only the rewards are cut
    elif case == "ends":
        _demos(p, n_ends=4)
    elif case == "text":
        _demos(p, reward_values=np.array(["a"] * 10))
    elif case == "nan":
        _demos(p, reward_values=np.r_[np.ones(9), np.nan])
    with pytest.raises(ConfigError, match=rf"--bc-demos {p}: .*{says}"):
        discounted_returns(p, 0.99)


def test_sound_demonstrations_still_give_their_returns(tmp_path: Path) -> None:
    from aryl_gym.train.bc import check_demos, discounted_returns

    p = _demos(tmp_path / "ok.npz")
    ret = discounted_returns(p, 1.0)
    assert ret is not None and ret[0] == pytest.approx(10.0) and check_demos(p) == 10
    with pytest.raises(ConfigError, match="8 rewards but 10 actions"):
        check_demos(_demos(tmp_path / "short.npz", reward_values=np.ones(8), n_ends=8))


def test_train_refuses_damaged_rewards_before_the_run_folder(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """was: preflight read only the observations and actions; the run folder was made and
    behaviour cloning failed on the cut rewards with numpy's message."""
    pytest.importorskip("sb3_contrib")
    from aryl_gym.commands.demos import record

    arrays = record("tiny", "fifo", 1, 0, "sequential", 16)
    good = io.BytesIO()
    np.savez(good, **arrays)  # type: ignore[arg-type]
    bad = tmp_path / "cut.npz"
    with zipfile.ZipFile(io.BytesIO(good.getvalue())) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, data[:-16] if name == "rewards.npy" else data)
    algo = tmp_path / "small.yaml"
    algo.write_text(SMALL_ALGO)
    out = tmp_path / "runs"
    rc, _, err = _cli(["train", "--config", str(algo), "--scenario", "tiny", "--bc-demos", str(bad),
                       "--out", str(out), "--quiet"], capsys)
    assert rc == 2 and f"--bc-demos {bad}" in err and "damaged" in err
    assert not out.exists() or not any(out.iterdir())


# ---------------------------------------------------------------------------------------------
# 3. nested Minari dataset ids
# ---------------------------------------------------------------------------------------------


def _fake_dataset(root: Path, dataset_id: str) -> Path:
    """A folder that reads as a stored dataset (its ``data/metadata.json``)."""
    md = root / dataset_id / "data" / "metadata.json"
    md.parent.mkdir(parents=True)
    md.write_text("{}")
    return md


def test_a_dataset_inside_another_datasets_folder_is_refused(minari_root: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """was: tt/a-v0/b-v0 was written inside tt/a-v0, and replacing tt/a-v0 deleted it."""
    import aryl_gym.offline as offline

    monkeypatch.setattr(offline, "record_episodes", _no_recording)
    _fake_dataset(minari_root, "tt/a-v0")
    with pytest.raises(ValueError, match="tt/a-v0/b-v0 would sit inside dataset tt/a-v0's folder"):
        offline.write_dataset("tt/a-v0/b-v0", "tiny", "fifo", 1, 0)
    assert not (minari_root / "tt" / "a-v0" / "b-v0").exists()


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwriting_a_folder_that_holds_other_datasets_is_refused(overwrite: bool, minari_root: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """was: --overwrite of tt/a-v0 deleted the dataset tt/a-v0/b-v0 inside its folder (and
    without it: "tt/a-v0 exists", of a folder that was no dataset)."""
    import aryl_gym.offline as offline

    monkeypatch.setattr(offline, "record_episodes", _no_recording)
    inner = _fake_dataset(minari_root, "tt/a-v0/b-v0")
    if overwrite:
        _fake_dataset(minari_root, "tt/a-v0")
    with pytest.raises(ValueError, match=r"folder .* holds other datasets \(tt/a-v0/b-v0\)"):
        offline.write_dataset("tt/a-v0", "tiny", "fifo", 1, 0, overwrite=overwrite)
    assert inner.is_file()


def test_side_by_side_datasets_are_not_nested(minari_root: Path) -> None:
    from aryl_gym.offline import check_not_nested

    _fake_dataset(minari_root, "tt/a-v0")
    for ok in ("tt/a-v1", "tt/a-v0-b-v0", "tt/a-v0"):  # itself: replacing it is --overwrite's business
        check_not_nested(ok)


# ---------------------------------------------------------------------------------------------
# 4. examples/ppo_mask.py --run-name
# ---------------------------------------------------------------------------------------------
_script = _ppo_script  # examples/ppo_mask.py as a module (test_hostile_v8_offline)


PPO_SMALL = ["--scenario", "tiny", "--num-envs", "1", "--num-steps", "8", "--num-minibatches", "2",
             "--total-timesteps", "8"]


def test_ppo_mask_refuses_an_earlier_runs_folder_unless_overwrite(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """was: a second run under the same --run-name added its events to the first run's and
    replaced its model.pt without a word."""
    m = _script()
    argv = [*PPO_SMALL, "--out-dir", str(tmp_path), "--run-name", "r"]
    assert m.main(argv) == 0
    run = tmp_path / "r"
    first = sorted(run.glob("events.out.tfevents.*"))
    assert len(first) == 1 and (run / "model.pt").is_file()
    with pytest.raises(SystemExit) as e:
        m.parse_args(argv)
    assert e.value.code == 2 and "exists and is not empty" in capsys.readouterr().err
    assert m.main([*argv, "--overwrite"]) == 0
    events = sorted(run.glob("events.out.tfevents.*"))
    assert len(events) == 1 and events != first  # the earlier run's events are gone


def test_ppo_mask_overwrite_touches_only_its_own_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = _script()
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit):
        m.parse_args([*PPO_SMALL, "--out-dir", str(tmp_path), "--run-name", "r", "--overwrite"])
    assert "not a run of this script (notes.txt)" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()  # an empty folder takes a run
    assert m.parse_args([*PPO_SMALL, "--out-dir", str(tmp_path), "--run-name", "empty"]).run_name == "empty"


# ---------------------------------------------------------------------------------------------
# 5. train: rollout memory
# ---------------------------------------------------------------------------------------------
def test_train_refuses_a_rollout_that_cannot_fit_before_the_run_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """was: the run folder was made, then "out of memory ... use fewer --workers"."""
    pytest.importorskip("sb3_contrib")
    algo = tmp_path / "small.yaml"
    algo.write_text(SMALL_ALGO)
    out = tmp_path / "runs"
    rc, _, err = _cli(["train", "--config", str(algo), "--scenario", "tiny", "--set", "n_steps=1e12",
                       "--set", "batch_size=1e12", "--timesteps", "2e12", "--out", str(out), "--quiet"], capsys)
    assert rc == 2 and "GiB of memory" in err and "lower n_steps" in err and "--workers" not in err
    assert not out.exists() or not any(out.iterdir())


def test_rollout_estimate_covers_sb3s_buffer() -> None:
    """The estimate is at least what MaskablePPO's buffer allocates (twice: the flat copy)."""
    sb3c = pytest.importorskip("sb3_contrib")
    import gymnasium as gym

    from aryl_gym.train.runner import rollout_bytes

    env = gym.make("aryl_gym/Aryl-v2", scenario="tiny")
    buf_cls = sb3c.common.maskable.buffers.MaskableDictRolloutBuffer
    buf = buf_cls(64, env.observation_space, env.action_space, n_envs=2)
    held = sum(a.nbytes for a in vars(buf).values() if isinstance(a, np.ndarray))
    held += sum(a.nbytes for a in buf.observations.values())
    need = rollout_bytes(sb3c.MaskablePPO, {"n_steps": 64}, 2, env.observation_space, env.action_space)
    env.close()
    assert need is not None and 2 * held <= need * 1.01 and need <= 2 * held * 1.2


def test_out_of_memory_advice_fits_train() -> None:
    """was: "use fewer --workers", an option train does not have."""
    from aryl_gym.cli import memory_message

    msg = memory_message(argparse.Namespace(command="train", scenario="tiny"))
    assert "n_steps" in msg and "--n-envs" in msg and "--workers" not in msg
    assert "--workers" not in memory_message(argparse.Namespace(command="simulate", scenario="tiny"))
    assert "--workers" in memory_message(argparse.Namespace(command="leaderboard", workers=2))


# ---------------------------------------------------------------------------------------------
# 6. misspelled scenario sections
# ---------------------------------------------------------------------------------------------
def test_misspelled_scenario_section_is_warned_about(tmp_path: Path) -> None:
    """was: `tinny:` was validated, never used, and the tiny run took the default's settings
    without a word."""
    from aryl_gym.train.config import load_train_config

    p = tmp_path / "a.yaml"
    p.write_text(SMALL_ALGO + "tinny:\n  total_timesteps: 32\n")
    with pytest.warns(UserWarning, match=r"section 'tinny' is not a shipped scenario \(.*tiny.*\).*did you mean 'tiny'"):
        cfg = load_train_config(p, scenario="tiny")
    assert cfg.total_timesteps == 64


def test_shipped_and_own_scenario_sections_are_not_warned_about(tmp_path: Path) -> None:
    from aryl_gym.train.config import load_train_config

    scen = tmp_path / "mine.yaml"
    scen.write_text((ROOT / "configs" / "scenarios" / "tiny.yaml").read_text().replace("name: tiny", "name: mine"))
    p = tmp_path / "a.yaml"
    p.write_text(SMALL_ALGO + "tiny:\n  total_timesteps: 32\nmine:\n  total_timesteps: 128\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_train_config(p, scenario=str(scen)).total_timesteps == 128
        for name in ("maskable_ppo", "ppo", "maskable_ppo_v2"):
            load_train_config(name, scenario="tiny")
