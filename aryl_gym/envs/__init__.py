"""Gymnasium environments (registered on ``import aryl_gym``).

* ``aryl_gym/Aryl-v2`` -- allocation: :class:`aryl_gym.envs.allocation.ArylEnv` on World v2
  (the shipped scenarios as ``configs/scenarios/`` holds them; :mod:`aryl_gym.world_versions`).
* ``aryl_gym/ArylReclaim-v2`` -- reclaim: :class:`aryl_gym.envs.reclaim.ArylReclaimEnv`, World v2.
* ``aryl_gym/Aryl-v1``, ``aryl_gym/ArylReclaim-v1`` -- the same classes on World v1 (the shipped
  scenarios with World v1's knob values), kept so results and agents made on it reproduce.

``gym.make("aryl_gym:Aryl-v1", scenario="testbed", action_mode="sequential")`` imports the package
(and so registers) on its own: for that form the ids are also registered without the namespace
(``Aryl-v1``, ``ArylReclaim-v1``), as aliases of the same classes. See ``docs/env.md``.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENV_IDS: tuple[str, ...] = (
    "aryl_gym/Aryl-v2",
    "aryl_gym/ArylReclaim-v2",
    "aryl_gym/Aryl-v1",
    "aryl_gym/ArylReclaim-v1",
)
#: the allocation env of the current world
DEFAULT_ENV_ID = "aryl_gym/Aryl-v2"


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""

    entries: dict[str, tuple[str, str]] = {}
    for world in ("v1", "v2"):
        for name, entry in (("Aryl", "aryl_gym.envs.allocation:ArylEnv"),
                            ("ArylReclaim", "aryl_gym.envs.reclaim:ArylReclaimEnv")):
            entries[f"aryl_gym/{name}-{world}"] = (entry, world)
            # alias for the "module:id" form, gym.make("aryl_gym:Aryl-v2")
            entries[f"{name}-{world}"] = (entry, world)
    for env_id, (entry, world) in entries.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry, disable_env_checker=True,
                     kwargs={"world_version": world})


__all__ = ["DEFAULT_ENV_ID", "ENV_IDS", "register_envs"]
