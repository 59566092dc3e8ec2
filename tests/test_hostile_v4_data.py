"""What a fourth hostile-user pass found in the leaderboard's outputs and the recorded datasets
(each case says what happened before): plots of an earlier run left beside a new table, an agent
the user named that could not be loaded skipped with exit 0, Minari datasets that stored the
scenario as typed and no configuration hash, and recordings labelled with the policy's bare name
though played through the env's window."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from aryl_gym.config import configs_dir
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr

SUITE = {"name": "hz4", "scenarios": ["tiny"], "seeds": [0], "baseline": "fifo", "policies": ["fifo"]}


def _suite_file(tmp_path: Path) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(yaml.safe_dump(SUITE))
    return p


# -- 1. leaderboard --no-plots and plots of an earlier run ----------------------------------------
def test_no_plots_removes_the_leaderboards_own_stale_plots(tmp_path: Path) -> None:
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict

    out = tmp_path / "out"
    pdir = out / "plots"
    pdir.mkdir(parents=True)
    (out / ".aryl-gym-owner").write_text("leaderboard\n")  # an earlier run's folder
    ours = ["usage_tiny.png", "jct_cdf_tiny.png", "queue_tiny.png", "performance_profile.png",
            "interval_estimates.png", "usage_other-scen.yaml.png"]
    for name in ours:  # as an earlier run (matplotlib's output needs no real PNG here)
        (pdir / name).write_bytes(b"old plot")
    theirs = ["notes.txt", "my_usage.png", "usage.png", "usage_tiny.png.bak", "queue_tiny.svg"]
    for name in theirs:
        (pdir / name).write_text("the user's")
    res = run_leaderboard(suite_from_dict(SUITE), out, plots=False, tensorboard=False, progress=False,
                          log=lambda m: None)
    # was: all six left beside the new table
    assert sorted(p.name for p in pdir.iterdir()) == sorted(theirs)
    assert res.plots == [] and any("removed 6 plot(s) of an earlier run" in n for n in res.notes)


def test_no_plots_cli_after_a_plotted_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    suite = _suite_file(tmp_path)
    out = tmp_path / "out"
    base = ["leaderboard", "--suite", str(suite), "--out", str(out), "--no-progress", "--no-tensorboard"]
    rc, _, err = _run(base, capsys)
    assert rc == 0, err[-400:]
    drawn = {p.name for p in (out / "plots").iterdir()}
    assert "usage_tiny.png" in drawn
    rc, stdout, err = _run([*base, "--no-plots", "--overwrite"], capsys)
    assert rc == 0, err[-400:]
    assert not list((out / "plots").glob("*.png"))  # was: the first run's plots, beside the new table
    assert "plot(s) of an earlier run" in stdout


def test_no_tensorboard_after_a_logged_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.leaderboard.tb import tensorboard_available

    if not tensorboard_available():
        pytest.skip("needs tensorboardX (the train extra)")
    suite = _suite_file(tmp_path)
    out = tmp_path / "out"
    base = ["leaderboard", "--suite", str(suite), "--out", str(out), "--no-progress", "--no-plots"]
    rc, _, err = _run(base, capsys)
    assert rc == 0, err[-400:]
    assert list((out / "tensorboard").glob("*/events.out.tfevents.*"))
    (out / "tensorboard" / "notes.txt").write_text("mine")
    rc, stdout, err = _run([*base, "--no-tensorboard", "--overwrite"], capsys)
    assert rc == 0, err[-400:]
    # was: the first run's event files, read by TensorBoard as this run's
    assert not list((out / "tensorboard").glob("*/events.out.tfevents.*"))
    assert (out / "tensorboard" / "notes.txt").read_text() == "mine"  # nothing else is touched
    assert "TensorBoard log file(s) of an earlier run" in stdout


# -- 2. an agent named with --agent that cannot be loaded ---------------------------------------------
@pytest.mark.parametrize("source, reason", [
    ("bad.zip", "cannot load bad.zip as an SB3 model"),  # a corrupt model file
    ("missing.zip", "model file missing.zip not found"),
    ("os:no_such_factory", "'os' has no attribute 'no_such_factory'"),
])
def test_named_agent_that_cannot_load_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str], source: str,
                                                     reason: str) -> None:
    if source.endswith(".zip"):
        pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.zip").write_bytes(b"not a zip at all")
    suite = _suite_file(tmp_path)
    rc, _, err = _run(["leaderboard", "--suite", str(suite), "--out", "out", "--agent", f"mine={source}",
                       "--no-progress", "--no-plots", "--no-tensorboard"], capsys)
    # was: "skipped mine: could not load agent ..." and exit 0
    assert rc == 2, err[-400:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert f"--agent mine={source}: cannot load this agent" in lines[0] and reason in lines[0]
    assert not (tmp_path / "out").exists()  # nothing ran, no folder (was: the folder and its lock marker)


def test_named_agent_is_checked_before_overwrite_moves_rows(tmp_path: Path) -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict
    from aryl_gym.leaderboard.runner import AgentLoadError

    out = tmp_path / "out"
    s = suite_from_dict(SUITE)
    run_leaderboard(s, out, plots=False, tensorboard=False, progress=False, log=lambda m: None)
    before = (out / "results.csv").read_bytes()
    with pytest.raises(AgentLoadError) as err:
        run_leaderboard(s.with_agents({"mine": "os:nope"}), out, plots=False, tensorboard=False,
                        progress=False, overwrite=True, log=lambda m: None)
    assert isinstance(err.value, ConfigError)
    assert (out / "results.csv").read_bytes() == before and not list(out.glob("results.csv.bak-*"))


def test_suite_agents_keep_the_documented_skip(tmp_path: Path) -> None:
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict

    d = {**SUITE, "agents": {"gone": str(tmp_path / "gone.zip")}}
    res = run_leaderboard(suite_from_dict(d), tmp_path / "out", plots=False, tensorboard=False,
                          progress=False, log=lambda m: None)
    assert "not found" in res.summary.skipped["gone"] and not res.summary.failed


def test_named_agent_skipped_in_its_episode_is_a_failure(tmp_path: Path) -> None:
    # a factory found here but failing in the episode (it is built with the episode's env)
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict

    mod = tmp_path / "v4_failing_agent.py"
    mod.write_text("def make(env):\n    return object()  # no predict\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        res = run_leaderboard(suite_from_dict(SUITE).with_agents({"mine": "v4_failing_agent:make"}),
                              tmp_path / "out", plots=False, tensorboard=False, progress=False, workers=1,
                              log=lambda m: None)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("v4_failing_agent", None)
    assert "mine" not in res.summary.skipped  # was: a skip, exit 0
    (key, msg), = res.summary.failed
    assert key[-1] == "mine" and "--agent mine=v4_failing_agent:make: cannot load this agent" in msg


def test_reclaim_suite_named_agent_that_cannot_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "name": "rz", "kind": "reclaim", "policies": ["optimum", "aryl"],
        "instances": [{"synthetic": 2, "servers": [4, 6], "seed": 0, "elastic": 0.5}]}))
    rc, _, err = _run(["leaderboard", "--suite", "r.yaml", "--out", "out", "--agent", "x=os:nope",
                       "--no-progress"], capsys)
    assert rc == 2 and "--agent x=os:nope: cannot load this agent: 'os' has no attribute 'nope'" in err  # was: 0


# -- 3. Minari datasets: the scenario resolved, with its configuration hash -------------------------
@pytest.fixture()
def minari_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("minari")
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def _scenario_copy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "x.yaml"
    p.write_text((configs_dir() / "scenarios" / "tiny.yaml").read_text())
    return p


def test_dataset_stores_the_absolute_scenario_and_its_hash(tmp_path: Path, minari_root: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym import offline
    from aryl_gym.config import load_scenario
    from aryl_gym.provenance import config_hash

    scen = _scenario_copy(tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    ds = offline.write_dataset("t/x/fifo-v0", "configs/x.yaml", "fifo", episodes=1, seed=0)
    mine = ds.storage.metadata["aryl_gym"]
    # was: "configs/x.yaml", and no hash
    assert mine["scenario"] == str(scen.resolve())
    assert mine["config_hash"] == config_hash(load_scenario(scen))
    assert json.loads(ds.storage.metadata["env_spec"])["kwargs"]["scenario"] == str(scen.resolve())
    # replayed from another folder (was: "configs/x.yaml" not found)
    monkeypatch.chdir(tmp_path / "configs")
    env = offline.recover_environment("t/x/fifo-v0")
    env.reset(seed=0, options={"episode_seed": 0})
    env.close()
    assert len(offline.load_minari_demos("minari:t/x/fifo-v0")["actions"]) == ds.total_steps
    # a shipped scenario stays a name
    assert offline.scenario_ref("tiny") == "tiny"


def test_changed_scenario_file_is_refused_on_load_and_replay(tmp_path: Path, minari_root: Path) -> None:
    from aryl_gym import offline
    from aryl_gym.config import ConfigError
    from aryl_gym.train.bc import load_demos

    scen = _scenario_copy(tmp_path)
    offline.write_dataset("t/x/fifo-v0", scen, "fifo", episodes=1, seed=0)
    scen.write_text(scen.read_text().replace("num_jobs: 30", "num_jobs: 31"))  # edited since
    with pytest.raises(ValueError, match=r"recorded in scenario .*x\.yaml with configuration hash \w+, but that "
                                         r"file's configuration now hashes to \w+.*record the dataset again"):
        offline.recover_environment("t/x/fifo-v0")  # was: an env replaying other episodes
    with pytest.raises(ConfigError, match=r"--bc-demos minari:t/x/fifo-v0: .*now hashes to"):
        load_demos("minari:t/x/fifo-v0")  # was: read without a word
    # a description is no part of the configuration: an edit of it passes
    scen.write_text(scen.read_text().replace("num_jobs: 31", "num_jobs: 30").replace("For unit", "Edited. For unit"))
    offline.load_minari_demos("t/x/fifo-v0")


def test_dataset_without_a_hash_still_loads(tmp_path: Path, minari_root: Path) -> None:
    from aryl_gym import offline

    scen = _scenario_copy(tmp_path)
    ds = offline.write_dataset("t/x/fifo-v0", scen, "fifo", episodes=1, seed=0)
    md = ds.storage.metadata["aryl_gym"]
    old = {k: v for k, v in md.items() if k != "config_hash"}  # as written before this change
    old["scenario"] = os.path.relpath(scen)  # as typed
    ds.storage.update_metadata({"aryl_gym": old})
    scen.write_text(scen.read_text().replace("num_jobs: 30", "num_jobs: 31"))
    assert len(offline.load_minari_demos("t/x/fifo-v0")["actions"]) == ds.total_steps  # no check


# -- 4. recordings say they were played through the env, with which window --------------------------
def test_npz_demos_record_the_window_and_say_when_not_native(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = ["demos", "--scenario", "tiny", "--policy", "aryl", "--episodes", "1", "--seed", "4"]
    rc, out, err = _run([*base, "--out", str(tmp_path / "w16.npz")], capsys)
    assert rc == 0, err[-400:]
    # was: "... steps of aryl on tiny", as if it were aryl's own episode
    assert "steps of aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16) on tiny" in out
    assert "these are not aryl's native episodes" in out
    d = np.load(tmp_path / "w16.npz")
    assert int(d["window"]) == 16 and str(d["action_mode"]) == "sequential" and str(d["policy"]) == "aryl"
    assert str(d["label"]) == "aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16)"
    assert int(d["decisions_not_expressed"]) > 0 and str(d["config_hash"])
    rc, out, err = _run([*base, "--window", "64", "--out", str(tmp_path / "w64.npz"), "--json"], capsys)
    assert rc == 0, err[-400:]
    info = json.loads(out)
    assert info["window"] == 64 and info["decisions_not_expressed"] == 0 and "window 64" in info["label"]


def test_minari_demos_label_window_and_summary(tmp_path: Path, minari_root: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import minari

    rc, out, err = _run(["demos", "--format", "minari", "--scenario", "tiny", "--policy", "aryl", "--episodes", "1",
                         "--seed", "4"], capsys)
    assert rc == 0, err[-400:]
    assert "of aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16) on tiny" in out
    assert "not aryl's native episodes" in out
    md = minari.load_dataset("aryl_gym/tiny/aryl-v0").storage.metadata
    # was: algorithm_name "aryl"
    assert md["algorithm_name"] == "aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16)"
    mine = md["aryl_gym"]
    assert mine["window"] == 16 and mine["action_mode"] == "sequential" and mine["env_id"] == "aryl_gym/Aryl-v2"
    assert mine["policy"] == "aryl" and mine["decisions_not_expressed"] > 0


def test_demos_help_says_what_the_window_does(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["demos", "--help"], capsys)
    assert rc == 0
    text = " ".join(out.split())
    assert "only a window at least as large as the queue gives its native episode" in text
    assert "the recording is the policy's native episode only when the window is at least as large" in text
