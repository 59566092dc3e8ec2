"""Episodes as Ray tasks (the ``--backend ray`` of ``aryl-gym leaderboard``).

``ray.init(address=...)`` connects to a running cluster when an address is given (the
``--ray-address`` option, else the ``RAY_ADDRESS`` environment variable, e.g.
``ray://head:10001`` or ``auto``); otherwise it starts a local Ray instance with ``workers``
CPUs and shuts it down afterwards. Each task runs
:func:`aryl_gym.leaderboard.episodes.run_episode`, the same function the local backend runs, so
the rows are identical apart from wall-clock columns. Results are yielded as tasks finish
(``ray.wait``), so the CSV is written episode by episode as with the local backend.

On a multi-machine cluster every node needs ``aryl-gym`` installed (``pip install
'aryl-gym[ray]'``, or a Ray ``runtime_env``); rows and series come back to the driver, which
alone writes files.

Ray is an optional dependency: ``pip install 'aryl-gym[ray]'``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aryl_gym.leaderboard.episodes import EpisodeOutput, EpisodeTask, run_episode
from aryl_gym.parallel import ray_available, ray_map

__all__ = ["ray_available", "ray_executor"]


def _failed(task: EpisodeTask, exc: Exception) -> EpisodeOutput:
    return EpisodeOutput(task, "failed", message=f"ray task failed: {exc}")


def ray_executor(
    tasks: Sequence[EpisodeTask], workers: int, address: str | None = None
) -> Iterator[EpisodeOutput]:
    """Run ``tasks`` as Ray tasks; yield each :class:`EpisodeOutput` as it finishes."""
    return ray_map(run_episode, tasks, workers, _failed, address)
