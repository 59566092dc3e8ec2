"""The leaderboard: suites, rows, tables, plots, TensorBoard, resume, validation, Ray (issue 8)."""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from aryl_gym.cli import main as cli_main
from aryl_gym.config import ConfigError
from aryl_gym.episodes import EpisodeOutput, EpisodeTask, local_executor
from aryl_gym.leaderboard import load_suite, run_leaderboard, suite_from_dict
from aryl_gym.leaderboard.results import COLUMNS, VOLATILE_COLUMNS, read_rows, rewrite_rows
from aryl_gym.leaderboard.runner import run_suite
from aryl_gym.leaderboard.validate import validate_csv

SEEDS = [0, 1]
AGENT_SOURCE = "tests.test_leaderboard:greedy_agent"


# ----------------------------------------------------------------------------------------------
# a user agent of the module:factory kind (acts through the env in `sequential` mode)
# ----------------------------------------------------------------------------------------------


class _GreedyAgent:
    """Grant the first valid window slot, else commit: a FIFO-like agent with SB3's ``predict``."""

    def __init__(self, env: Any):
        self.k = int(env.unwrapped.k)

    def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):
        mask = np.asarray(action_masks if action_masks is not None else obs["action_mask"]) > 0.5
        valid = np.flatnonzero(mask)
        grants = valid[valid < self.k]
        return np.int64(grants[0] if len(grants) else valid[-1]), state


def greedy_agent(env: Any) -> _GreedyAgent:
    return _GreedyAgent(env)


def _env_registered() -> bool:
    import gymnasium as gym

    import aryl_gym  # noqa: F401

    return "aryl_gym/Aryl-v1" in gym.envs.registry


def _suite_dict(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "tinytest",
        "description": "tiny end-to-end test suite",
        "scenarios": ["tiny"],
        "seeds": list(SEEDS),
        "baseline": "fifo",
        "env_kwargs": {"action_mode": "sequential"},
        "policies": ["fifo", "sjf"],
        "agents": {"greedy": AGENT_SOURCE},
    }
    d.update(over)
    return d


def _write_suite(path: Path, **over: Any) -> Path:
    path.write_text(yaml.safe_dump(_suite_dict(**over)))
    return path


def _stable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in VOLATILE_COLUMNS}


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the tiny suite through the command line (serial, in this process)."""
    d = tmp_path_factory.mktemp("lb")
    suite_file = _write_suite(d / "tiny.yaml")
    out = d / "out"
    t0 = time.perf_counter()
    rc = cli_main(
        ["leaderboard", "--suite", str(suite_file), "--out", str(out), "--workers", "1", "--no-progress"]
    )
    return {"rc": rc, "out": out, "suite_file": suite_file, "wall": time.perf_counter() - t0}


# ----------------------------------------------------------------------------------------------
# end to end
# ----------------------------------------------------------------------------------------------


def test_e2e_rows(e2e: dict[str, Any]) -> None:
    assert e2e["rc"] == 0
    with open(e2e["out"] / "results.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert header == COLUMNS
    rows, bad = read_rows(e2e["out"] / "results.csv")
    assert bad == 0
    entrants = ["fifo", "sjf"] + (["greedy"] if _env_registered() else [])
    assert sorted((r["policy"], r["seed"]) for r in rows) == sorted(
        (p, s) for p in entrants for s in SEEDS
    )
    for r in rows:
        assert r["suite"] == "tinytest" and r["scenario"] == "tiny"
        assert r["env_id"] == "aryl_gym/Aryl-v2" and r["env_version"] == "v2"
        assert len(r["config_hash"]) == 16 and r["commit"]
        assert r["jobs_total"] == 30 and r["wall_time_s"] > 0
        assert r["note"] == ""  # for agents: the env's trace is the native one


def test_rows_equal_native_runs(e2e: dict[str, Any]) -> None:
    """A policy row is exactly the simulator's own result for that scenario and seed."""
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    rows, _ = read_rows(e2e["out"] / "results.csv")
    for r in rows:
        if r["kind"] != "policy":
            continue
        res = make_episode("tiny", r["seed"]).simulator().run(make_policy(r["policy"])).to_dict()
        for k in ("avg_jct", "p95_jct", "avg_queue_time", "makespan", "combined_usage", "rounds"):
            assert r[k] == res[k], (r["policy"], r["seed"], k)


