"""Data paths: traces are referenced relative to a data root, never by machine paths."""

from __future__ import annotations

import os
from pathlib import Path

from aryl_gym.config import ConfigError

#: Environment variable naming the folder that holds the public traces (``traces/...``).
DATA_ROOT_ENV = "ARYL_GYM_DATA"
#: Where the data root holds the Pollux application profiles.
POLLUX_PROFILES = "traces/pollux-philly/traces"


def default_data_root() -> Path | None:
    """``$ARYL_GYM_DATA``, else ``../shared`` beside the repository checkout if present."""
    env = os.environ.get(DATA_ROOT_ENV)
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2]
    cand = here.parent / "shared"
    return cand if cand.exists() else None


def resolve_data_path(path: str, data_root: str | os.PathLike[str] | None = None) -> Path:
    """Resolve ``path``: absolute or existing paths as they are, else relative to the data root."""
    p = Path(path)
    try:
        if p.is_absolute() or p.exists():
            return _regular(p)
    except OSError as exc:  # e.g. a file name longer than the system allows
        raise ConfigError(f"{str(path)[:80]}...: not a usable path ({exc.strerror or exc}); "
                          "check the file name") from None
    root = Path(data_root) if data_root else default_data_root()
    if root is None:
        raise ConfigError(
            f"{path}: relative data path but no data root; pass --data-root DIR or set "
            f"{DATA_ROOT_ENV}=DIR (the folder that holds traces/)"
        )
    full = root / p
    if not full.exists():
        raise ConfigError(
            f"{full}: not found (data root {root}); check --data-root or {DATA_ROOT_ENV}"
        )
    return _regular(full)


def _regular(p: Path) -> Path:
    """``p`` unless it exists and is a device, a FIFO or a socket: reading ``/dev/zero`` as a
    data file never ends (a folder or a missing file is left to the reader's own message)."""
    if p.exists() and not p.is_file() and not p.is_dir():
        raise ConfigError(f"{p}: not a regular file (a device, FIFO or socket); give a data file")
    return p
