"""Reliability v2 (issue 34): the newer surfaces (reproduce's cache, the reclaim suite, the seed
study, train --resume, plugins, scripts) tried as a clumsy or hostile user would.

Each row is a command (or call) and what the user must see; what used to happen is in the
test's docstring or the row's comment.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from aryl_gym import reproduce as rp
from aryl_gym.cli import main
from aryl_gym.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# ----------------------------------------------------------------------------------------------
# reproduce: the episode cache
# ----------------------------------------------------------------------------------------------
def _task(policy: str = "fifo", seed: int = 0) -> rp.Task:
    cfg = load_scenario("tiny")
    return rp.Task("tiny", cfg, policy, seed, rp.config_hash(cfg))


@pytest.fixture(scope="module")
def cached_episode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One real cached tiny episode (fifo, seed 0): its folder and its file's JSON."""
    out = tmp_path_factory.mktemp("rp")
    t = _task()
    rp.run_tasks([t], out, progress="none", log=lambda m: None)
    return out, json.loads(rp.cache_path(out, t).read_text())


def _damage(payload: dict[str, Any], change: str) -> Any:
    d = json.loads(json.dumps(payload))
    if change == "empty-result":
        return {"result": {}}
    if change == "no-result":
        return {"policy": "fifo"}
    if change == "list":
        return [1, 2]
    if change == "negative-jct":
        d["result"]["avg_jct"] = -5
        d.pop("digest")
    elif change == "null-jct":
        d["result"]["avg_jct"] = None
        d.pop("digest")
    elif change == "string-count":
        d["result"]["jobs_completed"] = "12"
        d.pop("digest")
    elif change == "edited":  # a plausible number, changed by hand: the digest catches it
        d["result"]["avg_jct"] = d["result"]["avg_jct"] * 0.5
    elif change == "other-seed":  # a file copied from another seed's name
        d["seed"] = 7
    return d


@pytest.mark.parametrize(
    "change, match",
    [
        ("empty-result", "missing metric"),  # was: TypeError traceback
        ("no-result", 'no "result"'),
        ("list", 'no "result"'),
        ("negative-jct", "avg_jct is -5"),  # was: used silently
        ("null-jct", "avg_jct is null although"),  # was: used silently
        ("string-count", "jobs_completed is '12'"),
        ("edited", "digest mismatch"),
        ("other-seed", "another episode"),
        ("torn", "not valid JSON"),
    ],
)
def test_reproduce_refuses_a_damaged_cached_episode(cached_episode: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                    change: str, match: str) -> None:
    """Was: ``{"result": {}}`` raised a TypeError traceback; ``avg_jct: -5`` or ``null`` was used
    silently. Now the file is named with what is wrong and how to get rid of it."""
    src, payload = cached_episode
    t = _task()
    p = rp.cache_path(tmp_path, t)
    p.parent.mkdir(parents=True)
    p.write_text('{"result": {"avg_j' if change == "torn" else json.dumps(_damage(payload, change)))
    with pytest.raises(rp.CacheError, match=match) as exc:
        rp.run_tasks([t], tmp_path, progress="none", log=lambda m: None)
    assert str(p) in str(exc.value) and "delete it" in str(exc.value) and "--fresh" in str(exc.value)
    # --fresh recomputes it
    res, stats = rp.run_tasks([t], tmp_path, fresh=True, progress="none", log=lambda m: None)
    assert stats.new == 1 and res[t].avg_jct == payload["result"]["avg_jct"]


