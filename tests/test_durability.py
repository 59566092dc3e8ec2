"""Leaderboard durability: the output lock, unique backups, resume of damaged/duplicated/edited
rows, validation by full replay, workers that die with their parent, progress lines in logs."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.episodes import EpisodeTask
from aryl_gym.leaderboard import suite_from_dict
from aryl_gym.leaderboard.results import CSV_NAME, read_rows, scan_rows, write_series
from aryl_gym.leaderboard.runner import run_suite
from aryl_gym.leaderboard.validate import task_from_row, validate_csv
from aryl_gym.provenance import config_hash

SUITE = {
    "name": "dur",
    "description": "durability tests",
    "scenarios": ["tiny"],
    "seeds": [0, 1],
    "baseline": "fifo",
    "policies": ["fifo", "sjf"],
}


def _suite() -> Any:
    return suite_from_dict(dict(SUITE))


def _quiet(msgs: list[str] | None = None) -> Any:
    return (lambda m: msgs.append(m)) if msgs is not None else (lambda m: None)


@pytest.fixture
def done_run(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    run_suite(_suite(), out, progress=False, log=_quiet())
    return out


def _lines(out: Path) -> list[str]:
    return (out / CSV_NAME).read_text().splitlines(keepends=True)


def _backups(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.name.startswith(CSV_NAME + ".bak-") and not p.name.endswith(".digests"))


def test_overwrite_twice_in_one_second_keeps_both_backups(done_run: Path) -> None:
    first = (done_run / CSV_NAME).read_text()
    run_suite(_suite(), done_run, overwrite=True, progress=False, log=_quiet())
    run_suite(_suite(), done_run, overwrite=True, progress=False, log=_quiet())
    baks = _backups(done_run)
    assert len(baks) == 2, baks
    assert baks[0].read_text() == first  # the original rows, untouched
    assert len(read_rows(baks[1])[0]) == 4


def test_second_process_cannot_write_the_same_out(done_run: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from aryl_gym.fileio import DirLock
            with DirLock({str(done_run)!r}):
                print("locked", flush=True)
                time.sleep(60)
        """)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=rf"pid {holder.pid}.*another --out"):
            run_suite(_suite(), done_run, resume=True, progress=False, log=_quiet())
    finally:
        holder.kill()
        holder.wait()
    # the kernel dropped the dead holder's lock: the folder is usable again
    run_suite(_suite(), done_run, resume=True, progress=False, log=_quiet())


def test_resume_reports_damaged_duplicated_and_edited_rows_separately(done_run: Path) -> None:
    lines = _lines(done_run)
    header, rows = lines[0], lines[1:]
    assert len(rows) == 4
    # change one number of the third row: its avg_jct (a metric column)
    cols = header.strip().split(",")
    fields = rows[2].rstrip("\r\n").split(",")
    i = cols.index("avg_jct")
    original_jct = float(fields[i])
    fields[i] = repr(original_jct * 0.5)
    edited = ",".join(fields) + "\r\n"
    text = header + rows[0] + "garbage,in,the,middle\r\n" + rows[1] + rows[1] + edited + rows[3]
    (done_run / CSV_NAME).write_text(text, newline="")
    msgs: list[str] = []
    summ = run_suite(_suite(), done_run, resume=True, progress=False, log=_quiet(msgs))
    said = "\n".join(msgs)
    assert "1 damaged row(s)" in said and "line 3" in said
    assert "cut by an interruption" not in said
    assert "1 duplicated row(s)" in said
    assert "1 edited row(s)" in said
    # nothing is deleted without a backup: the file as it was is kept byte for byte
    baks = _backups(done_run)
    assert len(baks) == 1 and baks[0].read_bytes() == text.encode() and str(baks[0]) in said
    # the edited row was rerun (deterministic: the original number is back); the rest resumed
    assert summ.new == 1 and summ.resumed == 3
    rows_now, bad = read_rows(done_run / CSV_NAME)
    assert bad == 0 and len(rows_now) == 4
    assert original_jct in [r["avg_jct"] for r in rows_now]
    assert scan_rows(done_run / CSV_NAME).problems == 0


