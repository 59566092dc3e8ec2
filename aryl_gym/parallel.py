"""Running tasks in parallel, yielding results as they finish: here, in ``spawn``-ed worker
processes, or as Ray tasks. Shared by the leaderboard and ``aryl-gym reproduce``.

Workers are ``spawn``-ed (no fork of a process holding threads or big arrays) and die with their
parent (:func:`die_with_parent`), so a killed run leaves no worker behind. Ray connects to
``address`` (else ``RAY_ADDRESS``) or starts a local instance with ``workers`` CPUs and shuts
it down afterwards.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Worker initializer: end this process when ``parent_pid`` is gone.

    On Linux the kernel sends SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
    thread also polls the parent id, so a SIGKILL-ed leaderboard run leaves no worker behind.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl
            pass
    if os.getppid() != parent_pid:  # the parent died before the watch started
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="aryl-gym-parent-watch", daemon=True).start()


def local_map(fn: Callable[[T], R], tasks: Sequence[T], workers: int,
              on_error: Callable[[T, Exception], R] | None = None) -> Iterator[R]:
    """``fn(task)`` for every task, here (``workers <= 1``) or in ``spawn``-ed worker processes,
    yielding results as they finish. ``fn`` and the tasks must pickle.

    A worker process that dies (SIGKILL, the out-of-memory killer) breaks the pool: every task
    not finished by then yields ``on_error(task, exc)``, as :func:`ray_map` does for a dead Ray
    worker, and the results finished before are all yielded (was: a ``BrokenProcessPool``
    traceback). Without ``on_error`` the error is raised, after those results."""
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield fn(t)
        return

    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=mp.get_context("spawn"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
    finished = False
    try:
        futures = {pool.submit(fn, t): t for t in tasks}
        broken: BrokenExecutor | None = None
        for fut in as_completed(futures):
            try:
                r = fut.result()
            except BrokenExecutor as exc:
                if on_error is None:
                    broken = exc  # raised once the finished results are yielded
                    continue
                r = on_error(futures[fut], exc)
            yield r
        if broken is not None:
            raise broken
        finished = True
    finally:
        # On an interruption do not wait for the tasks in flight (their results would be lost
        # anyway); what finished has been yielded. Their workers are ended too: shutdown(wait=
        # False) alone leaves them running, and the interpreter's exit waits for them (was: an
        # interrupted run took as long as its longest episode in flight to exit)
        if not finished:
            procs = getattr(pool, "_processes", None) or {}  # no public way before Python 3.14
            for proc in list(procs.values()):
                proc.terminate()
        pool.shutdown(wait=finished, cancel_futures=True)


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def import_ray() -> Any:
    try:
        # an optional dependency: its absence is handled here
        import ray
    except ImportError:
        raise ValueError(
            "--backend ray needs Ray: pip install 'aryl-gym[ray]' (or pip install ray), "
            "or use --backend local"
        ) from None
    return ray


def ray_map(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    workers: int,
    on_error: Callable[[T, Exception], R],
    address: str | None = None,
) -> Iterator[R]:
    """``fn(task)`` for every task as Ray tasks, yielding results as they finish; a task whose
    worker died yields ``on_error(task, exc)``."""
    if not tasks:
        return
    ray = import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    started_here = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {
            "ignore_reinit_error": True,
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address:
            kw["address"] = address
        else:
            kw["num_cpus"] = max(1, int(workers))
        ray.init(**kw)
        started_here = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        pending = {remote.remote(t): t for t in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a worker died: report, go on
                    yield on_error(task, exc)
    finally:
        if started_here:
            ray.shutdown()
