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

import numpy as np
import pytest

from aryl_gym import episodes as rp_episodes
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
def _task(policy: str = "fifo", seed: int = 0) -> rp.EpisodeTask:
    return rp.policy_task(load_scenario("tiny"), policy, seed, "tiny")


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
    d["result"].update(jobs_completed=0, avg_jct=None, median_jct=None, p95_jct=None, makespan=None)
    d["digest"] = rp.result_digest(d["result"])  # as written (a file without one is refused)
    p = rp.cache_path(tmp_path, t)
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(d))
    res, _ = rp.run_tasks([t], tmp_path, progress="none", log=lambda m: None)
    assert res[t].avg_jct != res[t].avg_jct  # NaN


def test_reproduce_cache_key_follows_the_agent_model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: after ``--policies agent:PATH/model.zip`` the model was replaced and the rerun
    reported the old model's cached numbers for the new one ("0 episode(s) run, 12 cached")."""
    model = tmp_path / "model.zip"
    model.write_bytes(b"first weights")
    t = _task(f"agent:{model}")
    first = rp.cache_path(tmp_path, t)
    assert rp.cache_path(tmp_path, t) == first
    model.write_bytes(b"other weights")
    os.utime(model, ns=(1, 1))  # even with the same mtime and size class
    assert rp.cache_path(tmp_path, _task(f"agent:{model}")) != first
    # a reference policy's key: the config and the metrics' version (another version, another file)
    fifo = rp.cache_path(tmp_path, _task("fifo")).name
    assert fifo.startswith("seed0-") and fifo != f"seed0-{rp.config_hash(load_scenario('tiny'))}.json"
    monkeypatch.setattr(rp_episodes, "METRICS_VERSION", 999)
    assert rp.cache_path(tmp_path, _task("fifo")).name != fifo


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
        ({".aryl-gym-owner": "leaderboard\n"}, ["train", "--config", "maskable_ppo", "--scenario", "tiny",
                                                "--timesteps", "64"], "aryl-gym leaderboard"),
        ({".aryl-gym-owner": "train\n"}, ["leaderboard", "--suite", "quick"], "aryl-gym train"),
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


# ----------------------------------------------------------------------------------------------
# train --resume: never overwrite a run's later state
# ----------------------------------------------------------------------------------------------
def _fake_run(tmp_path: Path, ckpts: list[int], model: int | None) -> Path:
    """A run folder with a real config.yaml and SB3-like .zip files holding only their step count."""
    import zipfile

    import yaml

    from aryl_gym.train.config import load_train_config

    run = tmp_path / "runs" / "tiny__maskable_ppo__0__x"
    (run / "checkpoints").mkdir(parents=True)
    cfg = load_train_config("maskable_ppo", scenario="tiny")
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    def save(p: Path, n: int) -> None:
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr("data", json.dumps({"num_timesteps": n}))

    for n in ckpts:
        save(run / "checkpoints" / f"rl_model_{n}_steps.zip", n)
    if model is not None:
        save(run / "model.zip", model)
    return run


@pytest.mark.parametrize(
    "ckpts, model, resume, total, expect",
    [
        # was: trained 0 steps, exited 0 and overwrote model.zip with the 256-step weights
        ([256, 512, 768, 1024], 1024, "rl_model_256_steps", 200, "error"),
        ([256, 512], None, "rl_model_512_steps", 512, "error"),
        # was: overwrote the run's later checkpoints (and ended at 1,280 steps)
        ([256, 512, 768, 1024], 1024, "rl_model_256_steps", 1024, "new"),
        ([256, 512], 512, "rl_model_256_steps", 2048, "new"),
        # the run's last saved state: continues in the run
        ([256, 512], None, "rl_model_512_steps", 2048, "same"),
        ([256, 512], 512, "model", 2048, "same"),
    ],
)
def test_train_resume_plan(tmp_path: Path, ckpts: list[int], model: int | None, resume: str, total: int,
                           expect: str) -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.train.runner import resume_plan

    run = _fake_run(tmp_path, ckpts, model)
    ck = run / "model.zip" if resume == "model" else run / "checkpoints" / f"{resume}.zip"
    if expect == "error":
        with pytest.raises(ConfigError, match=r"is the run's total \(not extra steps\): nothing to train"):
            resume_plan(ck, total)
        return
    run_dir, steps = resume_plan(ck, total)
    assert steps == int(resume.split("_")[2]) if resume != "model" else steps == model
    assert run_dir == (None if expect == "new" else run)


def test_train_resume_with_nothing_to_train_exits_2_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sb3_contrib")
    run = _fake_run(tmp_path, [256, 512, 768, 1024], 1024)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    rc, out, err = _cli(["train", "--resume", str(run / "checkpoints" / "rl_model_256_steps.zip"),
                         "--timesteps", "200", "--quiet"], capsys)
    assert rc == 2 and "nothing to train" in err and "--timesteps 456" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_train_help_says_timesteps_is_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the run's total counted from its start, not extra steps" in out


@pytest.mark.slow
def test_train_resume_from_an_earlier_checkpoint_continues_in_a_new_run_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: resuming ``rl_model_128_steps.zip`` of a run at 512 with ``--timesteps 512``
    overwrote the run's later checkpoints and its model.zip."""
    pytest.importorskip("sb3_contrib")
    base = ["--eval-freq", "0", "--n-envs", "1", "--set", "n_steps=128", "--set", "batch_size=64",
            "--out", str(tmp_path / "runs"), "--quiet", "--json"]
    rc, out, err = _cli(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "512",
                         "--checkpoint-freq", "128", *base], capsys)
    assert rc == 0, err
    run = Path(json.loads(out)["run_dir"])
    before = {p: p.read_bytes() for p in run.rglob("*.zip")}
    rc, out, err = _cli(["train", "--resume", str(run / "checkpoints" / "rl_model_128_steps.zip"),
                         "--timesteps", "512", *base], capsys)
    assert rc == 0, err
    new = Path(json.loads(out)["run_dir"])
    assert new != run and new.parent == run.parent
    assert {p: p.read_bytes() for p in run.rglob("*.zip")} == before
    assert json.loads((new / "summary.json").read_text())["num_timesteps"] == 512
    assert json.loads((new / "args.json").read_text())["args"]["resumed_from"].endswith("rl_model_128_steps.zip")


# ----------------------------------------------------------------------------------------------
# scripts
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where, match", [("missing-dir/x.json", "does not exist"), (".", "is a folder")])
def test_eval_v1_checks_its_json_path_before_any_work(tmp_path: Path, where: str, match: str) -> None:
    """Was: ``scripts/eval_v1.py --json missing-dir/x.json`` failed after the first load was
    evaluated: the table was never printed and the work was lost."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_v1.py"), "--agent", "ppo-v1",
                        "--scenario", "tiny", "--seeds", "0", "--json", where],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--json" in r.stderr and match in r.stderr and "Traceback" not in r.stderr
    assert "###" not in r.stdout  # nothing was evaluated


@pytest.mark.parametrize("item, match", [
    ("bf", "expected LABEL=JSON"),
    ('nobody={"backfill": true}', "names no --agent entry"),
    ('bf={"backfil": true}', "'backfil' is not an argument of the env"),
    ("bf=[1]", "expected a JSON object"),
    ("bf={bad", "not JSON"),
    ('bf={"window_fit": -1}', "window_fit must be an integer"),
    ('bf={"scenario": "basic"}', "come from --scenario"),
])
def test_eval_v1_env_kwargs_are_checked(item: str, match: str, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from .helpers import load_script

    with pytest.raises(SystemExit) as exc:
        load_script("eval_v1").env_kwargs_arg(argparse.ArgumentParser(prog="eval_v1.py"), [item], ["bf"])
    assert exc.value.code == 2 and match in capsys.readouterr().err
    both = ['bf={"backfill": true}', 'bf={"window_fit": 4}']
    with pytest.raises(SystemExit):
        load_script("eval_v1").env_kwargs_arg(argparse.ArgumentParser(prog="eval_v1.py"), both, ["bf"])
    assert "given twice" in capsys.readouterr().err


def test_eval_v1_refuses_bad_env_kwargs_before_any_work(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_v1.py"), "--agent", "bf=ppo-v1",
                        "--scenario", "tiny", "--seeds", "0", "--env-kwargs", 'bf={"backfil": true}'],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "'backfil' is not an argument of the env" in r.stderr
    assert "Traceback" not in r.stderr and "###" not in r.stdout


def test_eval_v1_env_kwargs_reach_the_agents_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same weights with and without an env argument: the override reaches only its entry."""
    from aryl_gym.agents.learned import LearnedAgent

    from .helpers import load_script

    mod = load_script("eval_v1")

    seen: dict[str, object] = {}
    real = LearnedAgent.make_env

    def spy(self: LearnedAgent, *args: object, **kw: object) -> object:
        env = real(self, *args, **kw)
        seen.setdefault(self.name + ("+bf" if kw.get("backfill") else ""), env.unwrapped.options.backfill)
        return env

    monkeypatch.setattr(LearnedAgent, "make_env", spy)
    r = mod.evaluate(["ppo-v1", "bf=ppo-v1"], "tiny", None, [0], ["aryl"],
                     env_kwargs={"bf": {"backfill": True}})
    assert seen == {"ppo-v1": False, "ppo-v1+bf": True}
    assert set(r["avg_jct"]) == {"ppo-v1", "bf", "aryl"}
    assert r["env_kwargs"] == {"bf": {"backfill": True}}  # the JSON says how each entry played


