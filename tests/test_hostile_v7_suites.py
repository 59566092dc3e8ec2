"""Hostile-user pass (v7) over custom leaderboard suites and the trace commands: agents' env
option values checked only when their episodes ran, the suite's seed list (a duplicate error
printing every seed, no bound on a list's length or a seed's size), a leaderboard stopped by
SIGTERM without a word, relative trace times that are negative or absurdly large, a time window
that selects nothing, and an out-of-order message whose two times read the same."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aryl_gym.config import ConfigError
from aryl_gym.workload.traces import load_trace
from aryl_gym.workload.traces_formats import TraceError
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


class _Killed(Exception):
    pass


@contextlib.contextmanager
def _sigterm_unhandled_fails(what: str) -> Iterator[None]:
    """While the block runs, a SIGTERM the command under test does not handle raises here (the
    old code let it reach the test) instead of killing pytest."""

    def fallback(signum: int, frame: Any) -> None:
        raise _Killed(f"SIGTERM was not handled by {what}")

    previous = signal.signal(signal.SIGTERM, fallback)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _suite(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "hv7", "scenarios": ["tiny"], "seeds": [0], "baseline": "fifo",
                         "policies": ["fifo"]}
    d.update(over)
    return d


# -- 1. an agent's env option values: checked when the suite loads -------------------------------
@pytest.mark.parametrize(
    "over, match",
    [
        ({"agents": {"mine": {"source": "ppo-v1", "env_kwargs": {"window": "abc"}}}},
         "agents.mine.env_kwargs: window must be an integer >= 1, got 'abc'"),
        # the suite's options and the agent's together (each alone is fine)
        ({"env_kwargs": {"action_mode": "targets"},
          "agents": {"mine": {"source": "ppo-v1", "env_kwargs": {"stall_guard": True}}}},
         "agents.mine.env_kwargs (over the suite's env_kwargs): stall_guard acts on the sequential mode"),
        ({"env_kwargs": {"reward_scale": -1}, "agents": {"mine": "ppo-v1"}}, "reward_scale"),
    ],
)
def test_agent_env_option_values_are_checked_on_load(over: dict[str, Any], match: str) -> None:
    """Was: only the names were checked; ``window: abc`` failed every episode of the agent
    ("FAILED mine tiny seed 0: ValueError ...") after the rest of the suite had run."""
    from aryl_gym.leaderboard import suite_from_dict

    with pytest.raises(ConfigError) as err:
        suite_from_dict(_suite(**over), source="s.yaml")
    assert str(err.value).startswith("s.yaml: agents.mine.env_kwargs") and match in str(err.value)


def test_good_agent_env_options_still_load() -> None:
    from aryl_gym.leaderboard import load_suite, suite_from_dict

    s = suite_from_dict(_suite(env_kwargs={"action_mode": "sequential"},
                               agents={"mine": {"source": "ppo-v1", "env_kwargs": {"stall_guard": True}}}))
    assert s.agents[0].env_kwargs == {"stall_guard": True}
    for name in ("quick", "standard", "full", "scale"):  # the shipped suites
        load_suite(name, allow_missing=True)


# -- 2. seeds ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "seeds, match",
    [
        # was: "has duplicates: [0, 1, 2, ..., 50000, 5]", every seed of the suite
        ("0-50000,5", "seeds has duplicates: seed 5 is listed more than once; list each seed once"),
        ("0-3,2-5", "seeds has duplicates: seed 2 is listed more than once (and 1 more)"),
        # was: "is empty; give at least one seed"
        ("5-2", "range '5-2' is empty (end < start); write START-END"),
        # was: "range '60001-120000' has 60,000 seeds; at most 100,000", true of the range alone
        ("0-60000,60001-120000", "range '60001-120000' brings the suite to 120,001 seeds; at most 100,000"),
        # was: the cap held for ranges only, a list of 100,001 seeds ran
        (list(range(100_001)), "seeds has 100,001 seeds; at most 100,000 per suite"),
        # was: run (no other command takes such a seed, so no row of it can be replayed)
        ([2**63], "seeds[0] must be <= 9223372036854775807"),
    ],
)
def test_suite_seed_errors_are_short_and_say_what_is_wrong(seeds: Any, match: str) -> None:
    from aryl_gym.leaderboard import suite_from_dict

    with pytest.raises(ConfigError) as err:
        suite_from_dict(_suite(seeds=seeds), source="s.yaml")
    assert match in str(err.value) and len(str(err.value)) < 300, str(err.value)[:400]


def test_suite_seed_edges_that_are_fine() -> None:
    from aryl_gym.leaderboard import suite_from_dict

    assert suite_from_dict(_suite(seeds="0-99999")).seeds[-1] == 99_999
    assert suite_from_dict(_suite(seeds=[2**63 - 1])).seeds == (2**63 - 1,)


# -- 3. SIGTERM stops a leaderboard run with one line; --resume finishes it -----------------------
def test_leaderboard_sigterm_says_what_is_kept_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Was: SIGTERM killed ``aryl-gym leaderboard`` at once, without a word (exit -15); Ctrl-C
    printed the count and then a bare "interrupted"."""
    from aryl_gym.leaderboard import runner

    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(_suite(seeds=[0, 1], policies=["fifo", "sjf"])))
    out = tmp_path / "out"
    put = runner._Rows.put

    def put_then_term(self: Any, task: Any, o: Any) -> Any:
        row = put(self, task, o)
        os.kill(os.getpid(), signal.SIGTERM)  # as a batch scheduler stops a job
        return row

    monkeypatch.setattr(runner._Rows, "put", put_then_term)
    argv = ["leaderboard", "--suite", str(suite), "--out", str(out), "--workers", "1", "--no-progress",
            "--no-plots", "--no-tensorboard"]
    with _sigterm_unhandled_fails("the leaderboard"):
        rc, _, err = _run(argv, capsys)
    assert rc == 143, err[-400:]
    lines = [ln for ln in err.splitlines() if ln.startswith("interrupted")]
    assert len(lines) == 1 and "1 of 4 episode(s) done" in lines[0], err[-400:]
    assert "rerun with --resume" in lines[0] and str(out / "results.csv") in lines[0]
    monkeypatch.setattr(runner._Rows, "put", put)
    rc, out_text, err = _run([*argv, "--resume"], capsys)
    assert rc == 0 and "4 episodes (3 run now, 1 resumed)" in out_text, err[-400:]


