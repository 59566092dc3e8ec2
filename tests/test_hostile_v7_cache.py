"""Reliability v7: the episode cache and the runs that fill it (``aryl-gym reproduce``,
``aryl-gym calibrate --relevance/--load-grid --out``), tried as a careless or hostile user would:
a cached file whose digest was removed, temporaries left by a SIGKILL, SIGTERM and Ctrl-C in the
middle of a run.

Each test says what used to happen in its docstring or comments.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aryl_gym import episodes as ep
from aryl_gym import reproduce as rp
from aryl_gym.fileio import pid_alive
from aryl_gym.scenario import load_scenario
from tests.test_hostile_v2 import _cli  # aryl-gym ARGV: exit code, stdout, stderr

ROOT = Path(__file__).resolve().parents[1]
_RP = ["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "jct-aryl-baseline", "--no-progress"]
_REL = ["calibrate", "--relevance", "--scenarios", "tiny", "--policies", "fifo", "--seeds", "0"]


def _quiet(msg: str) -> None:
    pass


def _task(policy: str = "fifo", seed: int = 0) -> ep.EpisodeTask:
    return ep.policy_task(load_scenario("tiny"), policy, seed, "tiny")


def _episodes(out: Path) -> list[Path]:
    return sorted((out / "episodes").rglob("*.json"))


def _temporaries(out: Path) -> list[Path]:
    return sorted((out / "episodes").rglob("*.tmp"))


# ----------------------------------------------------------------------------------------------
# 1. a cached episode whose digest was removed
# ----------------------------------------------------------------------------------------------


def test_a_cached_episode_without_its_digest_is_refused_as_an_edit(tmp_path: Path) -> None:
    """Was: a file whose "digest" key was deleted (and whose numbers were then edited at will)
    was used unchecked. Now it is refused as a digest mismatch is: a CacheError naming the file
    and the fix, and --fresh (or deleting it) recomputes it."""
    t = _task()
    res, _ = ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    true_jct = res[t].avg_jct
    p = ep.cache_path(tmp_path, t)
    d = json.loads(p.read_text())
    d.pop("digest")
    d["result"]["avg_jct"] = true_jct * 0.5  # a plausible hand edit the digest would have caught
    p.write_text(json.dumps(d))
    with pytest.raises(ep.CacheError, match='"digest" was removed') as exc:
        ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    assert str(p) in str(exc.value) and "delete it" in str(exc.value) and "--fresh" in str(exc.value)
    # the same path as a digest mismatch: the same error, the same hint
    d["digest"] = "0" * 16
    p.write_text(json.dumps(d))
    with pytest.raises(ep.CacheError, match="digest mismatch"):
        ep.read_cached(p, t)
    # --fresh recomputes it: the true number again, with its digest
    res, stats = ep.run_tasks([t], tmp_path, fresh=True, progress="none", log=_quiet)
    assert stats.new == 1 and res[t].avg_jct == true_jct
    assert json.loads(p.read_text())["digest"] == ep.result_digest(json.loads(p.read_text())["result"])
    res, stats = ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    assert stats.cached == 1 and res[t].avg_jct == true_jct


def test_reproduce_names_a_cached_episode_without_its_digest(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Was: rerunning reproduce reported the edited number ("0 episode(s) run, 2 cached")."""
    out = tmp_path / "o"
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 0, err
    first = _episodes(out)[0]
    d = json.loads(first.read_text())
    d.pop("digest")
    first.write_text(json.dumps(d))
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 2 and f"{first}: damaged cached episode" in err and '"digest" was removed' in err
    first.unlink()  # the fix the message gives
    rc, stdout, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 0 and "1 episode(s) run, 1 cached" in stdout
    assert "digest" in json.loads(first.read_text())


# ----------------------------------------------------------------------------------------------
# 2. temporaries left by a killed writer
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not pid_alive(p.pid)
    return p.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of another process that is running (a concurrent writer)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _tmp(out: Path, pid: int, age_s: float, name: str = "", seed: int = 0) -> Path:
    # each temporary its own seed number (was: the pid's residue, which could name two the same)
    p = ep.cache_path(out, _task()).parent / (name or f"seed{seed}-00529ff17095b1bb.json.{pid}.tmp")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text('{"scenario": "tiny", "res')  # a write cut short
    t = time.time() - age_s
    os.utime(p, (t, t))
    return p