def test_e2e_table(e2e: dict[str, Any]) -> None:
    out = e2e["out"]
    rows, _ = read_rows(out / "results.csv")
    data = json.loads((out / "leaderboard.json").read_text())
    entrants = data["scenarios"]["tiny"]["entrants"]
    # rank = order of mean avg JCT, computed here from the rows by hand
    means = {}
    for r in rows:
        means.setdefault(r["policy"], []).append(r["avg_jct"])
    expect = sorted(means, key=lambda p: (sum(means[p]) / len(means[p]), p))
    ranks = [e["rank"] for e in entrants]
    if data["protocol"]["intervals"]:
        # ranks with ties (test_leaderboard_stats.py checks them): sorted by rank, then mean
        assert ranks[0] == 1 and ranks == sorted(ranks)
        assert sorted(e["policy"] for e in entrants) == sorted(expect)
    else:
        assert [e["policy"] for e in entrants] == expect
        assert ranks == list(range(1, len(expect) + 1))
    for e in entrants:
        vals = means[e["policy"]]
        m = e["metrics"]["avg_jct"]
        assert m["mean"] == pytest.approx(np.mean(vals))
        assert m["std"] == pytest.approx(np.std(vals, ddof=1))
        base = np.mean(means["fifo"])
        assert e["ratio_to_baseline"]["avg_jct"] == pytest.approx(np.mean(vals) / base)
    md = (out / "leaderboard.md").read_text()
    assert "## Protocol" in md and "x Baseline" in md and "fifo (Baseline)" in md
    assert "mean and sample standard deviation" in md
    assert "±" in md  # mean +- std cells


def test_e2e_plots(e2e: dict[str, Any]) -> None:
    from aryl_gym.stats import available

    names = ["usage_tiny.png", "jct_cdf_tiny.png", "queue_tiny.png", "performance_profile.png"]
    for name in names + (["interval_estimates.png"] if available() else []):
        p = e2e["out"] / "plots" / name
        assert p.exists() and p.stat().st_size > 5000, name
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_e2e_tensorboard(e2e: dict[str, Any]) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard not installed (the train extra)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows, _ = read_rows(e2e["out"] / "results.csv")
    tags_by_run = {}
    for run in sorted({r["policy"] for r in rows}):
        acc = EventAccumulator(str(e2e["out"] / "tensorboard" / run))
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        tags_by_run[run] = tags
        for s in SEEDS:
            for t in ("combined_usage", "queue_len", "loaned_servers", "running_jobs"):
                assert f"tiny/seed{s}/{t}" in tags, (run, t)
        # final metrics at step = seed equal the CSV (float32 in the event file)
        final = {e.step: e.value for e in acc.Scalars("tiny/final/avg_jct")}
        for r in rows:
            if r["policy"] == run:
                assert final[r["seed"]] == pytest.approx(r["avg_jct"], rel=1e-6)
        q = [e.value for e in acc.Scalars("tiny/seed0/queue_len")]
        assert len(q) > 10 and min(q) >= 0 and max(q) <= 30
        u = [e.value for e in acc.Scalars("tiny/seed0/combined_usage")]
        assert 0.0 <= min(u) and max(u) <= 1.0 + 1e-6
    # the same tags for every policy, heuristic or learned
    assert len({frozenset(t) for t in tags_by_run.values()}) == 1


# ----------------------------------------------------------------------------------------------
# resume
# ----------------------------------------------------------------------------------------------


class _Counting:
    """An executor that counts the episodes it runs, optionally 'crashing' after ``stop_after``."""

    def __init__(self, stop_after: int | None = None):
        self.ran: list[tuple[str, str, int, str]] = []
        self.stop_after = stop_after

    def __call__(self, tasks: Sequence[EpisodeTask], workers: int) -> Iterator[EpisodeOutput]:
        for out in local_executor(tasks, 1):
            if self.stop_after is not None and len(self.ran) >= self.stop_after:
                raise KeyboardInterrupt
            self.ran.append(out.task.key)
            yield out