# -- 4. trace times ------------------------------------------------------------------------------
def _csv(tmp_path: Path, rows: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text("sub,g,d\n" + rows)
    return p


COLS = {"submit": "sub", "gpus": "g", "duration": "d"}


def test_negative_relative_submit_time_is_a_bad_row(tmp_path: Path) -> None:
    """Was: loaded; the episode then failed in the simulator with "job 0 (job-L2): submit time
    must be finite and >= 0, got -5000.0" (no file, line or fix; --skip-bad-rows could not help)."""
    p = _csv(tmp_path, "-5000,1,100\n10,1,100\n")
    with pytest.raises(TraceError, match=r"t\.csv:2: column 'sub': negative submit time -5000 s\. Fix: "):
        load_trace(p, "csv", columns=COLS)
    jobs, rep = load_trace(p, "csv", columns=COLS, skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped["bad-time"] == 1 and "line 2" in rep.examples["bad-time"][0]


def test_negative_gavel_arrival_is_a_bad_row(tmp_path: Path) -> None:
    tput = tmp_path / "simulation_throughputs.json"
    tput.write_text('{"v100": {"[\'ResNet-18 (batch size 16)\', 1]": {"null": 100.0}}}')
    p = tmp_path / "x.trace"
    p.write_text("ResNet-18 (batch size 16)\tcmd\t-n\t1\t1000\t-60\t1\n"
                 "ResNet-18 (batch size 16)\tcmd\t-n\t1\t1000\t0\t1\n")
    with pytest.raises(TraceError, match=r"x\.trace:1: column 'arrival_time': negative submit time -60 s"):
        load_trace(p, "gavel")


def test_absurd_submit_time_is_a_bad_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: loaded; building the episode then failed with numpy's "Maximum allowed size
    exceeded" (the inference series for 1e300 s), naming no file."""
    p = _csv(tmp_path, "0,1,100\n1e300,1,100\n")
    with pytest.raises(TraceError, match=r"t\.csv:3: column 'sub': submit time 1e\+300 s .*more than 10 years"):
        load_trace(p, "csv", columns=COLS)
    jobs, rep = load_trace(p, "csv", columns=COLS, skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped["huge-time"] == 1
    rc, _, err = _run(["simulate", "--scenario", "tiny", "--trace", str(p), "--trace-format", "csv",
                       "--columns", "submit=sub,gpus=g,duration=d", "--no-progress"], capsys)
    assert rc == 2 and "more than 10 years" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_a_time_window_that_selects_nothing_names_the_span(tmp_path: Path) -> None:
    """Was: "no jobs left after filters and skipped rows. Fix: check the virtual cluster, time
    window and ...", without the span a window has to fall in."""
    p = tmp_path / "philly.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-09 07:00:00,60,1,60,a\n2017-10-09 09:00:00,60,1,60,a\n")
    with pytest.raises(TraceError) as err:
        load_trace(p, "philly", time_window="2010-01-01 00:00:00,2010-02-01 00:00:00")
    msg = str(err.value)
    assert "selects none of the 2 jobs" in msg and "from 2017-10-09 07:00:00 to 2017-10-09 09:00:00" in msg
    assert "offsets 0 to 2h from the first job" in msg and "Fix: give a window within that span" in msg
    with pytest.raises(TraceError, match="selects none of the 1 jobs"):  # after the other filters
        load_trace(_csv(tmp_path, "0,1,100\n", "r.csv"), "csv", columns=COLS, time_window="5h,6h")
    jobs, _ = load_trace(p, "philly", time_window="1h,3h")  # a window inside still works
    assert len(jobs) == 1


def test_out_of_order_dates_are_named_as_dates(tmp_path: Path) -> None:
    """Was: "submit time 1.50753e+09 is before the previous row's 1.50753e+09": two different
    times that read the same."""
    p = tmp_path / "d.csv"
    p.write_text("sub,g,d\n2017-10-09 07:01:55,1,60\n2017-10-09 07:01:15,1,60\n")
    with pytest.raises(TraceError, match="submit time 2017-10-09 07:01:15 is before the previous row's "
                                         r"2017-10-09 07:01:55 \(line 2\)"):
        load_trace(p, "csv", columns=COLS, units={"time": "datetime"})
    q = _csv(tmp_path, "1507532515,1,60\n1507532475,1,60\n", "s.csv")
    with pytest.raises(TraceError, match="submit time 1507532475 is before the previous row's 1507532515"):
        load_trace(q, "csv", columns=COLS)


# -- 5. a suite resumed in the folder of the other kind of suite ---------------------------------
def test_resume_in_a_reclaim_suites_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "its columns are not this aryl-gym version's results schema (missing: aryl_gym_version,
    avg_jct, ... 57 names; unexpected: entrant, instance, ...)", as if the file were old."""
    from aryl_gym.leaderboard.reclaim_suite import CSV_COLUMNS
    from aryl_gym.leaderboard.results import COLUMNS, scan_rows

    rec = tmp_path / "rec" / "results.csv"
    rec.parent.mkdir()
    rec.write_text(",".join(CSV_COLUMNS) + "\n")
    with pytest.raises(ConfigError) as err:
        scan_rows(rec)
    assert str(err.value) == (f"{rec}: holds the results of a reclaim suite (kind: reclaim), not of a leaderboard "
                              "suite; give this suite its own --out folder (or --overwrite to move the old "
                              "results aside)")
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(_suite()))
    rc, _, e = _run(["leaderboard", "--suite", str(suite), "--out", str(rec.parent), "--resume", "--no-progress",
                     "--no-plots", "--no-tensorboard"], capsys)
    assert rc == 2 and "holds the results of a reclaim suite" in e and len(e.splitlines()) == 1
    old = tmp_path / "old.csv"  # another version's file: the column lists are cut short
    old.write_text(",".join(c for c in COLUMNS if c != "suite") + ",x1,x2,x3,x4,x5,x6,x7\n")
    with pytest.raises(ConfigError, match=r"\(missing: suite; unexpected: x1, x2, x3, x4, x5, x6 and 1 more\)"):
        scan_rows(old)


