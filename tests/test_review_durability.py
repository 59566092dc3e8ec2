"""Durability review (2026-12-08): files a killed run leaves whole, a worker process that dies,
and two runs updating one shared document at once."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aryl_gym.leaderboard import suite_from_dict

SUITE = {
    "name": "review",
    "description": "durability review",
    "scenarios": ["tiny"],
    "seeds": [0, 1],
    "baseline": "fifo",
    "policies": ["fifo", "sjf"],
}


def _hardlink_old(path: Path, text: str) -> Path:
    """``path`` holding ``text``, and a hard link to it: a file rewritten in place shows the
    new content through the link too; one replaced whole (written beside, renamed) does not."""
    path.write_text(text)
    link = path.with_name(path.name + ".link")
    os.link(path, link)
    return link


# ----------------------------------------------------------------------------------------------
# the table and plots are replaced whole (a run killed while writing them left a cut file)
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow  # runs a small suite
def test_leaderboard_table_files_are_replaced_whole_not_rewritten_in_place(tmp_path: Path) -> None:
    from aryl_gym.leaderboard.report import write_report
    from aryl_gym.leaderboard.runner import run_suite

    suite = suite_from_dict(dict(SUITE))
    summary = run_suite(suite, tmp_path, progress=False, log=lambda m: None)
    links = [_hardlink_old(tmp_path / name, "old table\n") for name in ("leaderboard.md", "leaderboard.json")]
    md, js, _ = write_report(tmp_path, suite, summary.rows, summary)
    assert "fifo" in md.read_text() and js.read_text().startswith("{")
    # was: written in place (Path.write_text), so SIGKILL or Ctrl-C mid-write left a cut table
    for link in links:
        assert link.read_text() == "old table\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_plots_are_replaced_whole_not_rewritten_in_place(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from aryl_gym.leaderboard.plots import _pyplot, _save

    plt = _pyplot()
    path = tmp_path / "usage_tiny.png"
    link = _hardlink_old(path, "old plot")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    _save(fig, plt, path)
    assert path.read_bytes().startswith(b"\x89PNG")
    assert link.read_bytes() == b"old plot"  # was: fig.savefig(path) in place: a cut PNG when killed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["usage_tiny.png", "usage_tiny.png.link"]


# ----------------------------------------------------------------------------------------------
# reproduce --write-docs of two scales at once: both blocks land
# ----------------------------------------------------------------------------------------------


def test_concurrent_updates_of_one_document_keep_every_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym.reproduce import report as rr

    doc = tmp_path / "reproduction.md"
    doc.write_text("# Title\n\nhand-written prose\n")
    slow = rr.replace_block

    def replace_slowly(text: str, name: str, body: str) -> str:
        time.sleep(0.05)  # the window between reading the file and writing it back
        return slow(text, name, body)

    monkeypatch.setattr(rr, "replace_block", replace_slowly)
    errors: list[BaseException] = []

    def update(i: int) -> None:
        try:
            rr.update_doc(doc, {f"table-s{i}": f"table of scale {i}"})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=update, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # was: a read-modify-write through one fixed temporary (reproduction.md.tmp): the later run
    # dropped the earlier runs' blocks, or its os.replace failed with FileNotFoundError
    assert errors == []
    text = doc.read_text()
    assert text.startswith("# Title\n\nhand-written prose\n")
    for i in range(4):
        assert f"<!-- reproduce:table-s{i} -->\ntable of scale {i}\n" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reproduction.md"]


# ----------------------------------------------------------------------------------------------
# a worker process that dies: failed episodes and a clear line, not a BrokenProcessPool traceback
# ----------------------------------------------------------------------------------------------


def test_a_broken_pool_makes_failed_episodes_in_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures.process import BrokenProcessPool

    from aryl_gym import episodes
    from aryl_gym.leaderboard.runner import run_suite

    def broken_map(fn: Any, tasks: Any, workers: int, on_error: Any = None) -> Any:
        # what local_map yields when a worker is killed: the first task finished, the rest lost
        for i, t in enumerate(tasks):
            if i == 0:
                yield fn(t)
            elif on_error is None:
                raise BrokenProcessPool("A process in the process pool was terminated abruptly")
            else:
                yield on_error(t, BrokenProcessPool("terminated abruptly"))

    monkeypatch.setattr(episodes, "local_map", broken_map)
    summary = run_suite(suite_from_dict(dict(SUITE)), tmp_path, progress=False, log=lambda m: None)
    assert len(summary.rows) == 1 and summary.new == 1  # the finished episode's row is kept
    assert len(summary.failed) == 3
    assert all("worker process died" in msg and "--resume" in msg for _, msg in summary.failed)
    monkeypatch.undo()
    again = run_suite(suite_from_dict(dict(SUITE)), tmp_path, progress=False, resume=True, log=lambda m: None)
    assert again.resumed == 1 and again.new == 3 and not again.failed


def _die_on_one(x: int) -> int:
    """A worker's task that kills its own process (SIGKILL, as the out-of-memory killer does)."""
    if x == 1:
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    return x


@pytest.mark.slow
def test_local_map_yields_on_error_for_tasks_lost_with_a_killed_worker() -> None:
    from concurrent.futures.process import BrokenProcessPool

    from aryl_gym.parallel import local_map

    got = list(local_map(_die_on_one, [0, 1, 2], 2, on_error=lambda t, exc: ("lost", t, type(exc).__name__)))
    assert ("lost", 1, "BrokenProcessPool") in got  # was: BrokenProcessPool raised out of the run
    assert sorted(g if isinstance(g, int) else g[1] for g in got) == [0, 1, 2]  # each task once
    with pytest.raises(BrokenProcessPool):  # without on_error the error still reaches the caller
        list(local_map(_die_on_one, [0, 1, 2], 2))