def test_resume_after_interruption(tmp_path: Path) -> None:
    suite = suite_from_dict(_suite_dict(agents=None, policies=["fifo", "sjf", "aryl"]))
    out = tmp_path / "out"
    first = _Counting(stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, out, executor=first, progress=False, log=lambda m: None)
    rows_before, _ = read_rows(out / "results.csv")
    assert len(rows_before) == 3
    # ... and the kill cut the next row in the middle of its line
    with open(out / "results.csv", "a") as fh:
        fh.write("tinytest,tiny,tiny,aryl_gym/Aryl-v1,v1,1,sjf,policy,,,30,3")
    with pytest.raises(ConfigError, match="--resume"):
        run_suite(suite, out, progress=False, log=lambda m: None)
    second = _Counting()
    summ = run_suite(suite, out, resume=True, executor=second, progress=False, log=lambda m: None)
    assert summ.resumed == 3 and summ.new == 3 and summ.dropped_bad_rows == 1
    assert len(second.ran) == 3  # finished rows were not recomputed
    assert not set(second.ran) & {(r["suite"], r["scenario"], r["seed"], r["policy"]) for r in rows_before}
    rows_after, bad = read_rows(out / "results.csv")
    assert bad == 0 and len(rows_after) == 6
    for r in rows_before:  # untouched, byte for byte (their wall times and stamps too)
        assert r in rows_after
    # a complete run resumes to nothing
    third = _Counting()
    summ = run_suite(suite, out, resume=True, executor=third, progress=False, log=lambda m: None)
    assert third.ran == [] and summ.new == 0 and len(summ.rows) == 6


def test_resume_refuses_rows_of_another_config(tmp_path: Path) -> None:
    suite = suite_from_dict(_suite_dict(agents=None, policies=["fifo"], seeds=[0]))
    out = tmp_path / "out"
    run_suite(suite, out, progress=False, log=lambda m: None)
    rows, _ = read_rows(out / "results.csv")
    # a row written (digest and all) under another configuration; a hand edit is another case
    # (tests/test_durability.py)
    rewrite_rows(out / "results.csv", [{**rows[0], "config_hash": "0123456789abcdef"}])
    with pytest.raises(ConfigError, match="another configuration"):
        run_suite(suite, out, resume=True, progress=False, log=lambda m: None)


# ----------------------------------------------------------------------------------------------
# skips, bad suites
# ----------------------------------------------------------------------------------------------


def test_unavailable_agent_is_skipped_with_a_note(tmp_path: Path) -> None:
    suite = suite_from_dict(
        _suite_dict(agents={"ghost": "no-such-shipped-agent", "lost": "missing/model.zip"}, seeds=[0])
    )
    res = run_leaderboard(suite, tmp_path / "o", progress=False, plots=False, tensorboard=False, log=lambda m: None)
    assert {r["policy"] for r in res.summary.rows} == {"fifo", "sjf"}
    assert set(res.summary.skipped) == {"ghost", "lost"}
    md = res.markdown.read_text()
    assert "## Skipped" in md and "ghost" in md and "missing/model.zip" in md


BAD_SUITES = [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"seeds": []}, "seeds is empty"),
    ({"seeds": "a-b"}, "seeds must be"),
    ({"seeds": [0, 0]}, "duplicates"),
    ({"scenarios": ["no-such-scenario"]}, "unknown scenario 'no-such-scenario'"),
    ({"policies": ["fifo", "no-such-policy"]}, "policy 'no-such-policy' is not registered"),
    ({"policies": ["fifo", "fifo"]}, "'fifo' appears twice"),
    ({"policies": [], "agents": None}, "no policies and no agents"),
    ({"baseline": "aryl-x"}, "baseline 'aryl-x' must be one of"),
    ({"agents": ["x"]}, "agents must be a mapping"),
    ({"agents": {"x": {"path": "m.zip"}}}, "unknown key 'path' in agents.x"),
    ({"rank_by": "happiness"}, "rank_by 'happiness' is not a metric"),
    ({"policies": [{"name": "fifo", "weight": 2}]}, "unknown key 'weight'"),
    ({"env_kwargs": {"scenario": "tiny"}}, "must not set 'scenario'"),
]