def test_eval_v1_evaluate_takes_a_scenario_config() -> None:
    """A ScenarioConfig (e.g. a trace swapped in, experiments/23) plays the same episodes as the
    scenario of the same settings by name, and the table names it."""
    from aryl_gym.config import load_scenario
    from aryl_gym.train.evaluation import run_reference

    from .helpers import load_script

    mod = load_script("eval_v1")
    cfg = load_scenario("tiny").replace(name="tiny-renamed", workload={"load": 0.7})
    by_cfg = mod.evaluate([], cfg, None, [0, 1], ["aryl", "sjf"])
    by_name = mod.evaluate([], "tiny", 0.7, [0, 1], ["aryl", "sjf"])
    assert by_cfg["scenario"] == "tiny-renamed" and by_name["scenario"] == "tiny"
    assert by_cfg["load"] == 0.7
    assert by_cfg["avg_jct"] == by_name["avg_jct"]
    assert by_cfg["avg_jct"]["sjf"][1] == run_reference("sjf", cfg, 1).avg_jct


# ----------------------------------------------------------------------------------------------
# leaderboard --suite RECLAIM: the regular suites' lock, backups, digests and resume
# ----------------------------------------------------------------------------------------------
@pytest.fixture()
def reclaim_yaml(tmp_path: Path) -> Path:
    p = tmp_path / "rs.yaml"
    p.write_text("name: rsmall\nkind: reclaim\ndescription: small\n"
                 "instances:\n  - {synthetic: 4, servers: [5, 8], seed: 3}\n"
                 "policies: [optimum, aryl, default, random]\nnontrivial_only: false\n")
    return p


def _reclaim(yaml_path: Path, out: Path, *extra: str) -> list[str]:
    return ["leaderboard", "--suite", str(yaml_path), "--out", str(out), "--no-progress", *extra]