def test_reproduce_cache_accepts_its_own_files_and_legit_nulls(cached_episode: tuple[Path, dict[str, Any]],
                                                               tmp_path: Path) -> None:
    src, payload = cached_episode
    t = _task()
    res, stats = rp.run_tasks([t], src, progress="none", log=lambda m: None)
    assert stats.cached == 1 and res[t].avg_jct == payload["result"]["avg_jct"]
    # a policy that finished no job has null JCT figures: legitimate, read back as NaN
    d = json.loads(json.dumps(payload))
    d.pop("digest")
    d["result"].update(jobs_completed=0, avg_jct=None, median_jct=None, p95_jct=None, makespan=None)
    p = rp.cache_path(tmp_path, t)
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(d))
    res, _ = rp.run_tasks([t], tmp_path, progress="none", log=lambda m: None)
    assert res[t].avg_jct != res[t].avg_jct  # NaN


def test_reproduce_cache_key_follows_the_agent_model_file(tmp_path: Path) -> None:
    """Was: after ``--policies agent:PATH/model.zip`` the model was replaced and the rerun
    reported the old model's cached numbers for the new one ("0 episode(s) run, 12 cached")."""
    model = tmp_path / "model.zip"
    model.write_bytes(b"first weights")
    t = _task(f"agent:{model}")
    first = rp.cache_path(tmp_path, t)
    assert rp.cache_path(tmp_path, t) == first
    model.write_bytes(b"other weights")
    os.utime(model, ns=(1, 1))  # even with the same mtime and size class
    assert rp.cache_path(tmp_path, t) != first
    assert rp.cache_path(tmp_path, _task("fifo")).name == f"seed0-{rp.config_hash(load_scenario('tiny'))}.json"


def test_reproduce_refuses_a_folder_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: two runs on one ``--out`` did all the work twice, with no lock."""
    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"4242\n")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run holds the folder
    try:
        rc, _, err = _cli(["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "queue-aryl-baseline",
                           "--out", str(tmp_path), "--no-progress"], capsys)
    finally:
        os.close(fd)
    assert rc == 2 and "pid 4242" in err and "another aryl-gym run" in err and "Traceback" not in err
    assert not (tmp_path / "episodes").exists()


def test_reproduce_damaged_cache_through_the_cli(cached_episode: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "queue-aryl-baseline",
            "--out", str(tmp_path), "--no-progress"]
    rc, _, err = _cli(argv, capsys)
    assert rc == 0, err
    (f,) = (tmp_path / "episodes" / "tiny" / "aryl").glob("seed0-*.json")
    f.write_text('{"result": {}}')
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and str(f) in err and "delete it" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# one command per output folder
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "owner_files, argv, match",
    [
        # was: seed-study appended its rows to the leaderboard's results.csv
        ({".aryl-gym-owner": "leaderboard\n"}, ["seed-study", "--scenario", "tiny", "--seeds", "0-1",
                                                "--policies", "fifo,aryl"], "aryl-gym leaderboard"),
        ({"leaderboard.json": "{}"}, ["seed-study", "--scenario", "tiny", "--seeds", "0-1",
                                      "--policies", "fifo,aryl"], "aryl-gym leaderboard"),
        ({".aryl-gym-owner": "seed-study\n"}, ["reproduce", "--scale", "tiny", "--seeds", "1",
                                               "--rows", "queue-aryl-baseline"], "aryl-gym seed-study"),
        ({"reproduction.md": "# r\n"}, ["leaderboard", "--suite", "quick"], "aryl-gym reproduce"),
    ],
)
def test_no_command_writes_into_another_commands_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        owner_files: dict[str, str], argv: list[str],
                                                        match: str) -> None:
    for name, text in owner_files.items():
        (tmp_path / name).write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, _, err = _cli([*argv, "--out", str(tmp_path)], capsys)
    assert rc == 2 and match in err and "another command's folder" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".lock") == before


def test_seed_study_with_a_missing_agent_file_is_an_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``seed-study --agent x=missing.zip`` dropped the agent with no note."""
    rc, _, err = _cli(["seed-study", "--scenario", "tiny", "--seeds", "0-1", "--policies", "fifo,aryl",
                       "--agent", f"x={tmp_path}/missing.zip", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "missing.zip" in err and "not found" in err
    assert not (tmp_path / "o" / "results.csv").exists()
