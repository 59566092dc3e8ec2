"""Gymnasium environments (registered on ``import aryl_gym``).

* ``aryl_gym/Aryl-v1`` -- allocation: :class:`aryl_gym.envs.allocation.ArylEnv`.
* ``aryl_gym/ArylReclaim-v1`` -- reclaim: :class:`aryl_gym.envs.reclaim.ArylReclaimEnv`.

``gym.make("aryl_gym:Aryl-v1", scenario="testbed", action_mode="sequential")`` imports the package
(and so registers) on its own: for that form the ids are also registered without the namespace
(``Aryl-v1``, ``ArylReclaim-v1``), as aliases of the same classes. See ``docs/env.md``.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENV_IDS: tuple[str, ...] = ("aryl_gym/Aryl-v1", "aryl_gym/ArylReclaim-v1")


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""

    entries = {
        "aryl_gym/Aryl-v1": "aryl_gym.envs.allocation:ArylEnv",
        "aryl_gym/ArylReclaim-v1": "aryl_gym.envs.reclaim:ArylReclaimEnv",
        # aliases for the "module:id" form, gym.make("aryl_gym:Aryl-v1")
        "Aryl-v1": "aryl_gym.envs.allocation:ArylEnv",
        "ArylReclaim-v1": "aryl_gym.envs.reclaim:ArylReclaimEnv",
    }
    for env_id, entry in entries.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry, disable_env_checker=True)


__all__ = ["ENV_IDS", "register_envs"]
