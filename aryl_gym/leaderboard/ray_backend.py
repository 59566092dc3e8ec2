"""Episodes as Ray tasks (the ``--backend ray`` of ``aryl-gym leaderboard``).

``ray.init(address=...)`` connects to a running cluster when an address is given (the
``--ray-address`` option, else the ``RAY_ADDRESS`` environment variable, e.g.
``ray://head:10001`` or ``auto``); otherwise it starts a local Ray instance with ``workers``
CPUs and shuts it down afterwards. Each task runs
:func:`aryl_gym.leaderboard.runner.run_episode`, the same function the local backend runs, so
the rows are identical apart from wall-clock columns. Results are yielded as tasks finish
(``ray.wait``), so the CSV is written episode by episode as with the local backend.

On a multi-machine cluster every node needs ``aryl-gym`` installed (``pip install
'aryl-gym[ray]'``, or a Ray ``runtime_env``); rows and series come back to the driver, which
alone writes files.

Ray is an optional dependency: ``pip install 'aryl-gym[ray]'``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from aryl_gym.leaderboard.episodes import EpisodeOutput, EpisodeTask, run_episode


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError(
            "--backend ray needs Ray: pip install 'aryl-gym[ray]' (or pip install ray), "
            "or use --backend local"
        ) from None
    return ray


def ray_executor(
    tasks: Sequence[EpisodeTask], workers: int, address: str | None = None
) -> Iterator[EpisodeOutput]:
    """Run ``tasks`` as Ray tasks; yield each :class:`EpisodeOutput` as it finishes."""
    if not tasks:
        return
    ray = _import_ray()
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
        remote = ray.remote(num_cpus=1, max_retries=0)(run_episode)
        pending = {remote.remote(t): t for t in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a worker died: report, go on
                    yield EpisodeOutput(task, "failed", message=f"ray task failed: {exc}")
    finally:
        if started_here:
            ray.shutdown()
