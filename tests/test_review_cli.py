"""Hostile-user review of the command line: list items left empty (``1,,2``), digits of other
scripts, options that a mode ignores, a source given twice, a missing trace file reported as a
format problem. Each case failed before its fix (see the "was:" notes); all run in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


# ----------------------------------------------------------------------------------------------
# 1. an empty item in a comma list
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seeds", ["1,,2", "0,", ",3"])
def test_seeds_with_an_empty_item_are_refused(seeds: str, capsys: pytest.CaptureFixture[str]) -> None:
    # was: the empty item skipped, so '1,,2' (a typo of '1,2' or '1,12') ran seeds 1 and 2
    rc, out, err = _run(["compare", "--scenario", "tiny", "--policies", "fifo", "--seeds", seeds,
                         "--no-progress", "--json"], capsys)
    assert rc == 2 and out == ""
    assert "argument --seeds" in err and "empty item" in err and repr(seeds) in err


def test_policies_with_an_empty_name_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # was: 'fifo,,aryl' ran fifo and aryl (a name left out?) without a word
    rc, out, err = _run(["compare", "--scenario", "tiny", "--policies", "fifo,,aryl", "--seeds", "0",
                         "--no-progress", "--json"], capsys)
    assert rc == 2 and out == ""
    assert "--policies 'fifo,,aryl': an empty name" in err


def test_suite_seed_strings_with_an_empty_item_are_refused() -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.leaderboard.suites import parse_seeds

    # was: (1, 2); reclaim-study --seeds and a suite YAML's seeds read it so
    with pytest.raises(ConfigError, match="empty item"):
        parse_seeds("1,,2", "--seeds")
    with pytest.raises(ConfigError, match="ASCII digits"):
        parse_seeds("\u0661-\u0663", "--seeds")  # Arabic-Indic 1-3: was seeds 1, 2, 3
    assert parse_seeds("0-2,5", "--seeds") == (0, 1, 2, 5)


def test_reclaim_study_bins_with_an_empty_item_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # was: '20,,60' read as '20,60'
    rc, _, err = _run(["reclaim-study", "--synthetic", "1", "--max-servers", "8", "--bins", "20,,60"], capsys)
    assert rc == 2 and "--bins" in err and "'20,,60'" in err


# ----------------------------------------------------------------------------------------------
# 2. digits of other scripts
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["simulate", "--scenario", "tiny", "--no-progress", "--seed", "\uff11"],  # fullwidth 1
    ["compare", "--scenario", "tiny", "--policies", "fifo", "--no-progress", "--seeds", "\u0661"],  # Arabic-Indic 1
    ["reclaim-study", "--synthetic", "1", "--max-servers", "8", "--elastic", "\uff10.\uff15"],  # fullwidth 0.5
])
def test_digits_of_other_scripts_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # was: int()/float() read them, so '１' ran as seed 1
    rc, out, err = _run(argv, capsys)
    assert rc == 2 and out == "" and "argument --" in err


def test_parse_number_names_ascii_digits() -> None:
    from aryl_gym.fileio import parse_number

    with pytest.raises(ValueError, match="ASCII digits"):
        parse_number("\uff11\uff10", "--timesteps", integer=True)
    assert parse_number("1e3", integer=True) == 1000 and parse_number(" 0.5 ") == 0.5


# ----------------------------------------------------------------------------------------------
# 3. reclaim-study: a source given twice, options its run would ignore
# ----------------------------------------------------------------------------------------------
def test_reclaim_study_scenario_given_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # was: its episodes run twice and every event counted twice
    rc, _, err = _run(["reclaim-study", "--scenario", "tiny", "--scenario", "tiny"], capsys)
    assert rc == 2 and "--scenario tiny is given twice" in err


def test_reclaim_study_snapshots_given_twice_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.npz"
    rc, _, err = _run(["reclaim-study", "--snapshots", str(f), "--snapshots", str(tmp_path / "." / "s.npz")], capsys)
    assert rc == 2 and "is given twice" in err and "counted twice" in err


@pytest.mark.parametrize("argv, flag", [
    (["--scenario", "tiny", "--elastic", "0.2"], "--elastic shapes the synthetic instances"),
    (["--scenario", "tiny", "--synthetic", "0", "--seed", "3", "--max-servers", "50"],
     "--seed, --max-servers shape the synthetic instances"),
    (["--synthetic", "1", "--max-servers", "8", "--seeds", "3"], "--seeds picks the episodes of --scenario"),
    (["--synthetic", "1", "--max-servers", "8", "--overwrite"], "--overwrite replaces an existing --save-snapshots"),
])
def test_reclaim_study_options_its_run_would_ignore_are_refused(
        argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    # was: ignored without a word (the synthetic options with no synthetic instance, --seeds
    # without --scenario, --overwrite without --save-snapshots)
    rc, out, err = _run(["reclaim-study", *argv], capsys)
    assert rc == 2 and out == "" and flag in err


# ----------------------------------------------------------------------------------------------
# 4. leaderboard: options a mode ignores
# ----------------------------------------------------------------------------------------------
@pytest.fixture()
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record a leaderboard run instead of running it."""
    import aryl_gym.leaderboard as lb
    from aryl_gym.leaderboard import reclaim_suite

    calls: list[Any] = []

    def fake(*a: Any, **k: Any) -> Any:
        calls.append((a, k))
        raise SystemExit(99)

    monkeypatch.setattr(lb, "run_leaderboard", fake)
    monkeypatch.setattr(reclaim_suite, "run_cli", fake)
    return calls