def test_opening_the_cache_removes_temporaries_of_dead_writers_only(tmp_path: Path, dead_pid: int,
                                                                    live_pid: int) -> None:
    """Was: every ``seedN-HASH.json.PID.tmp`` a SIGKILL-ed run left stayed forever. Now opening
    the cache removes those of writers that are gone (older than the 60 s grace), and of any
    writer after an hour; a running writer's temporary is kept, so two runs can share a cache."""
    dead = _tmp(tmp_path, dead_pid, 120, seed=10)
    dead_young = _tmp(tmp_path, dead_pid, 5, f"seed1-00529ff17095b1bb.json.{dead_pid}.tmp")
    live = _tmp(tmp_path, live_pid, 120, seed=11)
    mine = _tmp(tmp_path, os.getpid(), 120, seed=12)
    live_old = _tmp(tmp_path, live_pid, 2 * 3600, f"seed2-00529ff17095b1bb.json.{live_pid}.tmp")
    other = _tmp(tmp_path, dead_pid, 2 * 3600, "notes.tmp")  # not a name the cache writes
    cache = ep.EpisodeCache(tmp_path)
    assert sorted(cache.removed_temporaries) == sorted([dead, live_old])
    assert not dead.exists() and not live_old.exists()
    assert live.exists() and mine.exists() and dead_young.exists() and other.exists()
    # a second opening (another run sharing the cache) finds nothing more to remove
    assert ep.remove_stale_temporaries(tmp_path) == []
    # the young one goes once past the grace
    assert ep.remove_stale_temporaries(tmp_path, now=time.time() + 120) == [dead_young]


def test_a_run_next_to_a_killed_writers_temporary_cleans_it(tmp_path: Path, dead_pid: int) -> None:
    """A rerun after a SIGKILL: the leftover of the same episode is removed, the episode is
    written, and nothing but episode files remains."""
    t = _task()
    left = ep.cache_path(tmp_path, t).with_name(ep.cache_path(tmp_path, t).name + f".{dead_pid}.tmp")
    left.parent.mkdir(parents=True)
    left.write_text("{")
    os.utime(left, (time.time() - 600, time.time() - 600))
    _, stats = ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    assert stats.new == 1 and _temporaries(tmp_path) == [] and _episodes(tmp_path) == [ep.cache_path(tmp_path, t)]


def test_an_interrupted_write_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: an error or Ctrl-C between writing the temporary and renaming it left the temporary."""
    t = _task()
    out = ep.run_episode(t)

    def cut(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ep.os, "replace", cut)
    with pytest.raises(KeyboardInterrupt):
        ep.write_cached(ep.cache_path(tmp_path, t), t, ep.result_record(out), "c")
    monkeypatch.undo()
    assert _temporaries(tmp_path) == [] and _episodes(tmp_path) == []


# ----------------------------------------------------------------------------------------------
# 3. SIGTERM and Ctrl-C in the middle of reproduce and calibrate
# ----------------------------------------------------------------------------------------------

#: reproduce, SIGTERM-ed by itself as its second episode starts (a real signal, delivered by
#: the kernel; the first episode is finished and saved)
SIGTERM_RUN = """
import os, signal, sys
from aryl_gym import episodes as ep
from aryl_gym.cli import main

real, calls = ep.run_episode, []

def run(task):
    calls.append(task)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGTERM)
    return real(task)

