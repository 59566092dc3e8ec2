"""Hyperparameter schedules written as text in an algorithm config, as rl-baselines3-zoo does.

``learning_rate: lin_3.0e-4`` (or ``clip_range: lin_0.2``) decays the value linearly from the
number given at the start of training to 0 at ``total_timesteps``: SB3 calls the schedule with
``progress_remaining`` (1 at the start, 0 at the end). Only the hyperparameters SB3 takes as
schedules accept it (:data:`SCHEDULED`); anything else written as text is a ConfigError naming
the fix.

The schedule is rl-baselines3-zoo's ``linear_schedule`` (``rl_zoo3.utils``): the same text, the
same numbers (``tests/test_schedules.py`` checks them equal when rl_zoo3 is installed). It is not
imported from there on purpose: SB3 pickles the schedule object into every saved ``model.zip``
by reference to its class, so a model trained with ``rl_zoo3.utils.SimpleLinearSchedule`` could
not be loaded where the ``zoo`` extra is absent (SB3's loader does not catch the
``ModuleNotFoundError``), and importing ``rl_zoo3.utils`` costs about 2 s (it imports
huggingface_sb3 and torch). A fallback chosen by what is installed would make the same config
save models of two kinds. ``python -m aryl_gym.train.zoo`` (rl_zoo3's trainer) builds rl_zoo3's
own from the same text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aryl_gym.config import ConfigError

__all__ = ["SCHEDULED", "LinearSchedule", "parse_schedule", "resolve_schedules"]

#: Hyperparameters that SB3's on-policy algorithms accept as a schedule (a callable of
#: ``progress_remaining``).
SCHEDULED: tuple[str, ...] = ("learning_rate", "clip_range", "clip_range_vf")


@dataclass(frozen=True)
class LinearSchedule:
    """``start * progress_remaining``: ``start`` at the first update, 0 at the end of training.
    A class rather than a closure so that a saved model's schedule reads well and pickles."""

    start: float

    def __call__(self, progress_remaining: float) -> float:
        return self.start * float(progress_remaining)


def parse_schedule(key: str, value: Any, source: str = "config") -> Any:
    """``value`` of hyperparameter ``key``: a ``lin_<number>`` text becomes a
    :class:`LinearSchedule`; any other value is returned unchanged. A malformed schedule, or a
    schedule for a hyperparameter outside :data:`SCHEDULED`, is a ConfigError."""
    if not isinstance(value, str) or not value.startswith("lin_"):
        return value
    if key not in SCHEDULED:
        raise ConfigError(
            f"{source}: hyperparameter {key}: {value!r}: only {', '.join(SCHEDULED)} take a "
            f"schedule; write a number"
        )
    text = value[len("lin_"):]
    try:
        start = float(text)
    except ValueError:
        start = math.nan
    if not (math.isfinite(start) and start > 0):
        raise ConfigError(
            f"{source}: hyperparameter {key}: {value!r} is not a linear schedule; write lin_ and "
            f"the starting value, a number > 0, e.g. {key}: lin_3.0e-4"
        )
    return LinearSchedule(start)


def resolve_schedules(hyperparams: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """``hyperparams`` with every ``lin_<number>`` text turned into a :class:`LinearSchedule`."""
    return {k: parse_schedule(k, v, source) for k, v in hyperparams.items()}
