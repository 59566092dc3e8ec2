"""Hostile-user pass (v6) over demos, reclaim-study, seed-study, trace-info and trace loading:
each case failed before its fix (see the "was:" comments in the package)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.workload.paths import default_data_root
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr

POLLUX_HEADER = "name,time,application,num_replicas,batch_size\n"


def _pollux_profiles() -> bool:
    root = default_data_root()
    return root is not None and (Path(root) / "traces/pollux-philly/traces/cifar10").is_dir()


@pytest.mark.skipif(not _pollux_profiles(), reason="needs the Pollux profiles (traces/pollux-philly)")
def test_pollux_replica_count_beyond_the_profiles_is_named_briefly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: 1000 replicas named a placement of 250 digits; 100000000 hung building it
    f = tmp_path / "w.csv"
    f.write_text(POLLUX_HEADER + "cifar10-0,10,cifar10,1000,2048\ncifar10-1,20,cifar10,2,128\n")
    rc, out, _ = _run(["trace-info", str(f), "--trace-format", "pollux", "--json"], capsys)
    assert rc == 0
    ex = json.dumps(json.loads(out)["report"]["examples"])
    assert "1000 replicas" in ex and "cover 1-64 replicas" in ex
    assert "4444" not in ex


def _snaps():  # type: ignore[no-untyped-def]
    from aryl_gym.reclaim_snapshots import synthetic_snapshots

    return synthetic_snapshots(2, 4, 8, 0, 0.5)


def test_interrupted_snapshot_save_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym import reclaim_snapshots as rs

    f = tmp_path / "s.npz"
    rs.save_snapshots(f, _snaps())
    before = f.read_bytes()

    def killed(fh, **kw):  # type: ignore[no-untyped-def]
        fh.write(b"PK\x03\x04part")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", killed)
    with pytest.raises(KeyboardInterrupt):
        rs.save_snapshots(f, _snaps())
    assert f.read_bytes() == before  # was: truncated to a partial zip
    assert [p.name for p in tmp_path.iterdir()] == ["s.npz"]
    monkeypatch.undo()
    assert len(rs.load_snapshots(f)) == 2


def test_snapshot_folder_is_named_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["reclaim-study", "--snapshots", str(tmp_path)], capsys)
    assert rc == 2 and "is a folder" in err and "does not exist" not in err


@pytest.mark.parametrize("flag", ["--save-snapshots", "--snapshots"])
def test_reclaim_study_empty_snapshot_path_is_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    # was: --save-snapshots '' read as not given (nothing saved, no word)
    rc, _, err = _run(["reclaim-study", "--scenario", "tiny", flag, ""], capsys)
    assert rc == 2 and flag in err and "empty" in err


def test_seed_study_infinite_delta_refused_before_any_episode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import aryl_gym.leaderboard.runner as runner

    def no_run(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("episodes ran")

    monkeypatch.setattr(runner, "run_suite", no_run)
    rc, _, err = _run(["seed-study", "--scenario", "tiny", "--seeds", "0-1", "--policies", "fifo,sjf",
                       "--delta", "inf", "--out", str(tmp_path / "ss"), "--workers", "1"], capsys)
    assert rc == 2 and "--delta must be a finite number" in err


def test_trace_info_cluster_override_needs_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: --train-servers ignored without a word when --scenario was not given
    f = tmp_path / "t.csv"
    f.write_text("submit,gpus,duration\n0,1,60\n")
    rc, _, err = _run(["trace-info", str(f), "--trace-format", "csv", "--train-servers", "5"], capsys)
    assert rc == 2 and "--train-servers" in err and "--scenario" in err


def test_demos_unwritable_out_refused_before_recording(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import aryl_gym.commands.demos as demos

    def no_record(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("episodes recorded")

    monkeypatch.setattr(demos, "record", no_record)
    (tmp_path / "afile").write_text("x")
    rc, _, err = _run(["demos", "--scenario", "tiny", "--out", str(tmp_path / "afile" / "d.npz")], capsys)
    assert rc == 2 and "cannot write in" in err and ".tmp" not in err


def test_demos_empty_minari_id_and_path_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("minari")
    import aryl_gym.offline as offline

    def no_write(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("dataset written")

    monkeypatch.setattr(offline, "write_dataset", no_write)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    rc, _, err = _run(["demos", "--scenario", "tiny", "--format", "minari", "--dataset-id", ""], capsys)
    assert rc == 2 and "bad Minari dataset id ''" in err  # was: recorded under the default id
    rc, _, err = _run(["demos", "--scenario", "tiny", "--format", "minari", "--minari-path", ""], capsys)
    assert rc == 2 and "--minari-path" in err  # was: written under the current folder


@pytest.mark.parametrize("argv", [
    ["simulate"], ["compare", "--policies", "aryl"], ["fit-world"], ["train", "--scenario", "tiny"],
    ["leaderboard"], ["reclaim-study"], ["calibrate"], ["demos", "--out", "x.npz"],
])
def test_empty_data_root_is_an_error_in_every_command(argv, capsys):
    """was: ``--data-root ''`` read as not given (the traces looked up in $ARYL_GYM_DATA or the
    default without a word); one shared argument now refuses it everywhere."""
    code, _, err = _run([*argv, "--data-root", ""], capsys)
    assert code == 2
    assert "argument --data-root: is empty" in err


def test_reclaim_study_server_range_error_names_the_options(capsys):
    """was: "need 2 <= min servers <= max servers, got -4-200", naming neither option."""
    code, _, err = _run(["reclaim-study", "--synthetic", "3", "--min-servers", "-4"], capsys)
    assert code == 2
    assert "(--min-servers, --max-servers): need 2 <= min <= max, got min -4, max 200" in err


def test_a_text_file_given_as_snapshots_is_not_a_npz_archive(tmp_path, capsys):
    """was: numpy's advice to load the file with allow_pickle, which is no advice for a CLI user."""
    f = tmp_path / "notes.npz"
    f.write_text("hello\n")
    code, _, err = _run(["reclaim-study", "--snapshots", str(f)], capsys)
    assert code == 2
    assert "not a reclaim snapshot file (.npz written by --save-snapshots): not a .npz archive" in err
    assert "allow_pickle" not in err


@pytest.mark.parametrize("bins", ["", " , "])
def test_reclaim_study_bins_without_an_edge_are_refused(bins, capsys):
    """was: one bin of everything, reported beside the paper's "<60" figure."""
    code, _, err = _run(["reclaim-study", "--synthetic", "3", "--bins", bins], capsys)
    assert code == 2 and "--bins takes increasing positive integers" in err