# -- 6. a suite none of whose episodes can run here ---------------------------------------------
def test_a_suite_with_nothing_to_run_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: every scenario skipped (its trace missing under the data root): "0 episodes", an
    empty table and exit 0."""
    scen = tmp_path / "gone.yaml"
    scen.write_text(yaml.safe_dump({"name": "gone", "workload": {"trace": "traces/nosuch.csv",
                                                                 "trace_format": "philly"}}))
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(_suite(scenarios=[str(scen)])))
    rc, out, err = _run(["leaderboard", "--suite", str(suite), "--out", str(tmp_path / "out"), "--no-progress",
                         "--no-plots", "--no-tensorboard", "--data-root", str(tmp_path)], capsys)
    assert rc == 2 and "no episode of suite 'hv7' can run here" in err and "nosuch.csv" in err, err[-400:]
    assert "--data-root" in err and not out and not (tmp_path / "out" / "leaderboard.md").exists()
    # nothing was computed: the folder this run made is gone again (was: left behind with its
    # owner marker, so the rerun after the fix needed --overwrite or another --out)
    assert not (tmp_path / "out").exists()
    # a folder that was there before is kept as it was
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    rc, _, err = _run(["leaderboard", "--suite", str(suite), "--out", str(tmp_path / "mine"), "--no-progress",
                       "--no-plots", "--no-tensorboard", "--data-root", str(tmp_path)], capsys)
    assert rc == 2 and (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_reclaim_suite_sigterm_says_what_is_kept_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a reclaim suite (``kind: reclaim``) was not run under the interruption handler, so
    SIGTERM killed it without a word. Now: one line, exit 143, and --resume finishes it."""
    from aryl_gym.leaderboard import results

    suite = tmp_path / "rs.yaml"
    suite.write_text("name: rt\nkind: reclaim\ndescription: tiny\n"
                     "instances:\n  - {synthetic: 3, servers: [20, 30], seed: 1}\n"
                     "policies: [optimum, aryl, default]\n")
    out = tmp_path / "out"
    append = results.CsvAppender.append
    calls = {"n": 0}

    def append_then_term(self: Any, row: Any) -> None:
        append(self, row)
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(results.CsvAppender, "append", append_then_term)
    argv = ["leaderboard", "--suite", str(suite), "--out", str(out), "--no-progress"]
    with _sigterm_unhandled_fails("the reclaim suite"):
        rc, _, err = _run(argv, capsys)
    assert rc == 143, err[-400:]
    lines = [ln for ln in err.splitlines() if ln.startswith("interrupted")]
    assert len(lines) == 1 and "rerun with --resume" in lines[0] and str(out) in lines[0], err[-400:]
    monkeypatch.setattr(results.CsvAppender, "append", append)
    rc, _, err = _run([*argv, "--resume"], capsys)
    assert rc == 0, err[-400:]
    assert len((out / "results.csv").read_text().splitlines()) == 1 + 3 * 3


