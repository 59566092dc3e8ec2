"""Gymnasium environments (registered on ``import aryl_gym``).

* ``aryl_gym/Aryl-v1`` -- allocation: :class:`aryl_gym.envs.allocation.ArylEnv`.
* ``aryl_gym/ArylReclaim-v1`` -- reclaim: :class:`aryl_gym.envs.reclaim.ArylReclaimEnv`.

``gym.make("aryl_gym:Aryl-v1", scenario="testbed", action_mode="sequential")`` imports the package
(and so registers) on its own: for that form the ids are also registered without the namespace
(``Aryl-v1``, ``ArylReclaim-v1``), as aliases of the same classes. See ``docs/env.md``.
"""

from __future__ import annotations

import functools
from typing import Any

ENV_IDS: tuple[str, ...] = ("aryl_gym/Aryl-v1", "aryl_gym/ArylReclaim-v1")

#: The registration table: id -> (entry point, batched vector env?). An id marked True gets
#: the vector entry point (:func:`vector_entry`, bound to the id), so ``gym.make_vec(id,
#: num_envs=N)`` builds :class:`aryl_gym.envs.vector.ArylVectorEnv` over that id's env class; a
#: new ``-vN`` allocation id gets it by its one entry here.
ENTRIES: dict[str, tuple[str, bool]] = {
    "aryl_gym/Aryl-v1": ("aryl_gym.envs.allocation:ArylEnv", True),
    "aryl_gym/ArylReclaim-v1": ("aryl_gym.envs.reclaim:ArylReclaimEnv", False),
    # aliases for the "module:id" form, gym.make("aryl_gym:Aryl-v1")
    "Aryl-v1": ("aryl_gym.envs.allocation:ArylEnv", True),
    "ArylReclaim-v1": ("aryl_gym.envs.reclaim:ArylReclaimEnv", False),
}


def vector_entry(env_id: str, num_envs: int = 1, **kwargs: Any) -> Any:
    """The vector entry point of ``env_id`` (``gym.make_vec`` calls it with ``num_envs`` and
    the env's arguments; ``workers=W`` splits the envs over W processes):
    :func:`aryl_gym.envs.vector.make_vector`."""
    from aryl_gym.envs.vector import make_vector

    return make_vector(env_id, num_envs=num_envs, **kwargs)


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for env_id, (entry, vector) in ENTRIES.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=entry,
                vector_entry_point=functools.partial(vector_entry, env_id) if vector else None,
                disable_env_checker=True,
            )


__all__ = ["ENTRIES", "ENV_IDS", "register_envs", "vector_entry"]