@pytest.mark.parametrize("over,msg", BAD_SUITES, ids=[m for _, m in BAD_SUITES])
def test_bad_suites_give_clear_errors(tmp_path: Path, over: dict[str, Any], msg: str) -> None:
    path = _write_suite(tmp_path / "bad.yaml", **over)
    with pytest.raises(ConfigError) as exc:
        load_suite(path)
    assert msg in str(exc.value)
    assert str(path) in str(exc.value)  # names the file


def test_bad_suite_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_suite(tmp_path / "bad.yaml", policies=["fifo", "nope"])
    assert cli_main(["leaderboard", "--suite", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "'nope' is not registered" in err and "Known policies" in err and "--allow-missing" in err
    assert cli_main(["leaderboard", "--suite", "no-such-suite"]) == 2
    assert "Known suites" in capsys.readouterr().err


def test_optional_and_allowed_missing_policies(tmp_path: Path) -> None:
    s = suite_from_dict(_suite_dict(policies=["fifo", {"name": "not-yet", "optional": True}]))
    assert s.missing == ("not-yet",) and "not-yet" not in [e.name for e in s.entrants]
    s = suite_from_dict(_suite_dict(policies=["fifo", "not-yet"]), allow_missing=True)
    assert s.missing == ("not-yet",)


STANDARD_SEEDS = 48  # docs/leaderboard.md, "How many seeds"


def test_shipped_suites_load() -> None:
    every = {"baseline", "fifo", "sjf", "aryl", "afs", "pollux", "gandiva", "ppo-testbed-v0", "ppo-v1",
             "ppo-v1-kickstart"}
    for name, n_seeds, must in (
        ("quick", 16, every - {"pollux"}),  # the main job keeps the learned agent (README)
        ("standard", STANDARD_SEEDS, every),
        ("full", STANDARD_SEEDS, every),
    ):
        s = load_suite(name, allow_missing=True)
        listed = {e.name for e in s.entrants} | set(s.missing)
        assert must <= listed
        assert len(s.seeds) == n_seeds and s.baseline == "baseline"
        assert min(s.seeds) >= 2000  # held out from training
    assert load_suite("quick", allow_missing=True).scenarios == ("testbed",)


# ----------------------------------------------------------------------------------------------
# validation, parallel and Ray backends
# ----------------------------------------------------------------------------------------------


def test_validate_catches_a_tampered_row(e2e: dict[str, Any], tmp_path: Path) -> None:
    src = e2e["out"] / "results.csv"
    rep = validate_csv(src, sample=0)
    assert rep.ok and all(c.status == "ok" for c in rep.checks)
    rows, _ = read_rows(src)
    import csv
    import io

    table = list(csv.reader(io.StringIO(src.read_text(), newline="")))
    i = next(k for k, r in enumerate(rows) if r["policy"] == "sjf" and r["seed"] == 1)
    col = table[0].index("avg_jct")  # the avg_jct cell only (avg_jct_censored holds the same value)
    assert float(table[i + 1][col]) == rows[i]["avg_jct"]
    table[i + 1][col] = repr(rows[i]["avg_jct"] * 0.9)
    bad = tmp_path / "tampered.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    bad.write_text(buf.getvalue())
    rep = validate_csv(bad, sample=0)
    assert not rep.ok
    wrong = [c for c in rep.checks if c.status != "ok"]
    assert [c.key[2:] for c in wrong] == [(1, "sjf")]
    assert [d[0] for d in wrong[0].diffs] == ["avg_jct"]
    assert cli_main(["leaderboard", "--validate", str(bad), "--validate-sample", "0"]) == 1


def test_parallel_workers_give_the_same_rows(e2e: dict[str, Any], tmp_path: Path) -> None:
    suite = suite_from_dict(_suite_dict(agents=None))
    summ = run_suite(suite, tmp_path / "par", workers=2, progress=False, log=lambda m: None)
    serial = {(r["policy"], r["seed"]): _stable(r) for r in read_rows(e2e["out"] / "results.csv")[0]}
    assert summ.new == 4
    for r in summ.rows:
        assert _stable(r) == serial[(r["policy"], r["seed"])]


@pytest.mark.slow
def test_ray_gives_the_same_rows(e2e: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'aryl-gym[ray]')")
    suite = suite_from_dict(_suite_dict(agents=None))
    summ = run_suite(suite, tmp_path / "ray", workers=2, backend="ray", progress=False, log=lambda m: None)
    serial = {(r["policy"], r["seed"]): _stable(r) for r in read_rows(e2e["out"] / "results.csv")[0]}
    assert summ.new == 4 and not summ.failed
    for r in summ.rows:
        assert _stable(r) == serial[(r["policy"], r["seed"])]


@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_main_command_says_where_outputs_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite_file = _write_suite(tmp_path / "s.yaml", agents=None, seeds=[0])
    out = tmp_path / "res"
    assert cli_main(["main", "--suite", str(suite_file), "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert str(out / "leaderboard.md") in text and "tensorboard --logdir" in text and "plots" in text
    # a second main run resumes everything
    assert cli_main(["main", "--suite", str(suite_file), "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    assert "0 run now, 2 resumed" in capsys.readouterr().out
    # rows made with another configuration (e.g. new weights after an update): `leaderboard
    # --resume` refuses them; the main job recomputes and keeps the old file aside
    csv = out / "results.csv"
    text = csv.read_text()
    rows = read_rows(csv)[0]
    old_hash = rows[0]["config_hash"]
    csv.write_text(text.replace(old_hash, "0" * len(old_hash)))
    (out / "results.csv.digests").unlink(missing_ok=True)
    assert cli_main(["main", "--suite", str(suite_file), "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    cap = capsys.readouterr()
    assert "made with another configuration" in cap.err and "recomputing every episode" in cap.err
    assert "2 run now, 0 resumed" in cap.out
    assert list(out.glob("results.csv.bak-*")) and read_rows(csv)[0][0]["config_hash"] == old_hash
    shutil.rmtree(out)


def test_agent_rows_are_keyed_by_the_bytes_of_its_files(tmp_path: Path) -> None:
    """New weights under the same name or path are another configuration: a resumed
    leaderboard cannot reuse the old weights' rows as the new ones'."""
    import os

    from aryl_gym.config import load_scenario
    from aryl_gym.provenance import agent_files_digest, config_hash

    src = Path(__file__).resolve().parents[1] / "agents" / "pretrained" / "ppo-v1.zip"
    if not src.exists():
        pytest.skip("ppo-v1 is not shipped")
    model = tmp_path / "mine.zip"
    shutil.copy(src, model)
    cfg = load_scenario("tiny")
    e = str(model)  # the agent's source
    first = config_hash(cfg, e, "aryl_gym/Aryl-v1", {})
    assert config_hash(cfg, e, "aryl_gym/Aryl-v1", {}) == first  # stable
    assert set(agent_files_digest(str(model))) == {"model"}
    with open(model, "ab") as fh:  # other bytes, same path
        fh.write(b"\0")
    os.utime(model, ns=(1, 1))
    assert config_hash(cfg, e, "aryl_gym/Aryl-v1", {}) != first
    (tmp_path / "mine.yaml").write_text("algo: maskable_ppo\n")
    assert set(agent_files_digest(str(model))) == {"model", "config"}
    # no files to read: a module:factory agent, an unknown name
    assert agent_files_digest("tests.helpers:make_agent") == {}
    assert agent_files_digest("no-such-agent") == {}
    # a reference policy: the scenario alone
    assert config_hash(cfg, None, "aryl_gym/Aryl-v1", {}) == config_hash(cfg)


def test_protocol_names_agents_that_acted_with_a_shield(e2e: dict[str, Any], tmp_path: Path) -> None:
    """A learned agent whose env had flap damping (here through the suite's env_kwargs; a
    shipped agent through its deploy_env_kwargs) is named in the protocol; without it, nothing."""
    if not _env_registered():
        pytest.skip("the env is not registered")
    assert "flap damping" not in (e2e["out"] / "leaderboard.md").read_text()
    suite_file = _write_suite(tmp_path / "s.yaml", seeds=[0], policies=["fifo"],
                              env_kwargs={"action_mode": "sequential", "flap_damping": True})
    out = tmp_path / "out"
    assert cli_main(["leaderboard", "--suite", str(suite_file), "--out", str(out), "--workers", "1",
                     "--no-progress"]) == 0
    text = (out / "leaderboard.md").read_text()
    assert "greedy with flap damping" in text
    assert json.loads((out / "leaderboard.json").read_text())["protocol"]["flap_damping"] == ["greedy"]