def test_one_scenario_file_under_two_names_is_refused(tmp_path: Path) -> None:
    """Was: ``tiny`` and ``configs/scenarios/tiny.yaml`` (the same file) ran as two scenarios of
    the table, every episode twice."""
    from aryl_gym.config import ConfigError, configs_dir
    from aryl_gym.leaderboard.suites import suite_from_dict

    same = str(configs_dir() / "scenarios" / "tiny.yaml")
    with pytest.raises(ConfigError, match=r"scenarios 'tiny' and '.*tiny.yaml' are the same scenario file"):
        suite_from_dict(_suite(scenarios=["tiny", same]))
    # two files with the same content are two scenarios (the user named them apart)
    copy = tmp_path / "tiny-copy.yaml"
    copy.write_text(Path(same).read_text())
    assert len(suite_from_dict(_suite(scenarios=["tiny", str(copy)])).scenarios) == 2


def test_a_scenario_path_beside_the_suite_file_gets_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scenario paths in a suite resolve against the working directory. Was: a path written
    relative to the suite's own folder failed with "file not found" alone; now the error names
    where the file is and the path to write."""
    from aryl_gym.config import configs_dir
    from aryl_gym.leaderboard.suites import load_suite

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "my.yaml").write_text((configs_dir() / "scenarios" / "tiny.yaml").read_text())
    (sub / "s.yaml").write_text(yaml.safe_dump(_suite(scenarios=["my.yaml"])))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"not from the suite file's folder.*list it as 'sub/my.yaml'"):
        load_suite("sub/s.yaml")
    # the path the hint gives loads; a missing file elsewhere gets no hint
    (sub / "s2.yaml").write_text(yaml.safe_dump(_suite(scenarios=["sub/my.yaml"])))
    assert load_suite("sub/s2.yaml").scenarios == ("sub/my.yaml",)
    (sub / "s3.yaml").write_text(yaml.safe_dump(_suite(scenarios=["nowhere.yaml"])))
    with pytest.raises(ConfigError) as err:
        load_suite("sub/s3.yaml")
    assert "suite file's folder" not in str(err.value)
