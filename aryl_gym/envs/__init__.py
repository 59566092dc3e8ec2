"""Gymnasium environments (registered on ``import aryl_gym``).

* ``aryl_gym/Aryl-v2`` -- allocation: :class:`aryl_gym.envs.allocation.ArylEnv` on World v2
  (the shipped scenarios as ``configs/scenarios/`` holds them; :mod:`aryl_gym.world_versions`).
* ``aryl_gym/ArylReclaim-v2`` -- reclaim: :class:`aryl_gym.envs.reclaim.ArylReclaimEnv`, World v2.
* ``aryl_gym/Aryl-v1``, ``aryl_gym/ArylReclaim-v1`` -- the same classes on World v1 (the shipped
  scenarios with World v1's knob values), kept so results and agents made on it reproduce.
* ``aryl_gym/ArylMO-v2`` (``-v1``) -- the multi-objective view: the allocation env with a vector
  reward in MO-Gymnasium's API (:class:`aryl_gym.envs.mo.ArylMOEnv`; :data:`MO_ENTRIES`).

``gym.make("aryl_gym:Aryl-v2", scenario="testbed", action_mode="sequential")`` imports the package
(and so registers) on its own: for that form the ids are also registered without the namespace
(``Aryl-v2``, ``ArylReclaim-v2``, ...), as aliases of the same classes. See ``docs/env.md``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from gymnasium.envs.registration import register, registry

ENV_IDS: tuple[str, ...] = (
    "aryl_gym/Aryl-v2",
    "aryl_gym/ArylReclaim-v2",
    "aryl_gym/Aryl-v1",
    "aryl_gym/ArylReclaim-v1",
)
#: the allocation env of the current world
DEFAULT_ENV_ID = "aryl_gym/Aryl-v2"

#: The registration table: id -> (entry point, batched vector env?, world version). An id marked
#: True gets the vector entry point (:func:`vector_entry`, bound to the id), so
#: ``gym.make_vec(id, num_envs=N)`` builds :class:`aryl_gym.envs.vector.ArylVectorEnv` over that
#: id's env class; every id passes its world version to the env (``world_version``).
ENTRIES: dict[str, tuple[str, bool, str]] = {}
for _world in ("v2", "v1"):
    for _name, _entry, _vec in (("Aryl", "aryl_gym.envs.allocation:ArylEnv", True),
                                ("ArylReclaim", "aryl_gym.envs.reclaim:ArylReclaimEnv", False)):
        ENTRIES[f"aryl_gym/{_name}-{_world}"] = (_entry, _vec, _world)
        # alias for the "module:id" form, gym.make("aryl_gym:Aryl-v2")
        ENTRIES[f"{_name}-{_world}"] = (_entry, _vec, _world)


#: The multi-objective views: id -> world version (:class:`aryl_gym.envs.mo.ArylMOEnv`). They are
#: registered without Gymnasium's passive checker, as ``mo_gymnasium.make`` does for its own envs:
#: the checker warns that a vector reward is not a float.
MO_ENTRIES: dict[str, str] = {}
for _world in ("v2", "v1"):
    MO_ENTRIES[f"aryl_gym/ArylMO-{_world}"] = _world
    MO_ENTRIES[f"ArylMO-{_world}"] = _world


def vector_entry(env_id: str, num_envs: int = 1, **kwargs: Any) -> Any:
    """The vector entry point of ``env_id`` (``gym.make_vec`` calls it with ``num_envs`` and
    the env's arguments; ``workers=W`` splits the envs over W processes):
    :func:`aryl_gym.envs.vector.make_vector`."""
    # the vector env module (and gymnasium.vector) only when a vector env is made
    from aryl_gym.envs.vector import make_vector

    return make_vector(env_id, num_envs=num_envs, **kwargs)


def _vector_entry_name(env_id: str) -> str:
    """The module attribute holding ``env_id``'s vector entry point (``_vec_aryl_gym_Aryl_v2``)."""
    return "_vec_" + re.sub(r"\W", "_", env_id)


# One named function per vector env id, so that a spec names its vector entry point as text
# ("aryl_gym.envs:_vec_..."), as Gymnasium's EnvSpec.to_json needs (a functools.partial made
# gym.make("aryl_gym/Aryl-v2").spec.to_json() raise)
for _id, (_entry, _vec, _world) in ENTRIES.items():
    if _vec:
        globals()[_vector_entry_name(_id)] = functools.partial(vector_entry, _id)
# the multi-objective ids too: the batched env refuses their vector reward with a ValueError
# naming MO-Gymnasium's vector env (was: Gymnasium's SyncVectorEnv, whose first step raised
# numpy's "setting an array element with a sequence")
for _id in MO_ENTRIES:
    globals()[_vector_entry_name(_id)] = functools.partial(vector_entry, _id)


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""
    for env_id, (entry, vector, world) in ENTRIES.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=entry,
                vector_entry_point=f"{__name__}:{_vector_entry_name(env_id)}" if vector else None,
                # Gymnasium's passive checker (first reset and step): its cost is within
                # measurement noise, about 1% of step time (docs/env.md, scripts/env_checker_cost.py)
                disable_env_checker=False,
                kwargs={"world_version": world},
            )
    for env_id, world in MO_ENTRIES.items():
        if env_id not in registry:
            register(id=env_id, entry_point="aryl_gym.envs.mo:ArylMOEnv", disable_env_checker=True,
                     vector_entry_point=f"{__name__}:{_vector_entry_name(env_id)}",
                     kwargs={"world_version": world})


__all__ = ["DEFAULT_ENV_ID", "ENTRIES", "ENV_IDS", "MO_ENTRIES", "register_envs", "vector_entry"]