@pytest.mark.parametrize("argv, says", [
    (["--suite", "quick", "--validate-sample", "5"], "--validate-sample applies to --validate CSV only"),
    (["--suite", "quick", "--validate-seed", "3"], "--validate-seed applies to --validate CSV only"),
    (["--suite", "quick", "--ray-address", "auto"], "--ray-address names the cluster of --backend ray"),
    (["--suite", "reclaim", "--workers", "2"], "--workers 2: the reclaim suite"),
])
def test_leaderboard_ignored_run_options_are_refused(
        argv: list[str], says: str, no_run: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: the whole suite ran, --validate-sample/--validate-seed and --ray-address unused,
    # the reclaim suite in one process whatever --workers said
    rc, _, err = _run(["leaderboard", *argv, "--out", str(tmp_path / "lb"), "--no-progress"], capsys)
    assert rc == 2 and says in err
    assert no_run == []


@pytest.mark.parametrize("argv, says", [
    (["--validate", "{csv}", "--suite", "quick"], "--validate runs no suite and takes no --suite"),
    (["--validate", "{csv}", "--resume", "--workers", "2"], "takes no --resume, --workers"),
    (["--list", "--suite", "quick"], "--list runs no suite and takes no --suite"),
])
def test_leaderboard_validate_and_list_refuse_run_options(
        argv: list[str], says: str, no_run: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: --suite, --resume, --workers... ignored by --validate and --list
    csv = tmp_path / "results.csv"
    rc, out, err = _run(["leaderboard", *[a.replace("{csv}", str(csv)) for a in argv]], capsys)
    assert rc == 2 and out == "" and says in err


# ----------------------------------------------------------------------------------------------
# 5. trace paths and trace options
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, says", [
    (["trace-info", "{tmp}/none.csv"], "trace-info {tmp}/none.csv: file not found"),
    (["trace-info", "{tmp}", "--trace-format", "csv"], "is a folder, not a trace file"),
    (["simulate", "--trace", "{tmp}/none.csv", "--no-progress"], "--trace {tmp}/none.csv: file not found"),
])
def test_missing_trace_file_is_named_not_found(
        argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: "pass --trace-format", or "csv format needs a column mapping", for a file that is not there
    rc, _, err = _run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert rc == 2 and says.replace("{tmp}", str(tmp_path)) in err
    assert "--trace-format (" not in err and "column mapping" not in err


@pytest.mark.parametrize("argv, says", [
    (["--trace", ""], "argument --trace: is empty"),
    (["--map", ""], "argument --map: is empty"),
    (["--vc", ""], "--vc applies to a trace file only"),
    (["--trace", "{tmp}/t.csv", "--columns", ""], "argument --columns: expected KEY=VALUE"),
])
def test_empty_trace_options_are_refused(
        argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: read as not given: '--trace ""' ran the synthetic workload, '--map ""' and '--vc ""'
    # were ignored without --trace, '--columns ""' was ignored
    (tmp_path / "t.csv").write_text("submit,gpus,duration\n0,1,600\n")
    rc, out, err = _run(["simulate", "--scenario", "tiny", "--no-progress", "--json",
                         *[a.replace("{tmp}", str(tmp_path)) for a in argv]], capsys)
    assert rc == 2 and out == "" and says in err


@pytest.mark.parametrize("grid, says", [("0.3,,0.5", "an empty item"), ("0.4,", "an empty item"),
                                        ("\uff10.\uff15", "ASCII digits")])
def test_load_grid_with_an_empty_item_or_other_digits_is_refused(grid: str, says: str) -> None:
    from aryl_gym.load_grid import parse_loads

    # was: [0.3, 0.5], [0.4] and [0.5]
    with pytest.raises(ValueError, match=says):
        parse_loads(grid)
    assert parse_loads("0.3-0.5") == [0.3, 0.4, 0.5] and parse_loads("0.4,0.8") == [0.4, 0.8]


def test_trace_option_on_and_off_are_booleans():
    """``--trace-option sort=off`` is False as YAML reads it (was: the text 'off', which the trace
    options now refuse as not a boolean)."""
    from aryl_gym.commands._trace_args import _typed

    assert _typed("off") is False and _typed("ON") is True and _typed("no") is False
    assert _typed("offset") == "offset" and _typed("1e3") == 1000


def test_load_grid_refused_before_its_out_folder_is_made(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Was: the folder was made (and claimed) before the grid was checked, so a refused grid
    (here a scenario with a fixed job count) left an empty --out folder behind."""
    out = tmp_path / "grid"
    code, _, err = _run(["calibrate", "--scenario", "tiny", "--load-grid", "0.3-0.5", "--out", str(out)], capsys)
    assert code == 2 and "fixes workload.num_jobs" in err
    assert not out.exists()
