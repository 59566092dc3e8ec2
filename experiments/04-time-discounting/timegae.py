"""Discounting by simulated time: GAE over a semi-Markov decision process.

The env's steps cover very different spans of simulated time: in the ``sequential`` action mode
most steps are sub-steps of one decision point (a grant or a release; no time passes) and the
commit then jumps to the next event. PPO's ``gamma`` discounts *per step*, so every sub-step
costs the future a factor ``gamma`` although nothing happened: the learner is paid to commit
early (skip grants and releases) while its expected return is positive and to stall with
sub-steps while it is negative, an artefact of the step count, not of the schedule. In the
semi-MDP view (Bradtke and Duff, NIPS '94) a step that covers ``dt`` seconds is discounted by
``exp(-dt / horizon)``; sub-steps are not discounted at all, and the horizon is a span of
simulated time.

:class:`TimeDiscountMixin` (constructor argument ``time_horizon_hours``) reads each step's ``dt`` from
``info["elapsed"]`` (set by the allocation env), stores it next to the rollout buffer and computes
GAE with the per-step discount ``exp(-dt / horizon)`` in place of ``gamma`` (``gae_lambda`` still
applies per step). A truncated episode's bootstrap (SB3 adds ``gamma * V(final obs)`` to the last
reward) keeps ``gamma``. Saved models are plain ``MaskablePPO`` zips.

In a training config (with this folder on ``PYTHONPATH``)::

    model_class: timegae:TimeMaskablePPO       # timegae:TimeTeacherMaskablePPO with a teacher
    hyperparams: {time_horizon_hours: 6, ...}
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer, MaskableRolloutBuffer

from aryl_gym.train.teacher import TeacherMaskablePPO


def time_gae(buf: Any, last_values: th.Tensor, dones: np.ndarray, elapsed: np.ndarray,
             horizon_s: float) -> None:
    """SB3's ``compute_returns_and_advantage`` with the discount ``exp(-elapsed / horizon_s)``
    per step (``elapsed``: ``(buffer_size, n_envs)`` simulated seconds each step covered)."""
    last = last_values.clone().cpu().numpy().flatten()
    disc = np.exp(-np.asarray(elapsed, dtype=np.float64) / float(horizon_s)).astype(np.float32)
    gae = np.zeros(buf.n_envs, dtype=np.float32)
    for step in reversed(range(buf.buffer_size)):
        if step == buf.buffer_size - 1:
            non_terminal = 1.0 - dones.astype(np.float32)
            next_values = last
        else:
            non_terminal = 1.0 - buf.episode_starts[step + 1]
            next_values = buf.values[step + 1]
        d = disc[step]
        delta = buf.rewards[step] + d * next_values * non_terminal - buf.values[step]
        gae = delta + d * buf.gae_lambda * non_terminal * gae
        buf.advantages[step] = gae
    buf.returns = buf.advantages + buf.values


class _TimeGAEBuffer:
    """Rollout buffer part: ``elapsed`` per stored step and :func:`time_gae`."""

    horizon_s: float = 0.0
    elapsed: np.ndarray

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        shape = (getattr(self, "buffer_size"), getattr(self, "n_envs"))  # noqa: B009 (the buffer's)
        self.elapsed = np.zeros(shape, dtype=np.float64)

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        time_gae(self, last_values, dones, self.elapsed, self.horizon_s)


class TimeGAERolloutBuffer(_TimeGAEBuffer, MaskableRolloutBuffer):
    """``MaskableRolloutBuffer`` with discounting by simulated time."""


class TimeGAEDictRolloutBuffer(_TimeGAEBuffer, MaskableDictRolloutBuffer):
    """``MaskableDictRolloutBuffer`` with discounting by simulated time."""


class TimeDiscountMixin:
    """An on-policy masked algorithm whose GAE discounts by simulated time (module docstring).
    ``time_horizon_hours``: the horizon (``exp(-dt / horizon)`` per step)."""

    def __init__(self, *args: Any, time_horizon_hours: float | None = None, **kwargs: Any):
        # None only when SB3's ``load`` builds the object (the saved horizon is restored after)
        self.time_horizon_s: float | None = None
        if time_horizon_hours is not None:
            h = float(time_horizon_hours)
            if not (h > 0 and np.isfinite(h)):
                raise ValueError(
                    f"time_horizon_hours must be a positive number of hours, got {time_horizon_hours!r}"
                )
            self.time_horizon_s = h * 3600.0
        super().__init__(*args, **kwargs)

    def _setup_model(self) -> None:
        from gymnasium import spaces

        if self.time_horizon_s is None:
            raise ValueError("time_horizon_hours is required (a positive number of hours)")
        dict_obs = isinstance(self.observation_space, spaces.Dict)  # type: ignore[attr-defined]
        setattr(self, "rollout_buffer_class", TimeGAEDictRolloutBuffer if dict_obs else TimeGAERolloutBuffer)  # noqa: B010
        super()._setup_model()  # type: ignore[misc]
        self.rollout_buffer.horizon_s = self.time_horizon_s  # type: ignore[attr-defined]

    def _excluded_save_params(self) -> list[str]:
        # saved zips load as plain MaskablePPO, with its own buffer
        return [*super()._excluded_save_params(), "rollout_buffer_class"]  # type: ignore[misc]

    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: np.ndarray | None = None) -> None:
        # called by collect_rollouts after env.step and before rollout_buffer.add: ``pos`` is
        # the row of the step these infos close
        super()._update_info_buffer(infos, dones)  # type: ignore[misc]
        buf = getattr(self, "rollout_buffer", None)
        if buf is None or buf.full:
            return
        try:
            buf.elapsed[buf.pos] = [float(i["elapsed"]) for i in infos]
        except KeyError:
            raise ValueError(
                "time_horizon_hours needs info['elapsed'] from the env (the allocation env sets it)"
            ) from None


class TimeMaskablePPO(TimeDiscountMixin, MaskablePPO):
    """``MaskablePPO`` with discounting by simulated time."""


class TimeTeacherMaskablePPO(TimeDiscountMixin, TeacherMaskablePPO):
    """:class:`~aryl_gym.train.teacher.TeacherMaskablePPO` with discounting by simulated time."""