def test_cut_last_row_is_reported_as_cut(done_run: Path) -> None:
    with open(done_run / CSV_NAME, "a", newline="") as fh:
        fh.write("dur,tiny,tiny,aryl_gym/Aryl-v1,v1,1,sjf,policy,,,30,3")
    msgs: list[str] = []
    summ = run_suite(_suite(), done_run, resume=True, progress=False, log=_quiet(msgs))
    assert "incomplete last row" in "\n".join(msgs) and "damaged row" not in "\n".join(msgs)
    assert summ.new == 0 and summ.resumed == 4 and len(_backups(done_run)) == 1


def test_validate_replays_every_row_by_default_and_catches_an_edit(done_run: Path) -> None:
    rep = validate_csv(done_run / CSV_NAME)
    assert rep.ok and len(rep.checks) == rep.rows_total == 4
    lines = _lines(done_run)
    cols = lines[0].strip().split(",")
    fields = lines[4].rstrip("\r\n").split(",")
    i = cols.index("jobs_completed")
    fields[i] = str(int(fields[i]) - 1)
    lines[4] = ",".join(fields) + "\r\n"
    (done_run / CSV_NAME).write_text("".join(lines), newline="")
    rep = validate_csv(done_run)  # the folder works too
    assert not rep.ok
    assert [c.status for c in rep.checks].count("mismatch") == 1
    assert any("edited" in p for p in rep.file_problems)
    assert "do NOT match" in rep.render()


def test_validate_rebuilds_the_requested_env_kwargs_of_an_agent_row() -> None:
    """An agent row records the kwargs of the env it used (the model's own plus the suite's);
    the config hash covers the suite's only. Validation must not call that a config change."""
    cfg = load_scenario("tiny")
    ent = "ppo-testbed"  # the agent's source
    requested: dict[str, Any] = {}
    used = {"action_mode": "sequential", "reward_scale": 36000.0}
    row = {
        "suite": "s", "scenario": "tiny", "seed": 0, "policy": "ppo", "kind": "agent",
        "source": "ppo-testbed", "env_id": "aryl_gym/Aryl-v1", "env_kwargs": json.dumps(used),
        "config_hash": config_hash(cfg, ent, "aryl_gym/Aryl-v1", requested),
    }
    task = task_from_row(row)
    assert task.config_hash == row["config_hash"] and dict(task.env_kwargs) == requested
    # a suite that asked for one of them
    row["config_hash"] = config_hash(cfg, ent, "aryl_gym/Aryl-v1", {"action_mode": "sequential"})
    task = task_from_row(row)
    assert task.config_hash == row["config_hash"]
    assert dict(task.env_kwargs) == {"action_mode": "sequential"}


