"""A stable-baselines3 ``VecEnv`` over the batched vector envs (needs the ``train`` extra).

:func:`aryl_gym.envs.vector.sb3_vec_env` is the way in; this module imports stable-baselines3
(and so torch) and is imported only then, so ``import aryl_gym`` stays free of torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices


class SB3ArylVecEnv(VecEnv):
    """SB3's ``VecEnv`` protocol on an :class:`~aryl_gym.envs.vector.ArylVectorEnv` (or its async
    variant) made with ``autoreset_mode="same_step"``: a finished env is reset in the step that
    ends it, its last observation in ``infos[i]["terminal_observation"]``, and
    ``infos[i]["TimeLimit.truncated"]`` set as SB3's ``DummyVecEnv`` sets it, so the results are
    those of a ``DummyVecEnv`` over the same envs (tested). ``env_method("action_masks")`` gives
    the masks for sb3-contrib's MaskablePPO."""

    def __init__(self, venv: Any):
        # an ArylVectorEnv or ArylAsyncVectorEnv (duck-typed: this module does not import
        # aryl_gym.envs.vector, which imports it)
        if not all(hasattr(venv, a) for a in ("step_raw", "reset_raw", "autoreset_mode")):
            raise TypeError(f"venv must be an ArylVectorEnv or ArylAsyncVectorEnv, got {type(venv).__name__}")
        if venv.autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ValueError(
                "SB3 resets a finished env in the step that ends it: make the vector env with "
                "autoreset_mode='same_step', e.g. gym.make_vec(id, num_envs=8, autoreset_mode='same_step')"
            )
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self.metadata = venv.metadata
        self._actions: Any = None

    def reset(self) -> Any:
        seeds = list(self._seeds)
        opts = self._options
        obs: Any = None
        infos: list[Any] = [None] * self.num_envs
        if any(o != opts[0] for o in opts):  # per-env options: one env at a time
            for i in range(self.num_envs):
                m = np.zeros(self.num_envs, dtype=bool)
                m[i] = True
                obs, part = self.venv.reset_raw(seed=seeds, options={**(opts[i] or {}), "reset_mask": m})
                infos[i] = part[i]
        else:
            obs, infos = self.venv.reset_raw(seed=seeds, options=opts[0] or None)
        self.reset_infos = [dict(i or {}) for i in infos]
        self._reset_seeds()
        self._reset_options()
        return {k: v.copy() for k, v in obs.items()}

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> Any:
        obs, rew, te, tr, infos = self.venv.step_raw(self._actions)
        out: list[dict[str, Any]] = []
        dones = np.logical_or(te, tr)
        for i, info in enumerate(infos):
            if dones[i]:
                d = dict(info["final_info"])
                d["TimeLimit.truncated"] = bool(tr[i] and not te[i])
                d["terminal_observation"] = info["final_obs"]
                self.reset_infos[i] = {k: v for k, v in info.items() if k not in ("final_obs", "final_info")}
            else:
                d = dict(info)
                d["TimeLimit.truncated"] = False
            out.append(d)
        return {k: v.copy() for k, v in obs.items()}, rew.astype(np.float32), dones, out

    def close(self) -> None:
        self.venv.close()

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        vals = self.venv.get_attr(attr_name)
        return [vals[i] for i in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        cur = list(self.venv.get_attr(attr_name)) if indices is not None else [value] * self.num_envs
        for i in self._indices(indices):
            cur[i] = value
        self.venv.set_attr(attr_name, cur)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any) -> list[Any]:
        idx = self._indices(indices)
        if method_name == "action_masks" and not method_args and not method_kwargs:
            masks = self.venv.action_masks()
            return [masks[i] for i in idx]
        vals = self.venv.call(method_name, *method_args, **method_kwargs)
        return [vals[i] for i in idx]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def get_images(self) -> Sequence[np.ndarray | None]:
        return list(self.venv.render() or ())
