"""Where a saved model's VecNormalize statistics live, and reading them (a training resume and
:func:`aryl_gym.agents.learned.load_agent` share both)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any


def statistics_candidates(model: Path) -> list[Path]:
    """The files that may hold ``model``'s statistics, the most specific first: a checkpoint's own
    (SB3's ``rl_model_vecnormalize_N_steps.pkl``), ``<stem>_vecnormalize.pkl``,
    ``best_model.zip``'s ``best_vecnormalize.pkl``, the final ``vecnormalize.pkl``."""
    stem, d = model.stem, model.parent
    m = re.fullmatch(r"(.+)_(\d+)_steps", stem)
    out = [d / f"{m.group(1)}_vecnormalize_{m.group(2)}_steps.pkl"] if m else []
    out += [d / f"{stem}_vecnormalize.pkl", d / f"{stem.replace('model', 'vecnormalize')}.pkl",
            d / "vecnormalize.pkl"]
    return list(dict.fromkeys(out))


def statistics_path(model: Path) -> Path | None:
    """The first of :func:`statistics_candidates` that exists."""
    return next((c for c in statistics_candidates(model) if c.is_file()), None)


def read_statistics(path: Path) -> Any:
    """The VecNormalize object pickled at ``path``; a ValueError saying why it cannot be used
    (cut or damaged, or not VecNormalize statistics)."""
    try:
        with open(path, "rb") as fh:
            obj = pickle.load(fh)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        raise ValueError(f"cannot be read (cut or damaged: {type(exc).__name__}: {exc})") from None
    if not hasattr(obj, "obs_rms") or not hasattr(obj, "normalize_obs"):
        raise ValueError(f"holds a {type(obj).__name__}, not VecNormalize statistics")
    return obj