def test_reclaim_suite_overwrite_twice_keeps_both_backups(reclaim_yaml: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--overwrite`` twice within a second lost the original results.csv (a one-second
    backup stamp)."""
    out = tmp_path / "o"
    assert main(_reclaim(reclaim_yaml, out)) == 0
    first = (out / "results.csv").read_text()
    for _ in range(2):
        assert main(_reclaim(reclaim_yaml, out, "--overwrite")) == 0
    err = capsys.readouterr().err
    baks = sorted(out.glob("results.csv.bak-*[0-9]"))
    assert len(baks) == 2 and err.count("moved the previous results to") == 2
    assert baks[0].read_text() == first


def test_reclaim_suite_duplicate_agent_fails_before_moving_anything(reclaim_yaml: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--overwrite --agent aryl=ppo-v1`` moved the results aside, then failed on the
    duplicate name with no "moved" message; the next ``--resume`` silently started from zero."""
    out = tmp_path / "o"
    assert main(_reclaim(reclaim_yaml, out)) == 0
    before = (out / "results.csv").read_text()
    rc = main(_reclaim(reclaim_yaml, out, "--overwrite", "--agent", "aryl=ppo-v1"))
    err = capsys.readouterr().err
    assert rc == 2 and "already has an entrant named 'aryl'" in err
    assert (out / "results.csv").read_text() == before and not list(out.glob("results.csv.bak-*"))


def _no_ms(entrants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [{k: v for k, v in e.items() if k not in ("ms_mean", "rank")} for e in entrants]
    return sorted(rows, key=lambda e: e["entrant"])  # ties in gap are ordered by time


def _rows(out: Path) -> list[str]:
    return (out / "results.csv").read_text().splitlines()


@pytest.mark.parametrize(
    "damage, match",
    [
        # was: "could not convert string to float: ''" (no file or line); resume impossible
        ("cut", "incomplete last row (line {last}"),
        ("empty-field", "line {line}: preemptions: expected a whole number, got ''"),
        # was: accepted, a gap of -219%
        ("negative", "line {line}: preemptions: -972 is negative"),
        # a plausible hand edit: caught by the row digests, as in regular suites
        ("edited", "edited row(s): changed after they were written"),
    ],
)
def test_reclaim_suite_resume_reports_damaged_rows_with_file_and_line(
        reclaim_yaml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, match: str) -> None:
    out = tmp_path / "o"
    assert main(_reclaim(reclaim_yaml, out)) == 0
    good = _rows(out)
    table = _no_ms(json.loads((out / "leaderboard.json").read_text())["entrants"])
    lines = list(good)
    i = next(k for k, ln in enumerate(lines) if ",aryl," in ln)  # an aryl row (not the optimum)
    f = lines[i].split(",")
    col = {c: k for k, c in enumerate(lines[0].split(","))}
    if damage == "cut":
        text = "\r\n".join(lines) + "\r\n" + lines[i][:20]
    else:
        if damage == "empty-field":
            f[col["preemptions"]] = ""
        elif damage == "negative":
            f[col["preemptions"]] = "-972"
        else:
            f[col["overlap"]] = "0.5" if f[col["overlap"]] != "0.5" else "0.25"
        lines[i] = ",".join(f)
        text = "\r\n".join(lines) + "\r\n"
    (out / "results.csv").write_text(text, newline="")
    capsys.readouterr()
    rc = main(_reclaim(reclaim_yaml, out, "--resume"))
    err = capsys.readouterr().err
    assert rc == 0, err
    assert str(out / "results.csv") in err
    assert match.format(line=i + 1, last=len(lines) + 1) in err, err
    assert "saved as" in err and list(out.glob("results.csv.bak-*"))
    # the bad row was played again: the table is the undamaged one (but for decision times)
    assert len(_rows(out)) == len(good)
    assert _no_ms(json.loads((out / "leaderboard.json").read_text())["entrants"]) == table


def test_reclaim_suite_refuses_a_folder_in_use(reclaim_yaml: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Was: no lock: two reclaim-suite runs at once wrote 241 rows, 120 of them duplicated."""
    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        rc = main(_reclaim(reclaim_yaml, out))
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert rc == 2 and "another aryl-gym run" in err and not (out / "results.csv").exists()


# ----------------------------------------------------------------------------------------------
# silently wrong results
# ----------------------------------------------------------------------------------------------
def _per(jcts: list[float | None], unfinished: int = 0) -> dict[str, dict[int, dict[str, Any]]]:
    return {"testbed": {s: {"avg_jct": j, "jobs_unfinished": unfinished} for s, j in enumerate(jcts)}}


@pytest.mark.parametrize("with_ci", [True, False])
def test_a_policy_that_finishes_no_job_never_ranks_with_aryl(with_ci: bool) -> None:
    """Was: a policy that completes no job (avg_jct null) ranked "1=" tied with Aryl (nothing
    could separate it); one whose episodes ended early averaged its few finished jobs (928 s
    against Aryl's 4,739 s) and could rank first."""
    from aryl_gym.leaderboard import report
    from aryl_gym.stats import available

    if with_ci and not available():
        pytest.skip("the stats extra is not installed")
    per = {
        "aryl": _per([4700, 4800, 4650, 4900, 4750, 4720]),
        "fifo": _per([8000, 8300, 7900, 8100, 8200, 8050]),
        "idle": _per([None] * 6, unfinished=69),
        "thrash": _per([928, 900, 950, 940, 910, 930], unfinished=66),
    }
    names = list(per)
    if with_ci:
        cmp = report.compare_entrants(per, names, ["testbed"], "avg_jct", "fifo", "aryl")
        ranks = {n: cmp["entrants"][n]["rank"] for n in names}
        assert ranks["aryl"] == 1 and ranks["fifo"] == 2
        assert min(ranks["idle"], ranks["thrash"]) > 2
        assert "aryl" not in cmp["entrants"]["idle"]["tied_with"]
    else:
        entries = [{"policy": n, "jobs_unfinished": per[n]["testbed"][0]["jobs_unfinished"],
                    "metrics": {"avg_jct": {"mean": None if n == "idle" else
                                            sum(v["avg_jct"] for v in per[n]["testbed"].values()) / 6}}}
                   for n in names]
        order = sorted(entries, key=report._mean_key("avg_jct"))
        assert [e["policy"] for e in order] == ["aryl", "fifo", "thrash", "idle"]


@pytest.mark.parametrize(
    "argv, label, first",
    [
        (["--agent", "aryl", "--against", "sjf"], "jct/baseline", "baseline"),
        (["--agent", "aryl", "--against", "sjf", "--baseline", "sjf"], "jct/sjf", "sjf"),
        # was: an agent given by path as --baseline failed as an "unknown policy" (or was mislabelled)
        (["--agent", "agents/pretrained/ppo-v1.zip", "--against", "sjf", "--baseline",
          "agents/pretrained/ppo-v1.zip"], "jct/ppo-v1", "ppo-v1"),
    ],
)
def test_evaluate_table_names_the_real_reference(argv: list[str], label: str, first: str,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: ``evaluate --agent aryl --against sjf --table`` labelled a column "jct/fifo" that held
    ratios to another policy. The column names the policy whose row reads 1."""
    if "ppo-v1" in label:
        pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(ROOT)
    rc, out, err = _cli(["evaluate", *argv, "--scenario", "tiny", "--seeds", "0", "--table", "--no-progress"], capsys)
    assert rc == 0, err
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.startswith("policy"))
    assert label in head.split()
    col = head.split().index(label)
    row = next(ln for ln in lines[lines.index(head) + 2:] if ln.split()[0] == first)
    assert row.split()[col] == "1"


# ----------------------------------------------------------------------------------------------
# plugins
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def shadowing_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import sys

    from aryl_gym.agents import base

    from .test_plugins import _install_plugin

    root = _install_plugin(tmp_path / "site", "fifo = lifo_plugin:LastInFirstOut\n"
                                              "raiser = lifo_plugin:broken\n")
    base.load_plugins()  # the built-ins are registered before the registry is saved
    saved = [dict(d) for d in (base._REGISTRY, base._BROKEN, base._PLUGINS, base._CONFLICTS)]
    monkeypatch.syspath_prepend(str(root))
    base.load_plugins(force=True)
    yield base
    for d, old in zip((base._REGISTRY, base._BROKEN, base._PLUGINS, base._CONFLICTS), saved):
        d.clear()
        d.update(old)
    sys.modules.pop("lifo_plugin", None)


def test_a_plugin_named_like_a_built_in_is_an_error(shadowing_plugin: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a plugin named like a built-in was silently ignored (the built-in ran)."""
    with pytest.raises(ValueError, match="'fifo' is ambiguous.*fifo = 'lifo_plugin:LastInFirstOut'.*built-in"):
        shadowing_plugin.make_policy("fifo")
    rc, _, err = _cli(["simulate", "--scenario", "tiny", "--policy", "fifo", "--no-progress"], capsys)
    assert rc == 2 and "ambiguous" in err and "rename the plugin" in err and "Traceback" not in err
    assert shadowing_plugin.make_policy("aryl").name  # the other policies are untouched


def test_policies_lists_everything_despite_a_plugin_whose_factory_raises(
        shadowing_plugin: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a plugin whose factory raises took ``aryl-gym policies`` down, listing nothing."""
    rc, out, err = _cli(["policies"], capsys)
    assert rc == 0 and "aryl " in out and "sjf " in out and "raiser" not in out
    assert "plugin 'raiser' cannot be used: its factory failed: RuntimeError: never built" in err
    assert "plugin 'fifo' cannot be used" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# calibrate --relevance
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, match",
    [
        # was: --load-grid and --scenario silently ignored, every scenario run
        (["--relevance", "--load-grid", "0.3-0.5"], "two different runs"),
        (["--relevance", "--scenario", "tiny", "--scenarios", "testbed"], "drop --scenario"),
        (["--scenarios", "testbed"], "--relevance only"),
        (["--policies", "fifo"], "--relevance only"),
        (["--relevance", "--scenarios", ""], "--scenarios is empty"),  # was: every scenario
        (["--relevance", "--scenarios", " , "], "--scenarios is empty"),
        # was: counted twice
        (["--relevance", "--scenarios", "tiny,tiny"], "'tiny' is given twice"),
        (["--relevance", "--scenarios", "tiny", "--policies", "fifo,fifo"], "'fifo' is given twice"),
    ],
)
def test_calibrate_relevance_refuses_options_it_would_ignore(argv: list[str], match: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _cli(["calibrate", *argv], capsys)
    assert rc == 2 and match in err and "Traceback" not in err


def test_calibrate_relevance_honours_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(["calibrate", "--relevance", "--scenario", "tiny", "--seeds", "0", "--policies", "fifo",
                         "--json"], capsys)
    assert rc == 0, err
    assert [r["scenario"] for r in json.loads(out)["rows"]] == ["tiny"]


# ----------------------------------------------------------------------------------------------
# without the optional extras
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "missing, argv",
    [
        # was: ModuleNotFoundError tracebacks (sb3_contrib, torch), no extra named
        ("sb3_contrib", ["evaluate", "--agent", "ppo-v1", "--scenario", "tiny", "--seeds", "0", "--no-progress"]),
        ("torch", ["evaluate", "--agent", "ppo-v1", "--scenario", "tiny", "--seeds", "0", "--no-progress"]),
        ("torch", ["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "64"]),
        ("sb3_contrib", ["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "64"]),
    ],
)
def test_a_command_needing_the_train_extra_names_it(missing: str, argv: list[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, missing, None)  # "import sb3_contrib" now fails as if absent
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and "pip install 'aryl-gym[train]'" in err and missing in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_leaderboard_skips_learned_agents_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: ``aryl-gym main`` without the train extra printed 48 FAILED lines, none naming it."""
    import sys

    from aryl_gym.episodes import check_entrant
    from aryl_gym.extras import missing_extra
    from aryl_gym.leaderboard.suites import Entrant

    monkeypatch.setitem(sys.modules, "sb3_contrib", None)
    why = check_entrant(Entrant("ppo-v1", "agent", "ppo-v1"), "aryl_gym/Aryl-v2")
    assert why is not None and "pip install 'aryl-gym[train]'" in why and "sb3_contrib" in why
    assert check_entrant(Entrant("aryl", "policy", "aryl"), "aryl_gym/Aryl-v2") is None
    # a module of no extra is a bug, not a missing extra: it is not hidden
    assert missing_extra(ModuleNotFoundError("x", name="numpy")) is None
    assert "aryl-gym[plots]" in (missing_extra(ModuleNotFoundError("x", name="matplotlib.pyplot")) or "")


# ----------------------------------------------------------------------------------------------
# one number parser: scientific notation everywhere
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, value",
    [("1e-4", 1e-4), ("8e-1", 0.8), ("1e5", 100000.0), ("-2E3", -2000.0), ("1.0e-3", 1e-3), ("10", 10),
     ("0.5", 0.5), ("abc", "abc"), ("lin_3e-4", "lin_3e-4"), ("e5", "e5")],
)
def test_yaml_values_read_scientific_notation(text: str, value: Any, tmp_path: Path) -> None:
    """Was: ``1e-4`` and ``8e-1`` were strings (YAML 1.1), so ``--set learning_rate=1e-4``, the
    example of ``train --help``, failed; now the command line and the YAML files agree."""
    from aryl_gym.fileio import load_yaml_file, load_yaml_value

    assert load_yaml_value(text) == value and type(load_yaml_value(text)) is type(value)
    p = tmp_path / "x.yaml"
    p.write_text(f"k: {text}\n")
    assert load_yaml_file(p) == {"k": value}


@pytest.mark.parametrize(
    "text, integer, value",
    [("1e-4", False, 1e-4), ("8e-1", False, 0.8), ("1e5", True, 100000), ("100_000", True, 100000),
     ("12", True, 12), ("1.5", True, ValueError), ("1e-4", True, ValueError), ("nan", False, ValueError),
     ("inf", False, ValueError), ("abc", False, ValueError), ("", False, ValueError)],
)
def test_parse_number(text: str, integer: bool, value: Any) -> None:
    from aryl_gym.fileio import parse_number

    if value is ValueError:
        with pytest.raises(ValueError, match="expected"):
            parse_number(text, "--x", integer=integer)
    else:
        v = parse_number(text, "--x", integer=integer)
        assert v == value and (type(v) is int) == integer


def test_train_help_example_and_integer_flags_in_scientific_notation(capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import build_parser
    from aryl_gym.commands.train import build_config

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--set learning_rate=1e-4" in " ".join(capsys.readouterr().out.split())
    args = build_parser().parse_args(["train", "--config", "maskable_ppo", "--scenario", "tiny",
                                      "--timesteps", "2e5", "--set", "learning_rate=1e-4",
                                      "--set", "clip_range=8e-1"])
    assert args.timesteps == 200000
    cfg = build_config(args)
    assert cfg.hyperparams["learning_rate"] == 1e-4 and cfg.hyperparams["clip_range"] == 0.8
    assert cfg.total_timesteps == 200000
    with pytest.raises(SystemExit) as exc:  # argparse's own usage error
        main(["train", "--config", "maskable_ppo", "--timesteps", "1.5"])
    assert exc.value.code == 2 and "integer >= 1, got '1.5'" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# train: a bad config is an error before any work
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, yaml_text, match",
    [
        # was: UnboundLocalError deep in SB3's rollout collection
        ([], "algo: maskable_ppo\ndefault:\n  hyperparams: {n_steps: 0}\n", "n_steps: 0 must be at least 1"),
        ([], "algo: maskable_ppo\ndefault:\n  hyperparams: {batch_size: -4}\n", "batch_size: -4 must be at least 1"),
        # was: SB3's AssertionError "The learning rate schedule must be a float or a callable"
        (["--set", "learning_rate=abc"], None, "learning_rate: 'abc' is not a number"),
        (["--set", "clip_range=wide"], None, "clip_range: 'wide' is not a number"),
        # was: TypeError from the env creator
        (["--env", "nope=1"], None, "the env rejects them: unknown env option 'nope'"),
        (["--env", "window=-3"], None, "the env rejects them"),
    ],
)
def test_train_bad_config_is_an_error_before_any_work(extra: list[str], yaml_text: str | None, match: str,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sb3_contrib")
    cfg = "maskable_ppo"
    if yaml_text is not None:
        (tmp_path / "c.yaml").write_text(yaml_text)
        cfg = str(tmp_path / "c.yaml")
    rc, _, err = _cli(["train", "--config", cfg, "--scenario", "tiny", "--timesteps", "64",
                       "--out", str(tmp_path / "runs"), "--quiet", *extra], capsys)
    assert rc == 2 and match in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "the training config is empty"),
        ("algo: [unclosed\n", "not valid YAML"),  # was: yaml ParserError traceback
        ("- 1\n- 2\n", "not a training config"),  # was: AttributeError 'list' object has no attribute 'get'
        ("algo: 5\n", "algo must be a name, found 5"),
        ("algo: maskable_ppo\nenv_kwargs: [1]\n", "env_kwargs must be a mapping"),
    ],
)
def test_evaluate_a_run_with_a_damaged_config(text: str, match: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(ROOT / "agents" / "pretrained" / "ppo-v1.zip", run / "model.zip")
    (run / "config.yaml").write_text(text)
    rc, _, err = _cli(["evaluate", "--agent", str(run), "--scenario", "tiny", "--seeds", "0", "--no-progress"],
                      capsys)
    assert rc == 2 and match in err and str(run / "config.yaml") in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, match",
    [
        # was: a traceback after the other entrants had played
        (["--agent", "nope"], "--agent 'nope': unknown agent 'nope'"),
        (["--agent", "ppo-v1", "--against", "aryl,nope"], "--against 'nope': neither a policy"),
        # was: a 968 GiB allocation
        (["--agent", "ppo-v1", "--loads", "1e9"], "--loads '1e9': load 1e+09 is not in (0, 10]"),
        (["--agent", "ppo-v1", "--loads", "0.5,0.5"], "listed twice"),
        # was: two identical "loads" reported (tiny fixes num_jobs)
        (["--agent", "ppo-v1", "--scenario", "tiny", "--loads", "0.5,2.0"], "fixes workload.num_jobs=30"),
        (["--agent", "ppo-v1", "--agent", "ppo-v1"], "--agent: 'ppo-v1' is given twice"),
        (["--agent", "ppo-v1", "--against", "aryl,aryl"], "--against: 'aryl' is given twice"),
    ],
)
def test_eval_v1_checks_every_entrant_and_load_before_any_episode(
        argv: list[str], match: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from .helpers import load_script

    mod = load_script("eval_v1")
    played: list[Any] = []
    monkeypatch.setattr(mod, "evaluate", lambda *a, **k: played.append(a))
    monkeypatch.setattr(sys, "argv", ["eval_v1.py", *argv, "--seeds", "0"])
    with pytest.raises(SystemExit) as exc:
        mod.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and match in err and "Traceback" not in err
    assert played == []


@pytest.mark.parametrize(
    "runs, twice, match",
    [
        # was: TypeError tracebacks
        ([{"load": 0.9, "avg_jct": {"x": None, "aryl": [1.0]}}], False, "expected a list of per-seed avg JCTs"),
        ([{"load": 0.9, "avg_jct": {"x": [[1.0]], "aryl": [1.0]}}], False, "seed #0 has avg JCT [1.0]"),
        ([{"load": 0.9, "avg_jct": None}], False, "an entry without load/avg_jct"),
        ([{"load": None, "avg_jct": {"x": [1.0], "aryl": [1.0]}}], False, "load None is not a number"),
        # was: accepted silently
        ([{"load": 0.9, "avg_jct": {"x": [float("nan")], "aryl": [1.0]}}], False, "seed #0 has avg JCT nan"),
        ([{"load": 0.9, "avg_jct": {"x": [1.0, 0.0], "aryl": [1.0, 1.0]}}], False, "seed #1 has avg JCT 0.0"),
        ([{"load": 0.9, "avg_jct": {"x": [1.0], "aryl": [-3.0]}}], False, "seed #0 has avg JCT -3.0"),
        ([{"load": 0.9, "avg_jct": {"x": [1.0], "aryl": [2.0]}}], True, "given twice"),
    ],
)
def test_subset_odds_refuses_bad_values_and_a_file_pooled_twice(runs: Any, twice: bool, match: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from .helpers import load_script

    so = load_script("subset_odds")
    a = tmp_path / "a.json"
    a.write_text(json.dumps(runs))
    files = [str(a)]
    if twice:
        (tmp_path / "copy.json").write_text(a.read_text())
        files.append(str(tmp_path / "copy.json"))
    assert so.main([*files, "--agent", "x", "--load", "0.9", "--n", "1", "--draws", "5"]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_a_plugin_that_exits_at_import_is_named_and_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a plugin module calling ``sys.exit()`` at import took down every command (and
    ``gym.make``)."""
    import sys

    import gymnasium as gym
    from aryl_gym.agents import base

    root = tmp_path / "site"
    root.mkdir()
    (root / "quitter.py").write_text("import sys\nsys.exit(3)\n")
    info = root / "quitter-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: quitter\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{base.ENTRY_POINT_GROUP}]\nquit = quitter:Policy\n")
    base.load_plugins()
    saved = [dict(d) for d in (base._REGISTRY, base._BROKEN, base._PLUGINS, base._CONFLICTS)]
    monkeypatch.syspath_prepend(str(root))
    try:
        base.load_plugins(force=True)
        assert "aryl" in base.policy_names()
        rc, out, err = _cli(["policies"], capsys)
        assert rc == 0 and "aryl " in out and "plugin 'quit' cannot be used" in err and "SystemExit" in err
        with pytest.raises(ValueError, match="'quit' is installed but broken.*SystemExit: 3"):
            base.make_policy("quit")
        gym.make("aryl_gym/Aryl-v2", scenario="tiny").reset(seed=0)
    finally:
        for d, old in zip((base._REGISTRY, base._BROKEN, base._PLUGINS, base._CONFLICTS), saved):
            d.clear()
            d.update(old)
        sys.modules.pop("quitter", None)


@pytest.mark.parametrize(
    "argv",
    [
        ["--rows", ""],  # was: every row ran
        ["--rows", " , "],
        ["--study", "prediction-error", "--policies", ""],
        ["--study", "hetero", "--scenario", ""],
        ["--rows", "queue-aryl-baseline,queue-aryl-baseline"],  # was: the row printed twice
        ["--study", "prediction-error", "--policies", "aryl,aryl"],
    ],
)
def test_reproduce_empty_or_repeated_lists_are_errors(argv: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _cli(["reproduce", "--scale", "tiny", *argv, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and ("is empty" in err or "is given twice" in err) and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_train_interrupted_saves_a_checkpoint_and_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a Ctrl-C in ``train`` saved nothing and named no checkpoint to resume from."""
    sb3c = pytest.importorskip("sb3_contrib")
    real_learn = sb3c.MaskablePPO.learn
    calls: list[int] = []

    def learn_then_ctrl_c(self: Any, *a: Any, **k: Any) -> Any:
        calls.append(1)
        real_learn(self, total_timesteps=64, callback=k.get("callback"), reset_num_timesteps=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(sb3c.MaskablePPO, "learn", learn_then_ctrl_c)
    rc, out, err = _cli(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "4096",
                         "--set", "n_steps=64", "--set", "batch_size=32", "--eval-freq", "0", "--n-envs", "1",
                         "--out", str(tmp_path / "runs"), "--quiet"], capsys)
    assert rc == 130 and calls
    (ck,) = (tmp_path / "runs").glob("*/checkpoints/rl_model_64_steps.zip")
    assert f"interrupted at 64 steps: saved {ck}" in err
    assert f"aryl-gym train --resume {ck} --timesteps 4096" in err
    from aryl_gym.train.runner import resume_plan

    assert resume_plan(ck, 4096) == (ck.parent.parent, 64)  # it continues the same run


# ----------------------------------------------------------------------------------------------
# size guards: refused before any work, with the override named
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "yaml_text, match",
    [
        # was: 11 GB after 2 minutes, no message
        ("workload: {num_jobs: 100000000}", "workload.num_jobs is 100,000,000, above the limit of 2,000,000"),
        ("cluster: {train_servers: 1000000}", "train_servers + cluster.inf_servers is 1,000,004"),
        ("cluster: {train_gpus_per_server: 1000000}", "GPUs per server is 1,000,000, above the limit of 64"),
        ("workload: {duration_hours: 100000000}", "rounds (workload.duration_hours"),
        ("sim: {interval: 1e-7}", "above the limit of 10,000,000"),
        ("sim: {horizon_hours: 1e9}", "above the limit of 10,000,000"),
    ],
)
def test_a_huge_scenario_is_refused_before_any_work(yaml_text: str, match: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.config import ConfigError

    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    p = tmp_path / "big.yaml"
    p.write_text(f"name: big\n{yaml_text}\n")
    rc, _, err = _cli(["simulate", "--scenario", str(p), "--policy", "fifo", "--no-progress"], capsys)
    assert rc == 2 and match in err and "ARYL_GYM_ALLOW_HUGE=1" in err
    monkeypatch.setenv("ARYL_GYM_ALLOW_HUGE", "1")  # the override: loads (not run here)
    try:
        load_scenario(str(p))
    except ConfigError as exc:  # pragma: no cover - would be a failure
        raise AssertionError(exc) from None


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--seeds", "100000000"], "--seeds 100,000,000: at most 10,000"),
        (["--sweep", "workload.num_jobs=100000000"], "workload.num_jobs is 100,000,000"),
    ],
)
def test_reproduce_size_guards(argv: list[str], match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    rc, _, err = _cli(["reproduce", "--scale", "tiny", *argv, "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert rc == 2 and match in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_device_as_a_data_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``inference.csv: /dev/zero`` read forever."""
    p = tmp_path / "dev.yaml"
    p.write_text("name: dev\ninference: {mode: csv, csv: /dev/zero}\n")
    rc, _, err = _cli(["simulate", "--scenario", str(p), "--policy", "fifo", "--no-progress"], capsys)
    assert rc == 2 and "/dev/zero: not a regular file" in err


BOMB = "".join(
    f"    {k}: &{k} [{', '.join([f'*{p}'] * 10) if p else ', '.join(['1'] * 10)}]\n"
    for p, k in zip(["", *"abcdefgh"], "abcdefghi")
)


@pytest.mark.parametrize(
    "where",
    ["policy_kwargs", "env_kwargs"],
)
def test_a_yaml_alias_bomb_in_a_training_config_is_refused_at_once(where: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Was: 3 GB at 60 s (the same bomb in a scenario was rejected at once)."""
    p = tmp_path / "bomb.yaml"
    p.write_text(f"algo: maskable_ppo\ndefault:\n  {where}:\n{BOMB}")
    rc, _, err = _cli(["train", "--config", str(p), "--scenario", "tiny", "--timesteps", "64",
                       "--out", str(tmp_path / "runs")], capsys)
    assert rc == 2 and "expand to more than 1,000,000 values" in err and str(p) in err


def test_yaml_alias_cap_everywhere(tmp_path: Path) -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.fileio import load_yaml_file, load_yaml_value

    with pytest.raises(ConfigError, match="expand to more than"):
        load_yaml_value("{" + BOMB.replace("\n", ", ").replace("    ", "").rstrip(", ") + "}")
    (tmp_path / "rec.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="recursive alias"):
        load_yaml_file(tmp_path / "rec.yaml")
    # ordinary aliases still work
    (tmp_path / "ok.yaml").write_text("a: &a {x: 1e-4}\nb: *a\n")
    assert load_yaml_file(tmp_path / "ok.yaml") == {"a": {"x": 1e-4}, "b": {"x": 1e-4}}


def test_a_sequential_agent_repeating_an_invalid_action_ends_its_episode() -> None:
    """Was: an invalid action is a no-op that never advances time, so an agent repeating one
    never ended its episode (a hang with no message)."""
    import gymnasium as gym

    from aryl_gym.envs.allocation import MAX_INVALID_STREAK

    env = gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential", window=4)
    env.reset(seed=0)
    t0 = env.unwrapped.sim.now
    n = 0
    while n < 10 * MAX_INVALID_STREAK:
        _, _, term, trunc, info = env.step(-1)  # out of range: invalid
        n += 1
        assert info["invalid"] == 1
        if term or trunc:
            break
    assert trunc and not term and n == MAX_INVALID_STREAK
    assert info["invalid_streak"] == MAX_INVALID_STREAK and env.unwrapped.sim.now == t0
    assert info["episode_result"].jobs_unfinished > 0
    # a valid action in between resets the count
    env.reset(seed=0)
    for _ in range(MAX_INVALID_STREAK - 1):
        env.step(-1)
    mask = env.unwrapped.action_masks()
    env.step(int(np.flatnonzero(mask)[0]))
    _, _, term, trunc, info = env.step(-1)
    assert not trunc and env.unwrapped.invalid_streak <= 1


def test_yaml_merge_keys_work_and_duplicates_still_fail(tmp_path: Path) -> None:
    """Was: ``<<: *base`` failed with "could not determine a constructor for the tag merge"."""
    from aryl_gym.config import ConfigError
    from aryl_gym.fileio import load_yaml_file

    p = tmp_path / "m.yaml"
    p.write_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n")
    assert load_yaml_file(p) == {"base": {"x": 1, "y": 2}, "d": {"x": 1, "y": 3}}
    p.write_text("d:\n  y: 1\n  y: 2\n")
    with pytest.raises(ConfigError, match="duplicate key 'y'"):
        load_yaml_file(p)


def test_seed_study_duplicate_agent_names_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--agent x=A --agent x=B`` kept B and dropped A with no note."""
    rc, _, err = _cli(["seed-study", "--scenario", "tiny", "--seeds", "0-1", "--policies", "fifo,aryl",
                       "--agent", "x=ppo-v1", "--agent", "x=ppo-testbed", "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "--agent x=...: the name is given twice" in err and not (tmp_path / "o").exists()


def test_eval_v1_one_seed_has_no_interval(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: one seed printed intervals of zero width ([0.893, 0.893]), as if certain."""
    pytest.importorskip("sb3_contrib")
    from .helpers import load_script

    mod = load_script("eval_v1")
    r = mod.evaluate(["ppo-v1"], "tiny", None, [0], ["aryl"])
    v = r["vs"]["ppo-v1"]["aryl"]
    assert v["boot_lo"] is None and v["t_hi"] is None
    assert v["ratio_of_means"] > 0
    mod._print_table(r)
    out = capsys.readouterr().out
    assert "[n/a: one seed]" in out


def test_seed_study_stale_rows_name_its_own_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a resumed seed study whose scenario changed said "(or --overwrite)", a flag the
    seed study does not have (its flag is --fresh)."""
    scen = tmp_path / "mine.yaml"
    text = (ROOT / "configs" / "scenarios" / "tiny.yaml").read_text().replace("name: tiny", "name: mine")
    scen.write_text(text)
    argv = ["seed-study", "--scenario", str(scen), "--seeds", "0-1", "--policies", "fifo,aryl",
            "--workers", "1", "--out", str(tmp_path / "o")]
    rc, _, err = _cli(argv, capsys)
    assert rc == 0, err
    scen.write_text(text.replace("num_jobs: 30", "num_jobs: 31"))
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and "another configuration" in err and "seed-study --fresh" in err


def test_leaderboard_one_seed_score_has_no_zero_width_interval() -> None:
    """Was: with one seed the score IQM had an interval of zero width, as if certain."""
    from aryl_gym.leaderboard import report
    from aryl_gym.stats import available

    if not available():
        pytest.skip("the stats extra is not installed")
    per = {n: {"testbed": {0: {"avg_jct": j, "jct_lower_bound": 1000.0, "jobs_unfinished": 0}}}
           for n, j in (("aryl", 4000.0), ("fifo", 8000.0))}
    cmp = report.compare_entrants(per, ["aryl", "fifo"], ["testbed"], "avg_jct", "fifo", "aryl")
    sc = cmp["entrants"]["aryl"]["score_iqm"]
    assert sc["value"] == pytest.approx(0.25) and sc["ci"] == [None, None]
    assert report.fmt_ci(sc) == "0.250 [n/a: one seed]"


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--seeds", "0-1", "--policies", "aryl"], "at least two"),  # was: an empty table, exit 0
        (["--seeds", "0", "--policies", "fifo,aryl"], "at least two seeds"),
    ],
)
def test_seed_study_that_cannot_compare_says_why(argv: list[str], match: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(["seed-study", "--scenario", "tiny", *argv, "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and match in err and "pair a / b" not in out


def test_train_resume_from_a_cut_checkpoint_names_the_latest_good_one(tmp_path: Path) -> None:
    """A kill during SB3's checkpoint save leaves a zip without its directory: resuming it used
    to fail inside SB3's loader."""
    from aryl_gym.config import ConfigError
    from aryl_gym.train.runner import resume_plan

    run = _fake_run(tmp_path, [256, 512], None)
    cut = run / "checkpoints" / "rl_model_768_steps.zip"
    cut.write_bytes((run / "checkpoints" / "rl_model_512_steps.zip").read_bytes()[:20])
    with pytest.raises(ConfigError, match=r"not a complete model \.zip.*latest good one is .*rl_model_512_steps\.zip"):
        resume_plan(cut, 2048)
    with pytest.raises(ConfigError, match="is a folder; give a checkpoint .zip"):
        resume_plan(run, 2048)


def test_evaluate_marks_an_episode_ended_early(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``evaluate`` on an episode that ended early (3 jobs finished, 66 not) reported the
    finished jobs' avg JCT (928 s against Aryl's 4,739 s) in the table with no mark."""
    import dataclasses

    from aryl_gym.train import evaluation

    real = evaluation.run_reference

    def ended_early(name: str, *a: Any, **k: Any) -> Any:
        res = real(name, *a, **k)
        if name == "sjf":  # as if it had thrashed: most jobs unfinished, a flattering avg JCT
            res = dataclasses.replace(res, jobs_unfinished=20, failed=1, avg_jct_finished=res.avg_jct / 5,
                                      thrashing=True)
        return res

    monkeypatch.setattr(evaluation, "run_reference", ended_early)
    rc, out, err = _cli(["evaluate", "--agent", "aryl", "--against", "sjf", "--scenario", "tiny", "--seeds", "0",
                         "--table", "--no-progress"], capsys)
    assert rc == 0
    assert "sjf †" in out and "† left jobs unfinished in some episode" in out
    assert "aryl †" not in out
    assert "WARNING sjf left jobs unfinished on 1 of 1 seed(s): 0 (thrashing, 20 jobs)" in err
    rc, out, _ = _cli(["evaluate", "--agent", "aryl", "--against", "sjf", "--scenario", "tiny", "--seeds", "0",
                       "--no-progress"], capsys)
    rows = {r["policy"]: r for r in json.loads(out)["rows"]}
    assert rows["sjf"]["jobs_unfinished"] == 20 and rows["sjf"]["failed"] == 1
    assert 0 < rows["sjf"]["avg_jct_finished"] < rows["sjf"]["avg_jct"]


def test_two_resumes_of_one_run_at_once_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two ``train --resume`` of one run at once would write the same checkpoints and model.zip."""
    pytest.importorskip("sb3_contrib")
    run = _fake_run(tmp_path, [256, 512], None)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    fd = os.open(run / ".lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"777\n")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        rc, _, err = _cli(["train", "--resume", str(run / "checkpoints" / "rl_model_512_steps.zip"),
                           "--timesteps", "2048", "--quiet"], capsys)
    finally:
        os.close(fd)
    assert rc == 2 and "another aryl-gym run (pid 777)" in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"} == {
        p: b for p, b in before.items()}


@pytest.mark.parametrize(
    "make, match",
    [
        ("cut", "a damaged .npz (BadZipFile"),  # was: a zipfile.BadZipFile traceback
        ("layout", "expected observations (obs/KEY arrays) and 'actions'"),
        ("missing", "file not found"),
    ],
)
def test_train_bad_demos_fail_before_a_run_folder(make: str, match: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a cut .npz gave a BadZipFile traceback, and every bad --bc-demos left a run folder."""
    pytest.importorskip("sb3_contrib")
    good = tmp_path / "d.npz"
    np.savez(good, obs=np.zeros((100, 5)), act=np.zeros(100))
    path = tmp_path / "x.npz"
    if make == "cut":
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif make == "layout":
        path = good
    rc, _, err = _cli(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "64",
                       "--bc-demos", str(path), "--out", str(tmp_path / "runs"), "--quiet"], capsys)
    assert rc == 2 and match in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_train_resume_of_a_missing_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "no config.yaml in its run folder" for a checkpoint path that does not exist."""
    rc, _, err = _cli(["train", "--resume", str(tmp_path / "nope.zip"), "--timesteps", "64"], capsys)
    assert rc == 2 and "nope.zip: file not found" in err


# ----------------------------------------------------------------------------------------------
# the "unclear" cases, tried one by one: scientific notation in every numeric flag, empty and
# repeated lists, empty output paths, empty results with exit 0
# ----------------------------------------------------------------------------------------------
def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``aryl-gym ARGV``: exit code (argparse's own errors included), stdout, stderr."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture()
def trace_csv(tmp_path: Path) -> Path:
    """A two-job CSV trace with a byte-order mark, CRLF line ends and scientific notation."""
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xef\xbb\xbfsubmit,gpus,duration\r\n0,1,600\r\n1.2e2,2,1.8e3\r\n")
    return p


#: short runs, so that a row that regresses fails in seconds rather than running a default-size job
_SS = ["--scenario", "tiny", "--seeds", "0-1", "--policies", "fifo,sjf", "--out", "ss"]
_RP = ["--scale", "tiny", "--rows", "jct-aryl-baseline", "--seeds", "1", "--no-progress"]
_TR = ["--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "64", "--set", "batch_size=32",
       "--eval-freq", "0", "--checkpoint-freq", "0", "--quiet"]
_COLS = ["--trace-format", "csv", "--columns", "submit=submit,gpus=gpus,duration=duration"]


@pytest.mark.parametrize(
    "argv, rc, where, match",
    [
        # integer flags read 1e0 as 1 (was: "invalid int value" / "must be an integer >= 0")
        (["simulate", "--scenario", "tiny", "--seed", "1e0", "--no-progress"], 0, "out", "seed 1"),
        (["simulate", "--scenario", "tiny", "--train-servers", "2e0", "--no-progress"], 0, "out", "avg_jct"),
        (["simulate", "--scenario", "tiny", "--seed", "1.5"], 2, "err", "--seed: must be an integer >= 0"),
        (["compare", "--scenario", "tiny", "--policies", "fifo", "--seeds", "1e0-2", "--quiet"], 0, "out",
         "seeds 1,2"),
        (["evaluate", "--agent", "", "--seeds", "1e3"], 2, "err", "--agent '': give a shipped agent name"),
        (["calibrate", "--workers", "1e0", "--load-grid", ""], 2, "err", "--load-grid '': give loads"),
        (["calibrate", "--workers", "0", "--relevance", "--load-grid", "0.5"], 2, "err",
         "--workers: must be an integer >= 1"),
        (["reproduce", "--scale", "tiny", "--first-seed", "1e0", "--rows", "nope"], 2, "err", "unknown row 'nope'"),
        (["reclaim-study", "--synthetic", "2e0", "--bins", "2e1,6e1", "--min-servers", "4e0",
          "--max-servers", "2e1", "--json"], 0, "out", '"instances"'),
        (["leaderboard", "--validate-seed", "1e0"], 2, "err", "give --suite NAME"),
        # seed-study: its --seeds, --policies and --workers (was: "invalid literal for int() with
        # base 10: ''", an IndexError traceback, --workers 0 and -1 accepted)
        (["seed-study", "--scenario", "tiny", "--seeds", ""], 2, "err", "--seeds: give at least one seed"),
        (["seed-study", "--scenario", "tiny", "--seeds", ","], 2, "err", "--seeds: give at least one seed"),
        (["seed-study", "--scenario", "tiny", "--seeds", "0,0,1"], 2, "err", "seed 0 is given twice"),
        (["seed-study", "--scenario", "tiny", "--seeds", "1e0,2", "--policies", "fifo"], 2, "err",
         "give at least two"),
        (["seed-study", "--scenario", "tiny", "--policies", ""], 2, "err", "--policies: give at least one name"),
        (["seed-study", "--scenario", "tiny", "--policies", ","], 2, "err", "--policies: give at least one name"),
        (["seed-study", *_SS, "--workers", "0"], 2, "err", "--workers: must be an integer >= 1"),
        (["seed-study", *_SS, "--workers", "-1"], 2, "err", "--workers: must be an integer >= 1"),
        # an empty output path (was: the current folder, or the default, silently)
        (["seed-study", *_SS[:-2], "--out", ""], 2, "err", "--out: is empty"),
        (["demos", "--out", ""], 2, "err", "--out: is empty"),  # was: "PosixPath('.') has an empty name"
        (["leaderboard", "--suite", "nope", "--out", ""], 2, "err", "--out: is empty"),
        (["main", "--suite", "nope", "--out", ""], 2, "err", "--out: is empty"),
        (["reproduce", *_RP, "--out", ""], 2, "err", "--out: is empty"),
        (["train-reclaim", "--out", ""], 2, "err", "--out: is empty"),  # was: runs/ in the current folder
        (["train-reclaim", "--cache", ""], 2, "err", "--cache: is empty"),
        (["train", *_TR, "--out", ""], 2, "err", "--out: is empty"),
        # reproduce --sweep: a value or a knob given twice (was: run and reported twice)
        (["reproduce", *_RP, "--out", "rp", "--sweep", "workload.num_jobs=20,2e1"], 2, "err", "is given twice"),
        (["reproduce", *_RP, "--out", "rp", "--sweep", "workload.num_jobs=20", "--sweep", "workload.num_jobs=30"],
         2, "err", "the knob is swept twice"),
        # train: a key given twice (was: the later one won silently)
        (["train", *_TR, "--out", "runs", "--set", "n_steps=32", "--set", "n_steps=64"], 2, "err",
         "--set n_steps=...: the key is given twice"),
        (["train", *_TR, "--out", "runs", "--env", "window=8", "--env", "window=4"], 2, "err",
         "--env window=...: the key is given twice"),
    ],
)
def test_unclear_cases_cli(argv: list[str], rc: int, where: str, match: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # a case that used to write into the current folder writes here
    got, out, err = _run(argv, capsys)
    assert got == rc, (got, err[-400:])
    assert match in (out if where == "out" else err), (out[-400:], err[-400:])
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "extra, rc, match",
    [
        (["--time-window", "0h,1e1h"], 0, "avg_jct"),  # was: "this trace has relative times"
        (["--time-window", ","], 2, "give a START, an END or both"),  # was: the whole trace
        (["--time-window", "0,nan"], 2, "time_window end 'nan' is not a finite number"),
        (["--max-jobs", "1e0"], 0, "avg_jct                    600\n"),  # was: invalid int value (one job of 600 s kept)
        (["--trace-option", "max_jobs=1e0"], 0, "avg_jct                    600\n"),  # was: "got 1.0"
        (["--trace-option", "max_jobs=1", "--max-jobs", "2"], 2, "both set max_jobs"),
        (["--vc", ""], 2, "vc '' names no virtual cluster"),  # was: every virtual cluster
        (["--vc", "abc"], 2, "vc applies to philly traces only; this trace is read as csv"),  # was: ignored
        # another reader's option (was: ignored)
        (["--trace-option", "gavel_extrapolate=false"], 2, "gavel_extrapolate applies to gavel traces only"),
        (["--trace-option", "profile_gpu=V100"], 2, "profile_gpu applies to pollux traces only"),
        (["--trace-option", "fractional_gpus=ceil"], 0, "avg_jct"),  # the csv reader's own option
        (["--trace-option", ""], 2, "--trace-option '': expected KEY=VALUE"),  # was: ignored
        # a key given twice (was: the later one won silently)
        (["--trace-option", "sort=true", "--trace-option", "sort=false"], 2, "sort=...: the option is given twice"),
        (["--units", "duration=s,duration=min"], 2, "'duration' is given twice"),
    ],
)
def test_unclear_cases_trace_options(extra: list[str], rc: int, match: str, trace_csv: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    got, out, err = _run(["simulate", "--scenario", "tiny", "--trace", str(trace_csv), *_COLS,
                          "--no-progress", *extra], capsys)
    assert got == rc, err[-400:]
    assert match in (out if rc == 0 else err) and "Traceback" not in err


def test_trace_columns_given_twice(trace_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got, _, err = _run(["trace-info", str(trace_csv), "--seed", "1e0", "--trace-format", "csv", "--columns",
                        "submit=submit,gpus=gpus,duration=duration,gpus=submit"], capsys)
    assert got == 2 and "'gpus' is given twice" in err


@pytest.mark.parametrize(
    "rows, match",
    [
        ("time,utilization\ninf,0.5\n", "u.csv:2: column 'time': 'inf' is not a finite number"),  # was: no file
        ("time,utilization\n0,nan\n", "u.csv:2: column 'utilization': 'nan' is not a number"),
    ],
)
def test_utilisation_csv_non_finite_values_name_file_and_line(rows: str, match: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "u.csv").write_text(rows)
    text = (ROOT / "configs/scenarios/tiny.yaml").read_text()
    text = text.replace("  mode: diurnal", f"  mode: csv\n  csv: {tmp_path / 'u.csv'}")
    (tmp_path / "s.yaml").write_text(text)
    got, _, err = _run(["simulate", "--scenario", str(tmp_path / "s.yaml"), "--no-progress"], capsys)
    assert got == 2 and match in err and "Traceback" not in err


def test_yaml_integer_fields_take_scientific_notation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``num_jobs: 3e1`` refused ("must be an integer, got 30.0") while ``--max-jobs 1e1``
    and ``--set n_steps=...`` read it; a fraction is still refused."""
    text = (ROOT / "configs/scenarios/tiny.yaml").read_text()
    assert "num_jobs: 30\n" in text and "train_servers: 2\n" in text
    (tmp_path / "sci.yaml").write_text(text.replace("num_jobs: 30\n", "num_jobs: 3e1\n")
                                       .replace("train_servers: 2\n", "train_servers: 2e0\n"))
    (tmp_path / "frac.yaml").write_text(text.replace("num_jobs: 30\n", "num_jobs: 30.5\n"))
    a, b = load_scenario(str(tmp_path / "sci.yaml")), load_scenario("tiny")
    assert a.workload.num_jobs == 30 and type(a.workload.num_jobs) is int and a.cluster == b.cluster
    assert rp.config_hash(a) == rp.config_hash(b)
    got, _, err = _run(["simulate", "--scenario", str(tmp_path / "frac.yaml")], capsys)
    assert got == 2 and "workload.num_jobs must be an integer, got 30.5" in err
    from aryl_gym.leaderboard.suites import parse_seeds

    assert parse_seeds([0, 1e3], "suite") == (0, 1000)  # was: "seeds[1] must be an integer, got 1000.0"


def test_train_counts_in_scientific_notation_and_bad_counts(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--set n_steps=6.4e1`` (or ``n_steps: 6.4e1`` in the YAML) and ``--set n_steps=``
    ended in a TypeError traceback from SB3, after the run folder was made."""
    sb3 = pytest.importorskip("sb3_contrib")
    from aryl_gym.config import ConfigError
    from aryl_gym.train.config import check_hyperparams, whole_counts

    hp = whole_counts(sb3.MaskablePPO, {"n_steps": 64.0, "batch_size": 3.2e1, "learning_rate": 1e-4, "gamma": 1.0})
    assert hp == {"n_steps": 64, "batch_size": 32, "learning_rate": 1e-4, "gamma": 1.0}
    assert type(hp["n_steps"]) is int and type(hp["gamma"]) is float
    for bad in (64.5, None):
        with pytest.raises(ConfigError, match="n_steps: .* must be a whole number"):
            check_hyperparams(sb3.MaskablePPO, {"n_steps": bad})
    got, _, err = _run(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--out", str(tmp_path),
                        "--set", "n_steps="], capsys)
    assert got == 2 and "n_steps: None must be a whole number" in err and list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def one_seed_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A leaderboard of fifo and sjf on one tiny seed (two short episodes)."""
    d = tmp_path_factory.mktemp("lb1")
    (d / "suite.yaml").write_text("name: t\nscenarios: [tiny]\nseeds: [0]\nbaseline: fifo\n"
                                  "policies: [fifo, sjf]\nagents: {}\n")
    assert main(["leaderboard", "--suite", str(d / "suite.yaml"), "--out", str(d / "out"), "--workers", "1",
                 "--no-progress", "--no-plots", "--no-tensorboard"]) == 0
    return d / "out"


def test_leaderboard_one_seed_ratio_has_no_interval(one_seed_board: Path) -> None:
    """Was: one seed gave the x Baseline column '-' (no ratio, no reason) and a header claiming
    "paired 95% CIs"; now the ratio with "[n/a: one seed]"."""
    md = (one_seed_board / "leaderboard.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| ") and "| sjf |" in ln)
    assert "[n/a: one seed]" in row.split("|")[4], row
    agg = json.loads((one_seed_board / "leaderboard.json").read_text())
    sjf = next(e for e in agg["scenarios"]["tiny"]["entrants"] if e["policy"] == "sjf")
    assert sjf["vs_baseline"]["ci"] == [None, None] and 0 < sjf["vs_baseline"]["value"] < 10
    assert not sjf["tied_with"]  # one seed separates nothing and ties nothing
    from aryl_gym.leaderboard.report import render_console

    head = render_console(agg).splitlines()[0]
    assert "1 seed," in head and "no intervals" in head and "95% CIs" not in head


def test_results_csv_with_a_byte_order_mark_is_read(one_seed_board: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a results.csv saved with a BOM was "not this version's schema (unexpected: \\ufeffsuite)"."""
    p = tmp_path / "results.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (one_seed_board / "results.csv").read_bytes())
    got, out, err = _run(["leaderboard", "--validate", str(p)], capsys)
    assert got == 0 and "validated 2 of 2 rows" in out, err


def test_reproduce_cached_only_with_nothing_cached_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a table of '-' rows, "0 of 12 rows within tolerance" and exit 0."""
    got, _, err = _run(["reproduce", "--scale", "tiny", "--cached-only", "--no-progress",
                        "--out", str(tmp_path / "rp")], capsys)
    assert got == 1 and "--cached-only: no episode of this table is cached" in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--scenario", ","], "--scenario ',': give at least one scenario"),  # was: no output, exit 0
        (["--scenario", ""], "--scenario '': give at least one scenario"),
        (["--against", ""], "--against '': give at least one reference"),  # was: no comparison
        (["--seeds", "1e0,1e0"], "seed 1 is given twice"),
    ],
)
def test_eval_v1_empty_lists(argv: list[str], match: str, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from .helpers import load_script

    mod = load_script("eval_v1")
    played: list[Any] = []
    monkeypatch.setattr(mod, "evaluate", lambda *a, **k: played.append(a))
    monkeypatch.setattr(sys, "argv", ["eval_v1.py", "--agent", "ppo-v1", "--seeds", "0", *argv])
    with pytest.raises(SystemExit) as exc:
        mod.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and match in err and played == []


@pytest.mark.parametrize(
    "argv, rc, match",
    [
        (["--n", ""], 2, "--n '': give at least one subset size"),  # was: an empty table, exit 0
        (["--n", ","], 2, "--n ',': give at least one subset size"),
        (["--n", "2,2"], 2, "--n: 2 is given twice"),  # was: the row printed twice
        (["--n", "2.5"], 2, "expected a whole number"),
        (["--n", "0"], 2, "subset sizes must be >= 1"),
        (["--n", "9"], 2, "n=9 must be between 1 and the 3 pooled seeds"),
        (["--load", "nan"], 2, "--load: expected a finite number"),  # was: NaN matched every load
        (["--point", "nan"], 2, "--point: expected a finite number"),  # was: every odds 0.000
        (["--upper", "inf"], 2, "--upper: expected a finite number"),
        (["--n", "2e0", "--draws", "1e1", "--load", "9e-1"], 0, "| 2 |"),  # was: invalid int value
        # one seed: a zero-width interval (was: counted as meeting the bar)
        (["--n", "1"], 0, "| 1 | 1.000 | n/a (one seed has no interval) |"),
    ],
)
def test_subset_odds_flags(argv: list[str], rc: int, match: str, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from .helpers import load_script

    so = load_script("subset_odds")
    f = tmp_path / "a.json"
    f.write_text(json.dumps([{"load": 0.9, "avg_jct": {"x": [1.0, 2.0, 3.0], "aryl": [2.0, 3.0, 4.0]}}]))
    base = {"--load": "0.9", "--n": "2", "--draws": "5"}
    args = [str(f), "--agent", "x", *argv]
    for k, v in base.items():
        if k not in argv:
            args += [k, v]
    try:
        got = so.main(args)
    except SystemExit as exc:
        got = int(exc.code or 0)
    cap = capsys.readouterr()
    assert got == rc and match in (cap.out if rc == 0 else cap.err), (cap.out, cap.err)


def test_a_closed_pipe_is_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: ``aryl-gym simulate --json | head -c 100`` ended in a BrokenPipeError traceback."""
    import sys

    class Closed:
        def write(self, s: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            raise OSError("no descriptor")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["policies"]) == 141


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--only", ""], "--only: give at least one name, e.g. sim,knapsack"),  # was: every benchmark
        (["--only", ","], "--only: give at least one name"),  # was: "unknown benchmark(s) , "
        (["--quick", "--only", "pollux"], "not measured with --quick"),  # was: nothing printed, exit 0
    ],
)
def test_bench_empty_or_skipped_selection(argv: list[str], match: str, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import aryl_gym.benchmarks as benchmarks

    ran: list[str] = []

    def fake_fn(name: str) -> Any:
        def fn(quick: bool) -> list[dict[str, Any]]:
            if quick and name in benchmarks.QUICK_SKIPS:
                return []
            ran.append(name)
            return [{"x": 1}]
        return fn

    fake = [type(b)(b.name, b.title, fake_fn(b.name)) for b in benchmarks.BENCHMARKS]
    monkeypatch.setattr(benchmarks, "BENCHMARKS", fake)
    got, _, err = _run(["bench", *argv], capsys)
    assert got == 2 and match in err and ran == []
    got, _, err = _run(["bench", "--quick", "--only", "pollux,knapsack"], capsys)
    assert got == 0 and "pollux: skipped by --quick" in err and ran == ["knapsack"]
