"""Gymnasium environments (registered on ``import aryl_gym``).

* ``aryl_gym/Aryl-v0`` -- allocation: :class:`aryl_gym.envs.allocation.ArylEnv`.
* ``aryl_gym/ArylReclaim-v0`` -- reclaim: :class:`aryl_gym.envs.reclaim.ArylReclaimEnv`.

``gym.make("aryl_gym:Aryl-v0", scenario="testbed", action_mode="sequential")`` imports the package
(and so registers) on its own: for that form the ids are also registered without the namespace
(``Aryl-v0``, ``ArylReclaim-v0``), as aliases of the same classes. See ``docs/env.md``.
"""

from __future__ import annotations

ENV_IDS: tuple[str, ...] = ("aryl_gym/Aryl-v0", "aryl_gym/ArylReclaim-v0")


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    entries = {
        "aryl_gym/Aryl-v0": "aryl_gym.envs.allocation:ArylEnv",
        "aryl_gym/ArylReclaim-v0": "aryl_gym.envs.reclaim:ArylReclaimEnv",
        # aliases for the "module:id" form, gym.make("aryl_gym:Aryl-v0")
        "Aryl-v0": "aryl_gym.envs.allocation:ArylEnv",
        "ArylReclaim-v0": "aryl_gym.envs.reclaim:ArylReclaimEnv",
    }
    for env_id, entry in entries.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry, disable_env_checker=True)


__all__ = ["ENV_IDS", "register_envs"]
