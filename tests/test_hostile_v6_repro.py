"""Reliability v6: ``aryl-gym reproduce`` and ``aryl-gym calibrate`` tried as a careless or
hostile user would (failed episodes, a partial cache with --cached-only, damaged files in the
output folder, huge sweeps, bad load grids and relevance policies).

Each test says what used to happen in its docstring or comments.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from aryl_gym import reproduce as rp
from aryl_gym.cli import main
from aryl_gym.episodes import policy_task, run_results
from aryl_gym.load_grid import parse_loads
from aryl_gym.scenario import load_scenario

_RP = ["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "jct-aryl-baseline", "--no-progress"]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_reproduce_reports_a_failed_episode_without_a_traceback(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Was: any failed episode ended the run, after the report, with ``AttributeError:
    'EpisodeTask' object has no attribute 'config'`` (and matplotlib warned of an empty legend)."""
    trace = tmp_path / "trace.txt"
    trace.write_text("not a trace\n")
    out = tmp_path / "o"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no library warning reaches the user
        rc, _, err = _cli([*_RP, "--out", str(out), "--sweep", f"workload.trace={trace}"], capsys)
    assert rc == 1
    assert f"FAILED tiny baseline seed 0 workload.trace={trace}: ConfigError" in err
    assert "Traceback" not in err
    assert (out / "reproduction.md").exists()  # the table's own episodes ran and are reported


def test_reproduce_cached_only_with_part_of_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--cached-only`` with some episodes missing crashed with an AttributeError
    traceback while writing the note that names them."""
    out = tmp_path / "o"
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 0, err
    argv = [a if a != "1" else "2" for a in _RP]  # --seeds 2: seed 1 is not cached
    rc, stdout, err = _cli([*argv, "--out", str(out), "--cached-only"], capsys)
    assert rc == 0, err
    assert "Traceback" not in err and "2 episode(s) not cached are left out" in err
    md = (out / "reproduction.md").read_text()
    assert "2 episode(s) were not in the cache and are left out: tiny/aryl, tiny/baseline" in md
    assert "seeds 0..1" in stdout  # the table names the seeds asked for; the row uses seed 0


@pytest.mark.parametrize("study", [["--study", "hetero"], ["--study", "prediction-error", "--policies", "aryl"]])
def test_reproduce_study_cached_only_with_nothing_cached_exits_1(study: list[str], tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a study of '-' cells written to reproduction.md and exit 0 (the table already
    refused this)."""
    out = tmp_path / "o"
    rc, _, err = _cli(["reproduce", "--scale", "tiny", "--seeds", "1", *study, "--cached-only", "--no-progress",
                       "--out", str(out)], capsys)
    assert rc == 1 and "--cached-only: no episode of this study is cached" in err
    assert not (out / "reproduction.md").exists()


def test_calibrate_failed_episodes_are_an_error_not_a_traceback(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a RuntimeError traceback whose message held the worker's own traceback (here: the
    trace is not under --data-root)."""
    out = tmp_path / "o"
    rc, _, err = _cli(["calibrate", "--relevance", "--scenarios", "tiny,pollux-w6", "--policies", "fifo",
                       "--seeds", "0", "--data-root", str(tmp_path / "nodata"), "--out", str(out)], capsys)
    assert rc == 1 and "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("aryl-gym calibrate: error:")]
    assert len(line) == 1 and "pollux-w6" in line[0] and "not found" in line[0] and "check --data-root" in line[0]
    assert f"the finished ones are kept in {out}/episodes" in line[0]
    assert len(list((out / "episodes" / "tiny").rglob("*.json"))) == 2  # tiny's fifo and random


def test_run_results_failure_is_one_line(tmp_path: Path) -> None:
    from aryl_gym.episodes import EpisodesFailed

    cfg = load_scenario("pollux-w6")
    with pytest.raises(EpisodesFailed) as exc:
        run_results([policy_task(cfg, "fifo", 0, data_root=str(tmp_path))], progress=False)
    assert isinstance(exc.value, RuntimeError)  # callers catching RuntimeError still do
    assert "\n" not in str(exc.value) and "1 of 1 in all" in str(exc.value)


def test_load_grid_near_duplicate_loads_are_refused() -> None:
    """Was: 0.3 and 0.30000000000000004 ran twice and printed as two rows "0.3"."""
    with pytest.raises(ValueError, match="listed twice"):
        parse_loads("0.30000000000000004,0.3")
    assert parse_loads("0.3,0.31") == [0.3, 0.31]


def test_reproduce_refuses_a_huge_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Was: 10,000 values were checked one by one, then 10,000 tables of episodes started."""
    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    values = ",".join(f"{i / 1000:g}" for i in range(1, 102))
    rc, _, err = _cli([*_RP, "--out", str(tmp_path / "o"), "--sweep", f"workload.elastic_fraction={values}"],
                      capsys)
    assert rc == 2 and "101 values; at most 100 per knob" in err and "ARYL_GYM_ALLOW_HUGE=1" in err
    assert not (tmp_path / "o").exists()
    monkeypatch.setenv("ARYL_GYM_ALLOW_HUGE", "1")
    assert len(rp.parse_sweep(f"workload.elastic_fraction={values}")[1]) == 101


def test_damaged_owner_mark_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "'utf-8' codec can't decode byte 0xff" and nothing else (no file, no fix)."""
    out = tmp_path / "o"
    out.mkdir()
    (out / ".aryl-gym-owner").write_bytes(b"\xff\xfe\x00")
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 2 and f"{out}/.aryl-gym-owner" in err and "not a text file" in err
    assert not (out / "episodes").exists()


def test_damaged_report_is_named_and_episodes_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: "'utf-8' codec can't decode byte 0xff" after the episodes ran, naming no file."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "reproduction.md").write_bytes(b"\xff\xfe")
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 2 and f"{out}/reproduction.md" in err and "not a UTF-8 text file" in err
    assert len(list((out / "episodes").rglob("*.json"))) == 2  # nothing computed is lost
    (out / "reproduction.md").unlink()
    rc, stdout, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 0 and "0 episode(s) run, 2 cached" in stdout


def test_relevance_refuses_random_as_a_reference_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: accepted; random counted as a reference policy, so its spread read random / random = 1."""
    rc, _, err = _cli(["calibrate", "--relevance", "--scenarios", "tiny", "--seeds", "0",
                       "--policies", "fifo,random"], capsys)
    assert rc == 2 and "'random' runs beside the reference policies" in err