def test_series_writes_are_atomic_under_concurrency(tmp_path: Path) -> None:
    path = tmp_path / "episodes" / "x" / "seed0.json.gz"
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for _ in range(20):
                write_series(path, {"k": k, "xs": list(range(200))})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    import gzip

    assert json.loads(gzip.decompress(path.read_bytes()))["xs"] == list(range(200))
    assert [p.name for p in path.parent.iterdir()] == ["seed0.json.gz"]  # no temporaries left


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks /proc")
def test_workers_die_with_their_parent(tmp_path: Path) -> None:
    """SIGKILL a parent that runs a local process pool (as the leaderboard does): its workers go too."""
    script = textwrap.dedent("""
        import multiprocessing as mp, os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from aryl_gym.parallel import die_with_parent

        if __name__ == "__main__":
            pool = ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"),
                                       initializer=die_with_parent, initargs=(os.getpid(),))
            futs = [pool.submit(time.sleep, 120) for _ in range(2)]
            while len(pool._processes) < 2:
                time.sleep(0.05)
            time.sleep(1.0)  # let the workers run their initializer
            print(" ".join(str(p) for p in pool._processes), flush=True)
            time.sleep(120)
    """)
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = [int(x) for x in parent.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "workers outlived their parent"


def test_local_executor_installs_the_parent_watch() -> None:
    """The one worker pool (the leaderboard's and reproduce's: ``episodes.local_executor``) is
    ``parallel.local_map``, which installs the parent watch."""
    import inspect

    from aryl_gym import episodes, parallel, reproduce

    assert "initializer=die_with_parent" in inspect.getsource(parallel.local_map)
    assert reproduce.local_executor is episodes.local_executor
    assert "local_map(" in inspect.getsource(episodes.local_executor)


def test_progress_lines_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym.progress import LineProgress, progress_bar

    monkeypatch.setenv("ARYL_GYM_PROGRESS_S", "0")
    buf = io.StringIO()
    bar = progress_bar(3, "suite", unit="ep", stream=buf)
    assert isinstance(bar, LineProgress)
    for _ in range(3):
        bar.update(1)
    bar.close()
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("suite: 1/3 ep (33%)") and lines[-1].startswith("suite: 3/3 ep (100%)")
    assert progress_bar(3, "x", enabled=False) is None


def test_progress_lines_are_rate_limited() -> None:
    from aryl_gym.progress import LineProgress

    buf = io.StringIO()
    bar = LineProgress(1000, "x", "jobs", buf, interval=3600.0)
    for _ in range(1000):
        bar.update(1)
    bar.close()
    assert buf.getvalue() == ""  # a short run stays silent; a long one prints every interval


def test_episode_task_is_unchanged_by_digests(done_run: Path) -> None:
    """The digest side file is written with the rows and matches them."""
    scan = scan_rows(done_run / CSV_NAME)
    assert scan.edited == [] and scan.problems == 0 and len(scan.rows) == 4
    assert isinstance(EpisodeTask, type)


def test_leaderboard_json_and_validate_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from aryl_gym.cli import main

    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(dict(SUITE)))
    out = tmp_path / "out"
    rc = main(["leaderboard", "--suite", str(suite), "--out", str(out), "--workers", "1", "--no-progress",
               "--no-plots", "--no-tensorboard", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["episodes"] == 4 and d["new"] == 4 and d["files"]["csv"] == str(out / CSV_NAME)
    rc = main(["leaderboard", "--validate", str(out), "--json", "--no-progress"])
    v = json.loads(capsys.readouterr().out)
    assert rc == 0 and v["ok"] and len(v["checks"]) == v["rows_total"] == 4


def test_dirlock_records_its_pid_is_reentrant_and_keeps_the_holders_pid(tmp_path: Path) -> None:
    """DirLock on filelock: the pid goes into DIR/.lock; nested holds in one process share the
    lock; a refused attempt leaves the holder's pid in place (filelock < 3.30 truncated it), so
    every refusal names the holder; a dead holder's lock is gone (no stale lock)."""
    import fcntl

    from aryl_gym.fileio import DirLock

    with DirLock(tmp_path) as outer:
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
        with DirLock(tmp_path, "run"):  # re-entrant
            pass
        assert outer._lock is not None and outer._lock.is_locked  # still held by the outer
    fd = os.open(tmp_path / ".lock", os.O_RDWR)  # another holder (its own open file)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # DirLock released: free to take
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"4242\n", 0)
    try:
        for _ in range(2):
            with pytest.raises(ConfigError, match=r"another aryl-gym run \(pid 4242\) is writing to this --out"):
                DirLock(tmp_path).acquire()
        assert (tmp_path / ".lock").read_text() == "4242\n"
    finally:
        os.close(fd)  # the holder dies: the kernel drops its lock
    with DirLock(tmp_path, "run"):
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