ep.run_episode = run
sys.exit(main(sys.argv[1:]))
"""


def _resume_line(err: str) -> str:
    lines = [x for x in err.splitlines() if "interrupted" in x]
    assert len(lines) == 1, err  # one line (was: none, or the driver's line and "interrupted")
    return lines[0]


def _resume_argv(line: str) -> list[str]:
    cmd = shlex.split(line.split("resume from the cache: ", 1)[1])
    assert cmd[0] == "aryl-gym"
    return cmd[1:]


@pytest.fixture
def sigterm_guard() -> Iterator[Any]:
    """A SIGTERM handler that fails the test instead of killing pytest, should the command not
    install its own; checked to be back in place afterwards."""

    def guard(signum: int, frame: Any) -> None:
        raise AssertionError("SIGTERM reached the test's guard: the command installed no handler")

    before = signal.signal(signal.SIGTERM, guard)
    try:
        yield guard
    finally:
        signal.signal(signal.SIGTERM, before)


def test_reproduce_sigterm_says_what_is_kept_and_how_to_resume(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Was: SIGTERM (a batch scheduler's stop, ``kill``) ended reproduce at once, with no word:
    exit -15 and no message. Now: exit 143 and one line with the episodes done, where they are
    and the exact command; that command resumes the run and runs only the rest."""
    out = tmp_path / "o"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", SIGTERM_RUN, *_RP, "--out", str(out)],
                       capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    assert "Traceback" not in p.stderr
    line = _resume_line(p.stderr)
    assert line == (f"interrupted: 1 of 2 episode(s) done (1 run now, 0 saved before); they are kept in "
                    f"{out}/episodes; rerun the same command to resume from the cache: aryl-gym reproduce "
                    f"--scale tiny --seeds 1 --rows jct-aryl-baseline --out {out} --no-progress")
    assert p.stderr.rstrip().endswith(line)
    assert len(_episodes(out)) == 1 and _temporaries(out) == []  # the finished episode is kept
    rc, stdout, err = _cli(_resume_argv(line), capsys)
    assert rc == 0 and "1 episode(s) run, 1 cached" in stdout, err


def test_sigterm_while_an_episode_is_saved_keeps_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str],
                                                    sigterm_guard: Any) -> None:
    """A SIGTERM that comes while a finished episode is being written waits for the write: the
    episode is saved and counted, then the run stops (nothing computed is lost)."""
    real = ep.write_cached

    def write(*a: Any, **k: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(ep, "write_cached", write)
    out = tmp_path / "o"
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 143 and "interrupted: 1 of 2 episode(s) done (1 run now, 0 saved before)" in _resume_line(err)
    assert len(_episodes(out)) == 1 and _temporaries(out) == []
    assert signal.getsignal(signal.SIGTERM) is sigterm_guard  # the handler is put back
    monkeypatch.setattr(ep, "write_cached", real)
    rc, stdout, _ = _cli([*_RP, "--out", str(out)], capsys)
    assert rc == 0 and "1 episode(s) run, 1 cached" in stdout


def _interrupt_second_episode(monkeypatch: pytest.MonkeyPatch, how: str) -> list[ep.EpisodeTask]:
    real, calls = ep.run_episode, []

    def run(task: ep.EpisodeTask) -> ep.EpisodeOutput:
        calls.append(task)
        if len(calls) == 2:
            if how == "SIGTERM":
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(ep, "run_episode", run)
    return calls


def test_reproduce_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Was: the driver's line ("1 new episode(s) were saved; they are cached in ...; rerun to
    resume", no command) then the CLI's bare "interrupted"."""
    _interrupt_second_episode(monkeypatch, "ctrl-c")
    out = tmp_path / "o"
    rc, _, err = _cli([*_RP, "--out", str(out), "--fresh"], capsys)
    line = _resume_line(err)
    assert rc == 130 and line.startswith("interrupted: 1 of 2 episode(s) done (1 run now, 0 saved before)")
    # --fresh is left out of the command that resumes (it would recompute the saved episode)
    assert "rerun without --fresh (episodes saved before this run are then used too)" in line
    assert "--fresh" not in _resume_argv(line)


def test_reproduce_interrupted_outside_the_episodes_still_says_how_to_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"

    def cut(*a: Any, **k: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "update_doc", cut)  # while the report is written
    rc, _, err = _cli([*_RP, "--out", str(out)], capsys)
    line = _resume_line(err)
    assert rc == 130 and line.startswith(f"interrupted: the finished episodes are kept in {out}/episodes")
    assert len(_episodes(out)) == 2
    monkeypatch.undo()
    rc, stdout, _ = _cli(_resume_argv(line), capsys)
    assert rc == 0 and "0 episode(s) run, 2 cached" in stdout


def test_calibrate_sigterm_says_how_to_resume_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str],
                                                          sigterm_guard: Any) -> None:
    """Was: SIGTERM killed ``calibrate --relevance --out`` silently; Ctrl-C said "rerun to
    resume" without the command."""
    calls = _interrupt_second_episode(monkeypatch, "SIGTERM")
    out = tmp_path / "o"
    rc, _, err = _cli([*_REL, "--out", str(out)], capsys)
    line = _resume_line(err)
    assert rc == 143 and line == (
        f"interrupted: 1 of 2 episode(s) done (1 run now, 0 saved before); they are kept in {out}/episodes; "
        f"rerun the same command to resume from the cache: aryl-gym calibrate --relevance --scenarios tiny "
        f"--policies fifo --seeds 0 --out {out}")
    assert len(_episodes(out)) == 1
    calls.clear()  # the resumed run: one call, so no signal
    rc, stdout, err = _cli(_resume_argv(line), capsys)
    assert rc == 0 and "tiny" in stdout, err
    assert len(calls) == 1  # only the episode that was not done ran


