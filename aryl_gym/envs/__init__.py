"""Gymnasium environments (registered on ``import aryl_gym``)."""


def register_envs() -> None:
    """Register the environments with Gymnasium (idempotent)."""
    return None