def test_calibrate_without_out_says_nothing_was_kept(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _interrupt_second_episode(monkeypatch, "ctrl-c")
    rc, _, err = _cli(_REL, capsys)
    line = _resume_line(err)
    assert rc == 130 and line.startswith("interrupted: 1 of 2 episode(s) done") and "nothing was saved" in line


def test_a_sigterm_handler_replaced_by_ray_init_still_ends_with_the_line(
        capsys: pytest.CaptureFixture[str], sigterm_guard: Any) -> None:
    """``ray.init`` (``--backend ray``) sets a SIGTERM handler that calls ``sys.exit(15)``: was
    exit 15 and no word; now the line, exit 143, and the handlers are put back."""

    def body() -> int:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # what ray.init does
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    assert ep.run_interruptible(lambda: 7, "aryl-gym x", "h") == 7  # a run that ends is untouched
    assert ep.run_interruptible(body, "aryl-gym x", "kept in OUT; rerun: aryl-gym x") == 143
    assert capsys.readouterr().err == "interrupted: kept in OUT; rerun: aryl-gym x\n"
    assert signal.getsignal(signal.SIGTERM) is sigterm_guard
    with pytest.raises(SystemExit):  # any other exit is left alone
        ep.run_interruptible(lambda: sys.exit(3), "aryl-gym x", "h")


@pytest.mark.parametrize("argv", [
    ["calibrate", "--load-grid", "0.3-0.9", "--scenario", "tiny", "--seeds", "0-4", "--workers", "2",
     "--out", "o d"],
    ["calibrate", "--relevance", "--scenario", "tiny", "--seeds", "3,1", "--json", "--out", "o"],
    ["calibrate", "--scenario", "tiny", "--seed", "2"],
])
def test_calibrate_resume_command_is_the_same_run(argv: list[str], tmp_path: Path) -> None:
    """The command the interruption line gives parses back to the same options."""
    from aryl_gym.cli import build_parser
    from aryl_gym.commands import calibrate

    parser = build_parser()
    args = parser.parse_args(argv)
    calibrate.check_modes(args)
    cmd = calibrate.command_line(args)
    again = parser.parse_args(shlex.split(cmd)[1:])
    calibrate.check_modes(again)
    unused = {"scenario"} if args.relevance else set()  # --relevance runs --scenarios
    assert {k: v for k, v in vars(again).items() if k not in unused} == \
        {k: v for k, v in vars(args).items() if k not in unused}, cmd


@pytest.mark.parametrize("key", ["policy", "seed", "config_hash"])
def test_a_cached_episode_without_its_identity_keys_is_refused(tmp_path: Path, key: str) -> None:
    """Was: a file whose "policy", "seed" or "config_hash" was deleted skipped the "holds another
    episode" check (a file copied over from another seed, then stripped, was used)."""
    t = _task()
    ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    p = ep.cache_path(tmp_path, t)
    d = json.loads(p.read_text())
    d.pop(key)
    p.write_text(json.dumps(d))
    with pytest.raises(ep.CacheError, match=f'"{key}" was removed') as exc:
        ep.read_cached(p, t)
    assert str(p) in str(exc.value) and "--fresh" in str(exc.value)
    res, stats = ep.run_tasks([t], tmp_path, fresh=True, progress="none", log=_quiet)
    assert stats.new == 1 and ep.read_cached(p, t) is not None
